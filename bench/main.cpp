/* SPDX-License-Identifier: MIT */
// main.cpp - ak_bench, the benchmark runner (docs/benchmarks.md).
//
//   ak_bench list
//   ak_bench run <scenario|all> [--quick] [--reps N] [--rounds N] [--n N]
//                [--out DIR] [--allocators a,b,...] [--cpu N|none] [--no-plot]
//                [--strict] [--hardened-exe PATH [--hardened-only]
//                [--hardened-reps N] [--hardened-tag TAG]]
//   ak_bench info                                        (build: hardened?)
//   ak_bench child <scenario> <allocator> key=value...   (internal)
//
// `run` detects the installed mallocs, lets the scenario choose its
// parameters, then runs one child process per allocator and repetition,
// interleaved (A B C D A B C D ...), each child being this program again
// with LD_PRELOAD set to the allocator's library (glibc: no preload). It
// takes the median of every measurement over the repetitions, prints the
// scenario's tables and acceptance checks, and writes <out>/<scenario>.md,
// .csv, .table.md (headline table), .svg (bench/plot.py) and headline-tables.md
// (the headline tables of every scenario whose results are in <out>;
// scripts/bench.sh copies them into docs/benchmarks.md, "Current figures").
// With --hardened-exe PATH it then measures the hardened build's cost
// (hardened_cost.cpp). runner.h lists the runner's other files.
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "bench_util.h"
#include "runner.h"

