/* SPDX-License-Identifier: MIT */
// bench.h - the benchmark runner's interface to its scenarios.
//
// The runner (bench/main.cpp) runs each scenario once per allocator and
// repetition, each run in a child process of its own with LD_PRELOAD set to
// that allocator's shared library (glibc: no preload). Children are
// interleaved (A B C D A B C D ...). A child prints its measurements on
// stdout as "key=value" lines (akb::emit); the parent takes, per allocator
// and key, the median over the repetitions and hands them to the scenario's
// report function, which builds the tables and acceptance checks. The runner
// prints them and writes results/<scenario>.{md,csv,svg}.
//
// Adding a scenario: write bench/scenario_<name>.cpp with its prepare,
// child and report functions and an AKB_SCENARIO(<id>, ...) line, and add
// the id to the list in bench/scenarios.cpp.
//
// Hardened-build cost (`ak_bench run ... --hardened-exe PATH`): the runner
// runs each scenario's glibc child (the unpreloaded process) with this
// ak_bench and with one built with -DAK_HARDENED=ON, interleaved, and
// compares the keys that the scenario lists in Scenario::metrics (arenakit's
// own measurements). Those children get the parameter akb_arenakit_only=1
// (akb::arenakit_only): a scenario may then skip everything that does not
// measure arenakit.
#ifndef AK_BENCH_BENCH_H
#define AK_BENCH_BENCH_H

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace akb {

// ---- child side ---------------------------------------------------------

// Seconds of CLOCK_MONOTONIC (includes time spent in the kernel).
double now_s();

// Prints "key=value" on stdout: one measurement for the parent.
void emit(const std::string &key, double value);
// The median of `v` (the mean of the middle two for an even count); NaN if empty.
double median_of(std::vector<double> v);
void emit_str(const std::string &key, const std::string &value);

// Keeps `p` alive as far as the compiler knows, without touching memory:
// the call that produced it cannot be deleted.
inline void sink(const void *p) { asm volatile("" : : "r"(p)); }
// Compiler barrier: memory may have been read or written here.
inline void clobber() { asm volatile("" : : : "memory"); }

// Starts `args[0]` with the arguments `args`, its stdout on a pipe whose
// reading end goes to *out_fd (the caller reads and closes it, and waits for
// the child), its stderr ours. LD_PRELOAD: `preload` if not empty; else
// removed (`drop_preload`) or inherited. Returns the child's pid, or -1
// after a message on stderr (bench/child_process.cpp).
pid_t spawn_piped(std::vector<std::string> args, const std::string &preload, bool drop_preload, int *out_fd);

// Reads the child's stdout from `fd` into `out` until it closes it, kills
// the child at now_s() == `kill_at` (INFINITY: never; *killed says whether
// it did), closes `fd` and waits for the child. Returns its wait status.
int wait_piped(pid_t pid, int fd, double kill_at, std::string &out, bool *killed);
// The "key=value" lines of `text`, in order (other lines are skipped).
std::vector<std::pair<std::string, std::string>> key_values(const std::string &text);

// Scenario parameters, "key=value" strings passed from parent to children.
using Params = std::map<std::string, std::string>;
std::uint64_t param_u64(const Params &p, const std::string &key, std::uint64_t def);

// Set (to "1") by the runner for the children of the hardened-cost
// comparison: only arenakit's metrics are wanted, the rest may be skipped.
constexpr const char *kArenakitOnly = "akb_arenakit_only";
inline bool arenakit_only(const Params &p) {
  auto it = p.find(kArenakitOnly);
  return it != p.end() && it->second == "1";
}

// ---- parent side ----------------------------------------------------------

struct Options {
  bool quick = false;   // short run for CI: small fixed sizes, few reps
  int reps = 0;         // repetitions of each child (0: scenario default)
  int rounds = 0;       // rounds inside each child (0: scenario default)
  std::uint64_t n = 0;  // problem size (0: calibrate)
  bool strict = false;  // exit 1 when an acceptance check fails
  int cpu = 0;          // CPU the runner and its children are pinned to (-1: none)
  std::string out_dir;  // where tables and plots go
  std::string pinned;   // how the children are pinned, for the report
};

// One allocator, i.e. one kind of child process.
struct Allocator {
  std::string label;    // "glibc", "tcmalloc", ...
  std::string path;     // the .so for LD_PRELOAD ("" for glibc)
  std::string package;  // Debian package that owns it
  std::string version;  // its version
};

// The medians of one run: per allocator label, per key.
struct RunData {
  std::vector<Allocator> allocators;  // the ones that ran, in column order
  int reps = 0;
  // every repetition's values, per allocator and key
  std::map<std::string, std::map<std::string, std::vector<double>>> samples;
  // the children's string values (from the first repetition)
  std::map<std::string, std::map<std::string, std::string>> strings;

  bool has(const std::string &alloc, const std::string &key) const;
  // median over the repetitions; NaN if absent
  double median(const std::string &alloc, const std::string &key) const;
  // median over the repetitions of num / den, each pair from one child
  // (the same repetition); NaN if either is absent
  double median_ratio(const std::string &alloc, const std::string &num, const std::string &den) const;
  double max(const std::string &alloc, const std::string &key) const;
  double min(const std::string &alloc, const std::string &key) const;
};

// A table: rows x columns of numbers (NaN prints as "n/a").
struct Table {
  std::string id;      // short name, used in the CSV ("speedup", ...)
  std::string title;   // printed above the table
  std::string corner;  // top-left header cell
  std::string unit;    // unit of the cells, for the CSV
  int precision = 3;   // decimals
  std::vector<std::string> columns;
  std::vector<std::string> rows;
  std::vector<std::vector<double>> cells;  // [row][column]
  std::string note;                        // printed below the table (optional)
};

// A table with its header fields set; columns, rows and cells to fill.
inline Table make_table(std::string id, std::string title, std::string corner, std::string unit,
                        int precision) {
  Table t;
  t.id = std::move(id);
  t.title = std::move(title);
  t.corner = std::move(corner);
  t.unit = std::move(unit);
  t.precision = precision;
  return t;
}

// An acceptance criterion evaluated on this run.
struct Check {
  std::string name;      // what is required
  double value = 0;      // what was measured
  double threshold = 0;  // the bound it must reach (value >= threshold)
  std::string unit;
  bool pass() const { return value >= threshold; }
};

// The three shapes of check the scenarios use. `speedup`: `theirs / ours`,
// at least `min_ratio` (times: ours must be that many times faster).
inline Check speedup(std::string name, double ours, double theirs, double min_ratio) {
  return {std::move(name), theirs / ours, min_ratio, "x"};
}
// `measured` at most `bound`: the value is bound / measured, at least 1.
inline Check at_most(std::string name, double measured, double bound) {
  return {std::move(name), bound / measured, 1, "x"};
}
// Every run went right (1) or not (0).
inline Check all_ok(std::string name, bool ok) { return {std::move(name), ok ? 1.0 : 0.0, 1, ""}; }

struct Report {
  std::vector<Table> tables;  // tables[0] is the headline (README) table
  std::vector<Check> checks;
  std::string details_md;  // extra Markdown (e.g. per-allocator output)
};

// One of arenakit's metrics among a scenario's emitted keys, for the
// hardened-build cost: which way is better decides how the slowdown is
// computed (lower, a time: hardened / normal; higher, a throughput:
// normal / hardened).
enum class Better { lower, higher };
struct Metric {
  const char *key;  // an emitted key of the glibc child; '*' matches any characters ("wall.threads.T*")
  Better better;
  const char *unit;  // for the report: "s", "ns", "M op/s", ...
};

struct Scenario {
  const char *name;
  const char *description;
  // Parent, before any child: choose the parameters (may calibrate).
  Params (*prepare)(const Options &opts);
  // Child: measure, emit() the results. Returns 0 on success.
  int (*child)(const Params &params);
  // Parent, after all children: the tables and checks.
  Report (*report)(const RunData &data, const Params &params);
  // arenakit's metrics (optional: a scenario without any is left out of the
  // hardened-build cost). Keys the glibc child does not emit are skipped.
  std::vector<Metric> metrics = {};
  int default_reps = 3;  // repetitions of each child
  int quick_reps = 1;    // ... with --quick
};

// Defines the scenario `akb_scenario_<id>` from the functions `prepare`,
// `child` and `report` of the file it stands in: the name, the description,
// then Scenario's other fields in order (metrics, default_reps, quick_reps),
// as many as differ from the defaults. Listed in bench/scenarios.cpp.
#define AKB_SCENARIO(id, name, description, ...) \
  extern const akb::Scenario akb_scenario_##id;  \
  const akb::Scenario akb_scenario_##id = {name, description, prepare, child, report, __VA_ARGS__}

// The registry (bench/scenarios.cpp), in `run all` order.
const std::vector<const Scenario *> &scenarios();
// The scenario called `name`; nullptr if there is none.
const Scenario *find_scenario(const std::string &name);

}  // namespace akb

#endif  // AK_BENCH_BENCH_H
