/* SPDX-License-Identifier: MIT */
// scenario_malloc_workloads.cpp - malloc-workloads: a standard set of allocator
// workloads, each timed under every malloc (arenakit, glibc, simple,
// jemalloc, tcmalloc, mimalloc; see mw_common.h), each in a process of its
// own so that its peak resident memory (VmHWM) is its own.
//
//   larson     server simulation (after Larson and Krishnan): 2 threads at a
//              time each own 2,000 slots of 16-512 byte objects and replace
//              random ones; every generation hands the slots to 2 new
//              threads, which free the old threads' objects (40 generations)
//   prodcons   one thread allocates 16-255 byte messages, another frees
//              them, through a 1,024-entry ring
//   scratch    false-sharing probe (Hoard's cache-scratch): the main thread
//              allocates one 8-byte object per thread, back to back; each of
//              2 threads frees its object, then 2,000 times allocates 8
//              bytes, writes them 10,000 times and frees them. An allocator
//              that hands the freed neighbours back to different threads
//              makes the threads write to one cache line
//   random     2 threads, each 10,000 slots, random replacement with sizes
//              8 B - 32 KiB (log-uniform): random sizes, random lifetimes
//   realloc    2 threads, each growing 16 buffers by realloc, 1-256 bytes
//              at a time, to random targets of 4 KiB - 1 MiB, every byte
//              written and checked
//   threads    2,000 short-lived threads, 2 at a time: each allocates 1,000
//              blocks of 16-1024 bytes, frees 3/4 and leaves 1/4 for the
//              main thread to free after it exits
//   churn      thread churn: 60 rounds of 2 threads; each thread frees a
//              random half of the 2,000 blocks that a thread of the round
//              before kept and allocates their replacements, allocates 4,000
//              blocks and frees them again except every 8th, which it hands
//              to the next thread of its round to free (its inbox), then
//              frees what its own inbox holds and exits. Sizes 8 B - 8 KiB
//              (log-uniform), 1 in 64 of 16 - 256 KiB, 1 in 4,096 of 1 - 8
//              MiB, every byte of every block written. What an inbox still
//              holds at the end of a round, a thread of the next round frees
//   churn8     churn with 8 threads a round on 2 cores (oversubscribed)
//   frag       fragmentation probe, 1 thread: allocate 1.5 M blocks of
//              16-256 bytes (~200 MiB), free all but every 32nd, then
//              allocate 100 MiB of 300-1200 byte blocks; resident memory
//              after the free (the residue) and at the end
//   small      single-thread small-object churn: 10 M replacements of a
//              random one of 10,000 blocks of 8 B - 1 KiB (log-uniform)
//   mstress    the stress-test shape of mimalloc's test/test-stress.c: 50
//              rounds of 2 new threads. Thread `tid` allocates 100 * 25 *
//              (tid % 8 + 1) blocks, kept in a pointer array that grows by
//              realloc in steps of 100,000 entries, and half as many
//              retained ones, kept to its end; each step allocates (50 %)
//              or retains, frees a random earlier block (66 %), and
//              exchanges a random one of its blocks with a random slot of
//              a shared array of 1,000 atomic pointers (25 %), so that
//              blocks move between threads and outlive their round. Sizes
//              8 * 2^k bytes (k 0-4; retained ones 0-6), 1 % of them 100x
//              larger, from calloc (checked zeroed), every word written
//              with a pattern and checked when freed. A thread frees all
//              it holds when it ends; between rounds the main thread frees
//              a random half of the shared array (all of it after the last
//              round). Random streams: per thread, seeded from tid + 1
//   mstress4   mstress with 4 threads a round (oversubscribed on 2 cores)
//   mstress8   mstress with 8 threads a round (oversubscribed on 2 cores)
//   bigloop    large blocks, 1 thread: 200 iterations, each allocates a
//              block of 5-25 MiB (uniform), writes every byte of it and
//              frees the block of 3 iterations before (3-4 blocks live)
// The workloads themselves are in bench/mw_workloads.cpp, one function
// each, with fixed parameters and random seeds.
// Every block carries a tag or pattern checked before it is freed (realloc
// and mstress: every byte; bigloop: its first, middle and last bytes), so
// an allocator that gives out overlapping memory is caught.
// Time: wall time of the workload. Peak: VmHWM at the end of the process.
// Minor faults: getrusage's ru_minflt across the workload (every thread).
// --quick runs every workload at 15% of its size (mstress: of its rounds).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "bench.h"
#include "mw_common.h"
#include "mw_workloads.h"

