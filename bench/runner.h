/* SPDX-License-Identifier: MIT */
// runner.h - the parts of ak_bench, the benchmark runner, as its files see
// each other (scenarios see bench.h only):
//   main.cpp            the commands (list, run, child, info) and the run of
//                       one scenario: its children, interleaved, and its report
//   cli.cpp             `ak_bench run`'s options and scenario names
//   allocators.cpp      which mallocs are installed, where, which version
//   machine.cpp         what the figures were measured on
//   child_process.cpp   one child process: start, read its key=value lines,
//                       check that its LD_PRELOAD took; the child's side
//   results_writer.cpp  tables as Markdown and CSV, the checks' lines, and
//                       <out>/<scenario>.{md,csv,table.md,svg}, headline-tables.md
//   hardened_cost.cpp   the hardened build's cost (--hardened-exe)
//   measurements.cpp    emit() on the child's side, RunData's medians on the parent's
//   runner_util.cpp     shell commands, quoting, files, number formatting
#ifndef AK_BENCH_RUNNER_H
#define AK_BENCH_RUNNER_H

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "bench.h"

namespace akb {

namespace fs = std::filesystem;

// ---- runner_util.cpp --------------------------------------------------------------

// Runs a shell command, returns its stdout ("" when it fails).
std::string capture(const std::string &cmd);
// `s` without leading and trailing white space.
std::string trim(std::string s);
// `s` quoted for the shell.
std::string shell_quote(const std::string &s);
// `v` with `precision` decimals; "n/a" for NaN.
std::string fmt_num(double v, int precision);
// Writes `text` to `p` (false, with a message, when it cannot).
bool write_file(const fs::path &p, const std::string &text);
// The contents of `p` ("" when it cannot be read).
std::string read_file(const fs::path &p);

// ---- allocators.cpp ---------------------------------------------------------------

// The installed mallocs among `wanted` (every known one if empty), in column
// order; `missing` gets one line per absent one.
std::vector<Allocator> detect_allocators(const std::vector<std::string> &wanted,
                                         std::vector<std::string> &missing);
// The version of Debian's libc6 package ("" when dpkg does not know it).
std::string libc_package_version();

// ---- machine.cpp ------------------------------------------------------------------

// "<model name> (family F, model M)[, virtual machine]".
std::string cpu_model();
// The Markdown list that heads each result file: CPU, OS, glibc, the
// allocators' packages, compiler and date.
std::string machine_md(const std::vector<Allocator> &allocs);

// ---- child_process.cpp ------------------------------------------------------------

// This program's path.
std::string self_exe();
// Runs one child (`exe_path ["": this program] child <scenario> <allocator>
// params...`) with the allocator's LD_PRELOAD; returns false if it failed
// or its malloc did not come from the allocator. Its "key=value" lines go
// to `nums` (numbers) and `strs` (anything else); `order`, if given, gets
// the numbers' keys in the order printed.
bool run_child(const Scenario &sc, const Allocator &al, const Params &params,
               std::map<std::string, double> &nums, std::map<std::string, std::string> &strs,
               const std::string &exe_path = "", std::vector<std::string> *order = nullptr);
// `ak_bench child <scenario> <allocator> key=value...`: the child's side.
int child_main(int argc, char **argv);

// ---- results_writer.cpp -----------------------------------------------------------

// A table as Markdown (NaN cells as "n/a").
std::string table_md(const Table &t);
// A CSV field, quoted when it must be.
std::string csv_field(const std::string &s);
// One acceptance check as printed: PASS/FAIL, or "not judged" at --quick sizes.
std::string check_line(const Check &c, bool quick);
// <dir>/headline-tables.md: the headline tables of every scenario with results
// in `dir`, registry order, then the hardened build's cost.
void write_readme_snippet(const fs::path &dir);
// Writes <out>/<scenario>.{md,csv,table.md}, raw/<scenario>.csv, the plot
// (`plot`: <scenario>.svg through bench/plot.py) and headline-tables.md.
// `method` says how the figures were taken. False if a file was not written.
bool write_scenario_results(const Scenario &sc, const Report &rep, const RunData &data, const Options &opts,
                            const std::vector<std::string> &missing, const std::string &method, bool plot);

// ---- hardened_cost.cpp ------------------------------------------------------------

struct HardenedOptions {
  std::string exe;    // the hardened ak_bench ("": no comparison)
  bool only = false;  // skip the normal scenario runs
  int reps = 0;       // repetitions (0: the scenario's, at least 3)
  std::string tag;    // file name suffix: hardened-cost-<tag>.*
};

// `ak_bench info`: how this program was built.
int info_main();
// The hardened build's cost for the scenarios `todo` (their parameters from
// `prepared` when they ran, else prepared anew); clears `all_pass` when its
// check fails on a full run. Returns 0, or 1 on an error.
int hardened_cost(const std::vector<const Scenario *> &todo, const std::map<std::string, Params> &prepared,
                  const Options &opts, const HardenedOptions &h, bool &all_pass);

// ---- cli.cpp ----------------------------------------------------------------------

// What `ak_bench run ...` asks for.
struct RunRequest {
  Options opts;
  HardenedOptions hardened;
  std::vector<const Scenario *> todo;  // the scenarios, in the order to run
  std::vector<std::string> wanted;     // --allocators (empty: every one installed)
  bool plot = true;                    // --no-plot clears it
};

void usage();
// Parses `ak_bench run` (argv[2...]) into `req`; returns 0, or the exit
// status (2) after a message on stderr.
int parse_run_args(int argc, char **argv, RunRequest &req);

}  // namespace akb

#endif  // AK_BENCH_RUNNER_H
