/* SPDX-License-Identifier: MIT */
// scenario_malloc_collatz.cpp - malloc-collatz: the Collatz programs (ivec and list,
// bench/collatz.c) with 4 threads for TOP = 1000 ... 1,000,000, timed under
// every malloc: arenakit (LD_PRELOAD of libarenakit-malloc.so), glibc, the
// "simple" baseline (bench/simple_malloc.c: one mutex, one first-fit
// free list), jemalloc, tcmalloc and mimalloc.
//
// Each (program, TOP, malloc) runs in a process of its own (mw_common.h),
// with all CPUs allowed (4 threads on 2 cores: oversubscribed, as in the
// source benchmark); the time is the wall time from starting the threads to joining
// them. The process then checks the sum of all sequence lengths against an
// allocation-free computation, and reports its peak resident memory
// (VmHWM) and its minor page faults while the threads ran. A run that passes its time limit (simple: 20 s,
// --quick 5 s; the others: 120 s) is killed and shown as "20s+" (the source's "5m+"); the larger TOPs of that
// program and malloc are then not run, in this repetition or later ones.
#include <string>
#include <vector>

#include "bench.h"
#include "bench_util.h"
#include "collatz.h"
#include "mw_common.h"

namespace {

const char *const kName = "malloc-collatz";
const char *const kProgs[] = {"ivec", "list"};
constexpr int kThreads = 4;
constexpr int kCores = 2;
constexpr long kCheckTop = 100000;      // the acceptance row
constexpr double kMinVsGlibc = 2.0;     // arenakit at most 0.5x glibc's time
constexpr double kMinVsMimalloc = 1.0;  // arenakit at most mimalloc's time

std::vector<std::string> split(const std::string &s) {
  std::vector<std::string> v;
  std::stringstream ss(s);
  std::string x;
  while (std::getline(ss, x, ',')) v.push_back(x);
  return v;
}

akb::Params prepare(const akb::Options &opts) {
  akb::Params p;
  p["tops"] = opts.quick ? "1000,5000,50000,100000" : "1000,5000,50000,100000,500000,1000000";
  if (opts.n > 0) p["tops"] = std::to_string(opts.n);
  p["threads"] = std::to_string(kThreads);
  p["simple_limit_s"] = akmw::fmt("%.0f", akmw::simple_limit_s(opts.quick));
  p["limit_s"] = akmw::fmt("%.0f", akmw::kLimitS);
  return p;
}

// One program at one TOP, in this process.
int sub(const akb::Params &p) {
  int list = p.at("prog") == "list";
  long top = static_cast<long>(akb::param_u64(p, "top", 1000));
  int threads = static_cast<int>(akb::param_u64(p, "threads", kThreads));
  long steps = 0, bad = 0;
  double f0 = akmw::minor_faults();
  double t0 = akb::now_s();
  int rc = collatz_run(list, top, threads, &steps, &bad);
  double t = akb::now_s() - t0;
  double faults = akmw::minor_faults() - f0;
  if (rc != 0) {
    std::fprintf(stderr, "ak_bench: collatz: cannot start the threads\n");
    return 1;
  }
  akb::emit("time", t);
  akb::emit("peak_rss", akmw::proc_status_bytes("VmHWM"));
  akb::emit("minflt", faults);
  long ref = collatz_reference(top);
  akb::emit("steps", static_cast<double>(steps));
  akb::emit("bad", static_cast<double>(bad));
  akb::emit("ok", steps == ref && bad == 0);
  if (steps != ref || bad != 0)
    std::fprintf(stderr,
                 "ak_bench: collatz %s TOP=%ld: WRONG RESULT: steps %ld (expected %ld), %ld bad sequences\n",
                 list ? "list" : "ivec", top, steps, ref, bad);
  return 0;
}

int child(const akb::Params &p) {
  if (p.count("sub")) return sub(p);
  akb::widen_affinity();
  std::vector<std::string> tops = split(p.at("tops"));
  std::vector<akmw::Column> cols = akmw::child_columns(akb::arenakit_only(p));
  akmw::OverMemo memo(kName);
  for (const std::string &top : tops) {
    for (const char *prog : kProgs) {
      for (const akmw::Column &col : cols) {
        std::string k = col.label + "." + prog + "." + top;
        bool skip = false;
        for (const std::string &t : tops) {
          if (std::stol(t) <= std::stol(top) && memo.over(col.label + "." + prog + "@" + t)) skip = true;
        }
        if (skip) {
          akb::emit(k + ".over", 1);
          continue;
        }
        double limit = std::atof(p.at(col.label == "simple" ? "simple_limit_s" : "limit_s").c_str());
        akmw::SubResult r = akmw::run_sub(
            col, kName, {std::string("prog=") + prog, "top=" + top, "threads=" + p.at("threads")}, limit);
        if (r.kind == akmw::SubResult::kOver) {
          memo.add(col.label + "." + prog + "@" + top);
          akb::emit(k + ".over", 1);
        } else if (r.kind == akmw::SubResult::kCrash) {
          akb::emit(k + ".crash", r.status);
        } else {
          akb::emit(k + ".time", r.num("time"));
          akb::emit(k + ".peak_rss", r.num("peak_rss"));
          akb::emit(k + ".minflt", r.num("minflt"));
          akb::emit(k + ".ok", r.num("ok"));
        }
      }
    }
  }
  return 0;
}

// ---- report -------------------------------------------------------------------

struct Cell {
  double v = NAN;  // median time, NaN when over/crash/absent
  std::string s;   // as printed in the time-limit table
};

akb::Report report(const akb::RunData &d, const akb::Params &p) {
  akb::Report rep;
  std::vector<std::string> tops = split(p.at("tops"));
  std::string limit = p.at("simple_limit_s");
  std::vector<std::string> cols;
  for (const auto &c : akmw::column_order()) {
    bool any = false;
    for (const char *prog : kProgs)
      for (const auto &t : tops)
        for (const char *w : {".time", ".over", ".crash"})
          any = any || akmw::has(d, c, std::string(prog) + "." + t + w);
    if (any) cols.push_back(c);
  }
  std::vector<std::string> wrong, crashed;
  auto cell = [&](const std::string &c, const std::string &prog, const std::string &top) {
    Cell x;
    std::string k = prog + "." + top;
    std::string lim = c == "simple" ? limit : p.at("limit_s");
    if (akmw::has(d, c, k + ".crash")) {
      x.s = "crash";
      crashed.push_back(c + " " + prog + " TOP=" + top);
    } else if (akmw::has(d, c, k + ".over")) {
      x.s = lim + "s+";
    } else if (akmw::has(d, c, k + ".time")) {
      x.v = akmw::median(d, c, k + ".time");
      x.s = akmw::fmt("%.3f", x.v);
      std::string h = akmw::host_of(d, c, k + ".ok");
      if (!h.empty() && d.min(h, c + "." + k + ".ok") < 1) {
        x.s += " (WRONG)";
        wrong.push_back(c + " " + prog + " TOP=" + top);
      }
    } else {
      x.s = "-";
    }
    return x;
  };

  // One column per program and malloc.
  akb::Table by_prog;
  by_prog.id = "tab_by_program";  // "tab_": not plotted (bench/plot.py)
  by_prog.title = "Collatz simulation, " + std::to_string(kThreads) +
                  " threads (oversubscribed: " + std::to_string(kCores) +
                  " cores), seconds (lower is better)";
  by_prog.corner = "TOP";
  by_prog.unit = "s";
  by_prog.precision = 3;
  std::vector<std::string> shead = {"TOP"};
  std::vector<std::vector<std::string>> srows;
  for (const char *prog : kProgs)
    for (const auto &c : cols) {
      by_prog.columns.push_back(std::string(prog) + " " + c);
      shead.push_back(std::string(prog) + " " + c);
    }
  for (const auto &t : tops) {
    by_prog.rows.push_back(t);
    std::vector<double> line;
    std::vector<std::string> sline = {t};
    for (const char *prog : kProgs)
      for (const auto &c : cols) {
        Cell x = cell(c, prog, t);
        line.push_back(x.v);
        sline.push_back(x.s);
      }
    by_prog.cells.push_back(line);
    srows.push_back(sline);
  }
  by_prog.note = "n/a: ran past its time limit (simple: " + limit + " s, the others: " + p.at("limit_s") +
                 " s), or crashed (see the detail). Medians over the repetitions.";
  rep.tables.push_back(by_prog);

  for (const char *prog : kProgs) {
    akb::Table t = akb::make_table(std::string("vsN_") + prog,
                                   std::string("Collatz ") + prog + ": seconds against TOP (" +
                                       std::to_string(kThreads) + " threads, oversubscribed)",
                                   "TOP", "s", 3);
    t.columns = cols;
    for (const auto &top : tops) {
      t.rows.push_back(top);
      std::vector<double> line;
      for (const auto &c : cols) line.push_back(cell(c, prog, top).v);
      t.cells.push_back(line);
    }
    rep.tables.push_back(t);
  }
  akb::Table rss = akb::make_table("tab_peak_rss", "Peak resident memory of the process (VmHWM), MiB",
                                   "program, TOP", "MiB", 1);
  rss.columns = cols;
  for (const char *prog : kProgs)
    for (const auto &top : tops) {
      rss.rows.push_back(std::string(prog) + " " + top);
      std::vector<double> line;
      for (const auto &c : cols)
        line.push_back(akmw::median(d, c, std::string(prog) + "." + top + ".peak_rss") / 1048576.0);
      rss.cells.push_back(line);
    }
  rep.tables.push_back(rss);
  akb::Table flt = rss;
  flt.id = "tab_minflt";
  flt.title = "Minor page faults while the threads run (getrusage), thousands";
  flt.unit = "k";
  flt.cells.clear();
  for (const char *prog : kProgs)
    for (const auto &top : tops) {
      std::vector<double> line;
      for (const auto &c : cols)
        line.push_back(akmw::median(d, c, std::string(prog) + "." + top + ".minflt") / 1000.0);
      flt.cells.push_back(line);
    }
  rep.tables.push_back(flt);
  wrong.erase(std::unique(wrong.begin(), wrong.end()), wrong.end());
  crashed.erase(std::unique(crashed.begin(), crashed.end()), crashed.end());

  // The table with "20s+" cells, printed now (the runner's tables
  // cannot hold text) and in the detail.
  std::string limit_md = akb::md_table(shead, srows);
  std::printf("\nThe table with time-limit cells (seconds; %ss+ = killed at the limit):\n\n%s", limit.c_str(),
              limit_md.c_str());
  rep.details_md = "## The table with time-limit cells\n\nSeconds, " + std::to_string(kThreads) +
                   " threads; \"" + limit + "s+\": killed at the time limit.\n\n" + limit_md;
  std::string problems;
  for (const auto &w : wrong) problems += "- WRONG RESULT: " + w + "\n";
  for (const auto &c : crashed) problems += "- CRASH: " + c + "\n";
  if (!problems.empty()) {
    std::printf("\n%s", problems.c_str());
    rep.details_md += "\n## Failures\n\n" + problems;
  }

  // Acceptance, at TOP = 100000.
  std::string ct = std::to_string(kCheckTop);
  if (std::find(tops.begin(), tops.end(), ct) != tops.end()) {
    for (const char *prog : kProgs) {
      double a = cell("arenakit", prog, ct).v, g = cell("glibc", prog, ct).v,
             m = cell("mimalloc", prog, ct).v;
      rep.checks.push_back(akb::speedup(std::string("Collatz ") + prog + " TOP=" + ct + ": glibc " +
                                            akmw::fmt("%.3f", g) + " s / arenakit " + akmw::fmt("%.3f", a) +
                                            " s (arenakit at most 0.5x glibc)",
                                        a, g, kMinVsGlibc));
      rep.checks.push_back(akb::speedup(std::string("Collatz ") + prog + " TOP=" + ct + ": mimalloc " +
                                            akmw::fmt("%.3f", m) + " s / arenakit " + akmw::fmt("%.3f", a) +
                                            " s (arenakit at most mimalloc's time)",
                                        a, m, kMinVsMimalloc));
    }
  }
  rep.checks.push_back(akb::all_ok("runs with the right result (" + std::to_string(wrong.size()) +
                                       " wrong, " + std::to_string(crashed.size()) + " crashed): all",
                                   wrong.empty() && crashed.empty()));
  return rep;
}

}  // namespace

AKB_SCENARIO(malloc_collatz, kName,
             "Collatz simulation with a growable array (ivec) and a linked list (list), 4 threads, the "
             "sequence copied and extended 50 steps at a time, TOP = 1000 ... 1,000,000; arenakit, glibc, a "
             "single-mutex 'simple' malloc, jemalloc, tcmalloc, mimalloc",
             {{"arenakit.*.time", akb::Better::lower, "s"}});