namespace {

const char *const kName = "malloc-workloads";

// The workloads' names, in table order (mw_workloads.h).
const std::vector<const char *> &workload_names() {
  static const std::vector<const char *> names = [] {
    std::vector<const char *> v;
    for (std::size_t i = 0; i < akmw::kNumWorkloads; i++) v.push_back(akmw::kWorkloads[i].name);
    return v;
  }();
  return names;
}
// The heap profiler's cost per workload is a ratio of two runs of the same
// build, and the shortest workloads vary from run to run by more than the
// check's margin: each repetition adds back-to-back pairs of arenakit and
// arenakit+prof runs (in alternating order), and the check takes the
// median of all the pairs' ratios. A repetition makes as many pairs as
// take about kProfPairS seconds at the workload's arenakit time (the short
// two-thread ones, larson and producer/consumer, spread the widest), at
// least kProfPairs and at most kProfPairsMax; a --quick run kProfPairs.
constexpr int kProfPairs = 2, kProfPairsMax = 20;
constexpr double kProfPairS = 5.0;
constexpr double kMaxRssVsMimalloc = 1.2;    // peak at most 1.2x mimalloc's, each workload
constexpr double kMinSpeedVsMimalloc = 1.0;  // geometric mean time at most mimalloc's

akb::Params prepare(const akb::Options &opts) {
  akb::Params p;
  p["scale"] = opts.quick ? "0.15" : "1";
  p["simple_limit_s"] = akmw::fmt("%.0f", akmw::simple_limit_s(opts.quick));
  p["limit_s"] = akmw::fmt("%.0f", akmw::kLimitS);
  p["prof_pair_s"] = akmw::fmt("%.1f", opts.quick ? 0.0 : kProfPairS);
  return p;
}

int sub(const akb::Params &p) {
  const std::string wl = p.at("wl");
  double scale = std::atof(p.at("scale").c_str());
  const akmw::Workload *w = akmw::find_workload(wl.c_str());
  if (!w) return 2;
  akmw::start_profiler_if_asked();
  double f0 = akmw::minor_faults();
  double t0 = akb::now_s();
  w->run(scale);
  double t = akb::now_s() - t0;
  akb::emit("minflt", akmw::minor_faults() - f0);
  akb::emit("time", t);
  akb::emit("peak_rss", akmw::proc_status_bytes("VmHWM"));
  const std::uint64_t bad = akmw::corrupted_blocks();
  akb::emit("bad", static_cast<double>(bad));
  if (bad)
    std::fprintf(stderr, "ak_bench: workload %s: %llu blocks came back corrupted\n", wl.c_str(),
                 static_cast<unsigned long long>(bad));
  return 0;
}

int child(const akb::Params &p) {
  if (p.count("sub")) return sub(p);
  akb::widen_affinity();
  std::vector<akmw::Column> cols = akmw::child_columns(akb::arenakit_only(p), true);
  akmw::OverMemo memo(kName);
  for (const char *wl : workload_names()) {
    double off_time = NAN;  // the arenakit column's run
    for (const akmw::Column &col : cols) {
      std::string k = col.label + "." + wl;
      if (memo.over(k)) {
        akb::emit(k + ".over", 1);
        continue;
      }
      double limit = std::atof(p.at(col.label == "simple" ? "simple_limit_s" : "limit_s").c_str());
      akmw::SubResult r =
          akmw::run_sub(col, kName, {std::string("wl=") + wl, "scale=" + p.at("scale")}, limit);
      if (r.kind == akmw::SubResult::kOver) {
        memo.add(k);
        akb::emit(k + ".over", 1);
      } else if (r.kind == akmw::SubResult::kCrash) {
        akb::emit(k + ".crash", r.status);
      } else {
        for (const char *key : {"time", "peak_rss", "minflt", "bad", "rss_residue", "rss_end"})
          if (r.kv.count(key)) akb::emit(k + "." + key, r.num(key));
        if (col.label == "arenakit") off_time = r.num("time");
      }
    }
    // The profiler's extra pairs (kProfPairs to kProfPairsMax): "arenakit+prof.<wl>.pairN.on"
    // and ".off", each pair's two runs back to back.
    const akmw::Column *off = nullptr, *on = nullptr;
    for (const akmw::Column &col : cols) {
      if (col.label == "arenakit") off = &col;
      if (col.label == "arenakit+prof") on = &col;
    }
    if (!off || !on || memo.over("arenakit." + std::string(wl)) ||
        memo.over("arenakit+prof." + std::string(wl)))
      continue;
    const double want = std::atof(p.at("prof_pair_s").c_str()) / (2 * off_time);  // NaN: kProfPairs
    const int pairs =
        want > kProfPairs ? static_cast<int>(std::min(std::ceil(want), double(kProfPairsMax))) : kProfPairs;
    for (int i = 0; i < pairs; i++) {
      const akmw::Column *order[2] = {i % 2 ? on : off, i % 2 ? off : on};
      double t[2] = {NAN, NAN};
      for (int j = 0; j < 2; j++) {
        akmw::SubResult r = akmw::run_sub(*order[j], kName,
                                          {std::string("wl=") + wl, "scale=" + p.at("scale")}, akmw::kLimitS);
        if (r.kind == akmw::SubResult::kOk && r.kv.count("time")) t[j] = r.num("time");
      }
      if (std::isnan(t[0]) || std::isnan(t[1])) continue;
      std::string k = "arenakit+prof." + std::string(wl) + ".pair" + std::to_string(i);
      akb::emit(k + ".on", i % 2 ? t[0] : t[1]);
      akb::emit(k + ".off", i % 2 ? t[1] : t[0]);
    }
  }
  return 0;
}

// ---- report -------------------------------------------------------------------------

akb::Report report(const akb::RunData &d, const akb::Params &p) {
  akb::Report rep;
  std::vector<std::string> cols;
  for (const auto &c : akmw::column_order()) {
    bool any = false;
    for (const char *wl : workload_names())
      for (const char *w : {".time", ".over", ".crash"}) any = any || akmw::has(d, c, std::string(wl) + w);
    if (any) cols.push_back(c);
  }
  std::vector<std::string> problems;
  auto grid = [&](const std::string &id, const std::string &title, const std::string &unit, int precision,
                  auto value) {
    akb::Table t = akb::make_table(id, title, "workload", unit, precision);
    t.columns = cols;
    for (const char *wl : workload_names()) {
      t.rows.push_back(wl);
      std::vector<double> line;
      for (const auto &c : cols) line.push_back(value(c, std::string(wl)));
      t.cells.push_back(line);
    }
    return t;
  };
  auto time_of = [&](const std::string &c, const std::string &wl) {
    return akmw::median(d, c, wl + ".time");
  };
  auto geomean_of = [&](const std::string &c, const std::string &metric) {
    double s = 0;
    for (const char *wl : workload_names()) s += std::log(akmw::median(d, c, std::string(wl) + "." + metric));
    return std::exp(s / static_cast<double>(workload_names().size()));
  };
  auto geomean = [&](const std::string &c) { return geomean_of(c, "time"); };
  for (const auto &c : cols)
    for (const char *wl : workload_names()) {
      std::string w = wl;
      if (akmw::has(d, c, w + ".crash")) problems.push_back("CRASH: " + c + " " + w);
      std::string h = akmw::host_of(d, c, w + ".bad");
      if (!h.empty() && d.max(h, c + "." + w + ".bad") > 0)
        problems.push_back("WRONG RESULT (corrupted blocks): " + c + " " + w);
    }

  akb::Table time = grid("time", "Workload time, seconds (lower is better)", "s", 3, time_of);
  time.rows.push_back("geometric mean");
  std::vector<double> g;
  for (const auto &c : cols) g.push_back(geomean(c));
  time.cells.push_back(g);
  time.note =
      "n/a: ran past its time limit (simple: " + p.at("simple_limit_s") +
      " s, the others: " + p.at("limit_s") +
      " s) or crashed. 2 threads on 2 cores unless the workload says otherwise "
      "(prodcons: 2 threads, scratch: 2, larson: 2 at a time, threads: 2 at a time, churn and mstress: 2 a "
      "round; frag, small and bigloop: 1 thread); churn8, mstress4 and mstress8 run 8, 4 and 8 threads a "
      "round on the 2 cores: oversubscribed. Medians.";
  rep.tables.push_back(time);
  akb::Table rss = grid("peak_rss", "Peak resident memory (VmHWM of the process), MiB", "MiB", 1,
                        [&](const std::string &c, const std::string &wl) {
                          return akmw::median(d, c, wl + ".peak_rss") / 1048576.0;
                        });
  rss.note = "Includes the benchmark program itself (about 4 MiB under glibc).";
  rep.tables.push_back(rss);
  akb::Table flt = grid("minflt", "Minor page faults during the workload (getrusage, all threads), thousands",
                        "k", 1, [&](const std::string &c, const std::string &wl) {
                          return akmw::median(d, c, wl + ".minflt") / 1000.0;
                        });
  flt.note =
      "Each fault is a page the kernel finds, zeroes and maps: 10-30 us under load on a virtual machine.";
  rep.tables.push_back(flt);
  if (std::find(cols.begin(), cols.end(), "mimalloc") != cols.end()) {
    akb::Table sp = grid("speed_vs_mimalloc", "Speed relative to mimalloc (mimalloc's time / this time)", "x",
                         2, [&](const std::string &c, const std::string &wl) {
                           return time_of("mimalloc", wl) / time_of(c, wl);
                         });
    sp.rows.push_back("geometric mean");
    std::vector<double> gm;
    for (const auto &c : cols) gm.push_back(geomean("mimalloc") / geomean(c));
    sp.cells.push_back(gm);
    rep.tables.push_back(sp);
  }
  akb::Table fr =
      akb::make_table("tab_frag", "Fragmentation probe (frag): resident memory, MiB", "moment", "MiB", 1);
  fr.columns = cols;
  fr.rows = {"peak (VmHWM)", "after freeing all but every 32nd block (VmRSS)",
             "after 100 MiB of 300-1200 B blocks"};
  for (const char *k : {"peak_rss", "rss_residue", "rss_end"}) {
    std::vector<double> line;
    for (const auto &c : cols) line.push_back(akmw::median(d, c, std::string("frag.") + k) / 1048576.0);
    fr.cells.push_back(line);
  }
  rep.tables.push_back(fr);

  std::string det;
  for (const auto &pr : problems) det += "- " + pr + "\n";
  if (!det.empty()) {
    std::printf("\n%s", det.c_str());
    rep.details_md = "## Failures\n\n" + det;
  }

  // A check is made only where its columns were measured (a run with
  // --allocators glibc, say, has no mimalloc column to judge against).
  auto measured = [&](const std::string &c) { return std::find(cols.begin(), cols.end(), c) != cols.end(); };
  double ga = geomean("arenakit");
  if (measured("mimalloc")) {
    double gm = geomean("mimalloc");
    rep.checks.push_back(akb::speedup("geometric mean time over the " +
                                          std::to_string(workload_names().size()) + " workloads: mimalloc " +
                                          akmw::fmt("%.3f", gm) + " s / arenakit " + akmw::fmt("%.3f", ga) +
                                          " s (arenakit at most 1.0x mimalloc)",
                                      ga, gm, kMinSpeedVsMimalloc));
    for (const char *wl : workload_names()) {
      double a = akmw::median(d, "arenakit", std::string(wl) + ".peak_rss") / 1048576.0;
      double m = akmw::median(d, "mimalloc", std::string(wl) + ".peak_rss") / 1048576.0;
      rep.checks.push_back(akb::at_most(std::string("peak RSS, ") + wl + ": arenakit " +
                                            akmw::fmt("%.1f", a) + " MiB = " + akmw::fmt("%.2f", a / m) +
                                            "x mimalloc's " + akmw::fmt("%.1f", m) +
                                            " MiB; 1.2 x mimalloc / arenakit",
                                        a / m, kMaxRssVsMimalloc));
    }
    for (const char *wl : workload_names()) {
      double a = akmw::median(d, "arenakit", std::string(wl) + ".minflt");
      double m = akmw::median(d, "mimalloc", std::string(wl) + ".minflt");
      rep.checks.push_back(akb::speedup(std::string("minor faults, ") + wl + ": arenakit " +
                                            akmw::fmt("%.0f", a) + ", mimalloc " + akmw::fmt("%.0f", m) +
                                            "; mimalloc / arenakit (at most mimalloc's)",
                                        std::max(a, 1.0), m, 1.0));
    }
    {
      double a = time_of("arenakit", "small"), m = time_of("mimalloc", "small");
      rep.checks.push_back(akb::speedup("single-thread small-object churn (small): mimalloc " +
                                            akmw::fmt("%.3f", m) + " s / arenakit " + akmw::fmt("%.3f", a) +
                                            " s (arenakit at most mimalloc's time)",
                                        a, m, 1.0));
    }
    // mimalloc's stress test: 2 threads a round at most mimalloc's time;
    // 4 and 8 (oversubscribed on 2 cores) at most 1.2x.
    for (const auto &[wl, bound] :
         {std::pair<const char *, double>{"mstress", 1.0}, {"mstress4", 1.2}, {"mstress8", 1.2}}) {
      double a = time_of("arenakit", wl), m = time_of("mimalloc", wl);
      rep.checks.push_back(akb::at_most(std::string("stress-test shape ") + wl + ": arenakit " +
                                            akmw::fmt("%.3f", a) + " s / mimalloc " + akmw::fmt("%.3f", m) +
                                            " s; at most " + akmw::fmt("%.1f", bound) + "x",
                                        a / m, bound));
    }
  }
  if (measured("glibc")) {
    for (const char *wl : {"churn", "churn8"}) {
      double a = time_of("arenakit", wl), gl = time_of("glibc", wl);
      rep.checks.push_back(akb::speedup(std::string("thread churn ") + wl + ": glibc " +
                                            akmw::fmt("%.3f", gl) + " s / arenakit " + akmw::fmt("%.3f", a) +
                                            " s (arenakit at most glibc's time)",
                                        a, gl, 1.0));
    }
    // The larson shape: page faults and peak RSS at most 1.5x glibc's.
    for (const char *metric : {"minflt", "peak_rss"}) {
      double a = akmw::median(d, "arenakit", std::string("larson.") + metric);
      double gl = akmw::median(d, "glibc", std::string("larson.") + metric);
      rep.checks.push_back(akb::at_most(std::string("larson, ") +
                                            (std::string(metric) == "minflt" ? "minor faults" : "peak RSS") +
                                            ": arenakit / glibc; at most 1.5x",
                                        a / gl, 1.5));
    }
  }
  if (measured("tcmalloc")) {
    // The large-block loop: time at most tcmalloc's, faults at most 1.2x.
    double a = time_of("arenakit", "bigloop"), t = time_of("tcmalloc", "bigloop");
    rep.checks.push_back(akb::at_most("large-block loop (bigloop): arenakit " + akmw::fmt("%.3f", a) +
                                          " s / tcmalloc " + akmw::fmt("%.3f", t) + " s; at most 1.0x",
                                      a / t, 1.0));
    double fa = akmw::median(d, "arenakit", "bigloop.minflt"),
           ft = akmw::median(d, "tcmalloc", "bigloop.minflt");
    rep.checks.push_back(akb::at_most("large-block loop (bigloop), minor faults: arenakit " +
                                          akmw::fmt("%.0f", fa) + " / tcmalloc " + akmw::fmt("%.0f", ft) +
                                          "; at most 1.2x",
                                      fa / ft, 1.2));
  }
  if (measured("arenakit+prof")) {
    // The heap profiler's cost at default sampling: same run, same workloads.
    double gp = geomean("arenakit+prof");
    rep.checks.push_back(akb::at_most("heap profiler on, geometric mean: arenakit+prof " +
                                          akmw::fmt("%.3f", gp) + " s / arenakit " + akmw::fmt("%.3f", ga) +
                                          " s; at most 1.05x",
                                      gp / ga, 1.05));
    for (const char *wl : workload_names()) {
      // Every pair of one child: the main runs of each repetition and its
      // extra pairs (as many as it ran); the median of their ratios.
      std::vector<double> ratios;
      std::string w = wl;
      auto pair_ratios = [&](const std::string &on_key, const std::string &off_key) {
        std::string h = akmw::host_of(d, "arenakit+prof", on_key);
        if (h.empty() || !d.samples.count(h)) return;
        const auto &smp = d.samples.at(h);
        auto a = smp.find("arenakit+prof." + on_key), b = smp.find(off_key);
        if (a == smp.end() || b == smp.end()) return;
        for (size_t i = 0; i < a->second.size() && i < b->second.size(); i++)
          if (b->second[i] > 0) ratios.push_back(a->second[i] / b->second[i]);
      };
      pair_ratios(w + ".time", "arenakit." + w + ".time");
      for (int i = 0; i < kProfPairsMax; i++) {
        std::string k = w + ".pair" + std::to_string(i);
        pair_ratios(k + ".on", "arenakit+prof." + k + ".off");
      }
      if (ratios.empty()) continue;
      std::sort(ratios.begin(), ratios.end());
      size_t n = ratios.size();
      double med = n % 2 ? ratios[n / 2] : (ratios[n / 2 - 1] + ratios[n / 2]) / 2;
      rep.checks.push_back(
          akb::at_most(std::string("heap profiler on, ") + wl + ": median of " + std::to_string(n) +
                           " paired runs' ratios " + akmw::fmt("%.3f", med) +
                           " (medians of the table: " + akmw::fmt("%.3f", time_of("arenakit+prof", wl)) +
                           " s / " + akmw::fmt("%.3f", time_of("arenakit", wl)) + " s); at most 1.10x",
                       med, 1.10));
    }
  }
  if (measured("arenakit-base")) {
    // Two builds of the drop-in, same run (AK_BENCH_BASELINE): this build's
    // geometric mean time not above the baseline's by more than 2 % (the
    // label gives the ratio, for a change that must cost nothing: within
    // 2 % either way), and its peak RSS geometric mean not higher.
    double gb = geomean("arenakit-base");
    rep.checks.push_back(
        akb::at_most("this build against the baseline build, geometric mean time: arenakit " +
                         akmw::fmt("%.3f", ga) + " s / arenakit-base " + akmw::fmt("%.3f", gb) +
                         " s = " + akmw::fmt("%.3f", ga / gb) + "x; at most 1.02x",
                     ga / gb, 1.02));
    double ra = geomean_of("arenakit", "peak_rss"), rb = geomean_of("arenakit-base", "peak_rss");
    rep.checks.push_back(akb::at_most("this build against the baseline build, geometric mean peak RSS: " +
                                          akmw::fmt("%.1f", ra / 1048576.0) + " MiB / " +
                                          akmw::fmt("%.1f", rb / 1048576.0) + " MiB; at most 1.0x",
                                      ra / rb, 1.0));
  }
  rep.checks.push_back(akb::all_ok(
      "workloads with intact blocks and no crash (" + std::to_string(problems.size()) + " problems): all",
      problems.empty()));
  return rep;
}

}  // namespace

AKB_SCENARIO(
    malloc_workloads, kName,
    "allocator workloads: larson server simulation, producer/consumer, false-sharing probe (cache-scratch), "
    "random sizes and lifetimes, realloc growth, short-lived threads, thread churn, fragmentation probe, "
    "single-thread small-object churn, mimalloc's stress test (2, 4, 8 threads a round), large-block loop; "
    "time, "
    "peak resident memory and minor page faults under arenakit (also with the heap profiler on: "
    "arenakit+prof), "
    "glibc, simple, jemalloc, tcmalloc, mimalloc",
    {{"arenakit.*.time", akb::Better::lower, "s"}},
    // Five repetitions: the threaded workloads' page faults depend on how
    // the threads are scheduled (larson, 8 runs: 763-1252 for arenakit,
    // 864-1184 for mimalloc), too wide for a median of three.
    5);