namespace akb {
namespace {

// Runs one scenario: its children, interleaved, then its report, printed
// and written to opts.out_dir. `params` gets the parameters it chose.
// `progress`: "scenario i of n, elapsed ..." for the heading.
int run_scenario(const Scenario &sc, const Options &opts, const std::vector<Allocator> &allocs,
                 const std::vector<std::string> &missing, bool plot, bool &all_pass, Params &params,
                 const std::string &progress) {
  int reps = opts.reps > 0 ? opts.reps : (opts.quick ? sc.quick_reps : sc.default_reps);
  std::printf("== [%s] %s: %s\n", progress.c_str(), sc.name, sc.description);
  std::fflush(stdout);
  params = sc.prepare(opts);
  RunData data;
  data.allocators = allocs;
  data.reps = reps;
  double t_start = now_s();
  for (int r = 0; r < reps; r++) {
    for (const auto &al : allocs) {
      double t0 = now_s();
      std::map<std::string, double> nums;
      std::map<std::string, std::string> strs;
      if (!run_child(sc, al, params, nums, strs)) return 1;
      for (const auto &kv : nums) data.samples[al.label][kv.first].push_back(kv.second);
      if (r == 0) data.strings[al.label] = strs;
      std::fprintf(stderr, "  [%s rep %d/%d] %-9s %.1f s\n", sc.name, r + 1, reps, al.label.c_str(),
                   now_s() - t0);
    }
  }
  double elapsed = now_s() - t_start;
  Report rep = sc.report(data, params);

  std::string params_line;
  for (const auto &kv : params) params_line += (params_line.empty() ? "" : ", ") + kv.first + "=" + kv.second;
  // A multi-threaded scenario's children widen the runner's pinning to every
  // CPU (widen_affinity) and say how many they got.
  std::string placement = opts.pinned;
  for (const auto &al : allocs)
    if (data.has(al.label, "cpus")) {
      placement += opts.cpu >= 0 ? "; the children's threads on " : ", the children's threads on ";
      placement += fmt_num(data.median(al.label, "cpus"), 0) + " CPUs";
      break;
    }
  std::string method =
      std::to_string(reps) + (reps == 1 ? " repetition" : " interleaved repetitions") +
      " of one child process per allocator (" + std::to_string(allocs.size()) + " allocators, LD_PRELOAD, " +
      placement + "), medians quoted; parameters: " + params_line +
      (opts.quick ? " (--quick: not for publication)" : "") + "; " + fmt_num(elapsed, 0) + " s.";

  // stdout
  std::printf("\nAllocators: ");
  for (std::size_t i = 0; i < allocs.size(); i++)
    std::printf("%s%s %s", i ? ", " : "", allocs[i].label.c_str(), allocs[i].version.c_str());
  std::printf("\n");
  for (const auto &m : missing) std::printf("Missing: %s\n", m.c_str());
  std::printf("Method: %s\n", method.c_str());
  for (const auto &t : rep.tables) {
    std::printf("\n%s\n\n%s", t.title.c_str(), table_md(t).c_str());
    if (!t.note.empty()) std::printf("\n%s\n", t.note.c_str());
  }
  std::printf("\nAcceptance (computed from this run%s):\n",
              opts.quick ? "; --quick sizes are too small to judge it, use the full run" : "");
  for (const auto &c : rep.checks) {
    std::printf("%s\n", check_line(c, opts.quick).c_str());
    if (!opts.quick && !c.pass()) all_pass = false;
  }
  std::printf("\n");
  std::fflush(stdout);

  return write_scenario_results(sc, rep, data, opts, missing, method, plot) ? 0 : 1;
}

int run_main(int argc, char **argv) {
  RunRequest req;
  if (int rc = parse_run_args(argc, argv, req)) return rc;
  Options &opts = req.opts;
  // Pin the runner, and so every child (they inherit the affinity), to one
  // CPU: on a shared or virtual machine the CPUs need not be equally fast,
  // and all columns must be measured on the same one.
  std::string pinned = "not pinned";
  if (opts.cpu >= 0) {
    if (pin_to_cpu(opts.cpu)) {
      pinned = "pinned to CPU " + std::to_string(opts.cpu);
    } else {
      std::fprintf(stderr, "ak_bench: cannot pin to CPU %d (%s); running unpinned\n", opts.cpu,
                   std::strerror(errno));
      opts.cpu = -1;
    }
  }
  opts.pinned = pinned;
  std::vector<std::string> missing;
  std::vector<Allocator> allocs = detect_allocators(req.wanted, missing);
  std::printf("ak_bench: allocators:");
  for (const auto &a : allocs)
    std::printf(" %s%s", a.label.c_str(), a.path.empty() ? " (no preload)" : (" (" + a.path + ")").c_str());
  std::printf("\n");
  for (const auto &m : missing) std::printf("ak_bench: missing %s\n", m.c_str());
  const char *pre = std::getenv("LD_PRELOAD");
  if (pre && *pre)
    std::printf("ak_bench: note: this process runs with LD_PRELOAD=%s; children do not inherit it\n", pre);
  std::printf("ak_bench: machine: %s, %ld cores\n\n", cpu_model().c_str(), sysconf(_SC_NPROCESSORS_ONLN));
  bool all_pass = true;
  int rc = 0;
  std::map<std::string, Params> prepared;  // parameters of the scenarios run, for the hardened build
  double t0 = now_s();
  std::size_t i = 0;
  if (!req.hardened.only)
    for (const Scenario *s : req.todo) {
      std::string progress = "scenario " + std::to_string(++i) + " of " + std::to_string(req.todo.size()) +
                             ", " + fmt_num(now_s() - t0, 0) + " s elapsed";
      rc |= run_scenario(*s, opts, allocs, missing, req.plot, all_pass, prepared[s->name], progress);
    }
  if (!req.hardened.exe.empty()) rc |= hardened_cost(req.todo, prepared, opts, req.hardened, all_pass);
  std::printf("ak_bench: done in %s s (%zu scenario(s)%s); results in %s/\n",
              fmt_num(now_s() - t0, 0).c_str(), req.todo.size(), opts.quick ? ", --quick" : "",
              opts.out_dir.c_str());
  if (rc) return 1;
  if (opts.strict && !all_pass) return 1;
  return 0;
}

}  // namespace
}  // namespace akb

int main(int argc, char **argv) {
  if (argc < 2) {
    akb::usage();
    return 2;
  }
  std::string cmd = argv[1];
  if (cmd == "list") {
    for (const akb::Scenario *s : akb::scenarios()) std::printf("%-18s %s\n", s->name, s->description);
    return 0;
  }
  if (cmd == "run") return akb::run_main(argc, argv);
  if (cmd == "child") return akb::child_main(argc, argv);
  if (cmd == "info") return akb::info_main();
  akb::usage();
  return 2;
}
