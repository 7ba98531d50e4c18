/* SPDX-License-Identifier: MIT */
// scenario_pool_stress.cpp - pool-stress: a multi-thread stress test, M
// allocations and M frees per second with T threads on one allocator, and
// the memory left resident after the run.
//
// T threads (T = 1, 2, 4, 8, 16; above 2 oversubscribed on 2 cores) each
// run, until the main thread raises the stop flag after S seconds, the
// stress loop of ARAL's aral_stress_test() on 10,000 elements of 20 bytes
// (ARAL's test entry size): allocate all; for div = 5..2 free the first
// 1/div and allocate them again; for step = 50, 40, ..., 10 free every
// step-th element and allocate it again; free all. Every thread counts its
// operations; M ops/s = allocations (= frees) / wall seconds of the run.
//   arenakit  one ak_pool, AK_SYNC_THREADS, created before the run, shared
//             by all threads, in three configurations:
//             - the defaults (the headline): mmap backing, 64 KiB slabs,
//               empty slabs kept as spares under the reclaim policy
//               (reused, given back after the purge delay)
//             - ARAL's: the configuration of aral_stress_test() itself,
//               which creates its ARAL in malloc mode (mmap off) with pages
//               of at most 8 KiB: AK_BACKING_HEAP, 8 KiB slabs and ARAL's
//               free-at-once policy chosen explicitly (release_empty): an
//               empty slab goes back to the C heap at once, as an empty
//               ARAL page is free()d at once. The acceptance uses this one.
//             - the free-at-once policy on the defaults' slabs: mmap,
//               64 KiB, release_empty (an empty slab is unmapped at once;
//               on a VM where page faults are dear this costs most of the
//               run)
//   malloc    malloc(20)/free under each preloaded malloc
// arenakit runs in the glibc child only (it does not call malloc), after
// glibc's run for the same T. Each run of S seconds is cut into slices
// taken in turns over every T and configuration; the child reports each
// one's median slice (see child()). Memory: process RSS (/proc/self/statm)
// after the last slice and the largest growth over one slice (threads
// joined, everything freed), and for arenakit the pool's bytes_resident
// (ak_pool_stats, before ak_pool_destroy). The child widens its CPU
// affinity to every online CPU.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "arenakit/pool.h"
#include "bench.h"
#include "bench_util.h"

namespace {

using akb::fmt;
using akb::parse_list;
using akb::widen_affinity;

constexpr std::size_t kElements = 10000;
constexpr std::size_t kElemSize = 20;
constexpr double kSeconds = 2.0;
constexpr double kQuickSeconds = 0.3;
constexpr int kSlices = 4;  // turns per run (see child())
constexpr int kQuickSlices = 2;
constexpr int kCores = 2;
constexpr std::size_t kAralPage = 8192;  // aral_stress_test(): pages of at most 8 KiB
constexpr double kMinVsGlibc = 4;        // arenakit T=1 vs glibc T=1
constexpr double kMinT2Percent = 170;    // arenakit T=2 vs its T=1

double rss_bytes() {
  long pages = 0, resident = 0;
  FILE *f = std::fopen("/proc/self/statm", "r");
  if (!f) return NAN;
  int n = std::fscanf(f, "%ld %ld", &pages, &resident);
  std::fclose(f);
  return n == 2 ? static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) : NAN;
}

struct Malloc {
  void *alloc() { return std::malloc(kElemSize); }
  void free(void *p) { std::free(p); }
};
struct Pool {
  ak_pool *p;
  void *alloc() { return ak_pool_alloc(p); }
  void free(void *o) { ak_pool_free(p, o); }
};

// ARAL's stress loop, once; returns the allocations done (frees: the same).
template <class A>
std::uint64_t stress_once(A &a, void **ptr, std::size_t n) {
  std::uint64_t ops = 0;
  for (std::size_t i = 0; i < n; i++) ptr[i] = a.alloc();
  ops += n;
  for (std::size_t div = 5; div >= 2; div--) {
    for (std::size_t i = 0; i < n / div; i++) a.free(ptr[i]);
    for (std::size_t i = 0; i < n / div; i++) ptr[i] = a.alloc();
    ops += n / div;
  }
  for (std::size_t step = 50; step >= 10; step -= 10) {
    for (std::size_t i = 0; i < n; i += step) a.free(ptr[i]);
    for (std::size_t i = 0; i < n; i += step) ptr[i] = a.alloc();
    ops += (n + step - 1) / step;
  }
  for (std::size_t i = 0; i < n; i++) a.free(ptr[i]);
  return ops;
}

struct Result {
  double wall = 0;
  std::uint64_t allocs = 0;
  bool ok = true;
};

template <class A>
Result run(A &a, int threads, double seconds) {
  Result r;
  std::atomic<bool> stop{false}, go{false}, bad{false};
  std::atomic<int> ready{0};
  std::vector<std::uint64_t> counts(static_cast<std::size_t>(threads) * 8, 0);  // 64-byte apart
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; t++) {
    ts.emplace_back([&, t] {
      std::vector<void *> ptr(kElements);
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) sched_yield();
      std::uint64_t ops = 0;
      do {
        ops += stress_once(a, ptr.data(), kElements);
        if (!ptr[0]) bad.store(true);
      } while (!stop.load(std::memory_order_relaxed));
      counts[static_cast<std::size_t>(t) * 8] = ops;
    });
  }
  while (ready.load() < threads) sched_yield();
  double t0 = akb::now_s();
  go.store(true, std::memory_order_release);
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop.store(true);
  for (auto &th : ts) th.join();
  r.wall = akb::now_s() - t0;
  for (int t = 0; t < threads; t++) r.allocs += counts[static_cast<std::size_t>(t) * 8];
  r.ok = !bad.load();
  return r;
}

akb::Params prepare(const akb::Options &opts) {
  akb::Params p;
  double s = opts.quick ? kQuickSeconds : kSeconds;
  if (opts.rounds > 0) s = opts.rounds;  // --rounds N: N seconds
  p["ms"] = std::to_string(static_cast<long>(s * 1000));
  p["slices"] = std::to_string(opts.quick ? kQuickSlices : kSlices);
  p["threads"] = opts.quick ? "1,2,4" : "1,2,4,8,16";
  return p;
}

// What one child measured for one configuration at one T, over its slices.
struct Runs {
  std::vector<double> mops;  // one per slice
  double wall = 0;           // seconds, all slices
  double rss_after = 0;      // process RSS after the last slice
  double rss_growth = 0;     // the largest growth over one slice
  double pool_resident = 0;  // the pool's bytes_resident after a slice (largest)
  double peak_slabs = 0;     // the pool's peak slab count (largest)
  double slab_allocs = 0;    // slabs obtained, all slices
  bool pool = false;

  void add(const Result &r, double rss0, double rss1) {
    mops.push_back(static_cast<double>(r.allocs) / r.wall / 1e6);
    wall += r.wall;
    rss_after = rss1;
    rss_growth = std::max(rss_growth, rss1 - rss0);
  }
  void emit(const std::string &k) const {
    akb::emit("mops." + k, akb::median_of(mops));
    akb::emit("wall." + k, wall);
    akb::emit("rss_after." + k, rss_after);
    akb::emit("rss_growth." + k, rss_growth);
    if (!pool) return;
    akb::emit("pool_resident." + k, pool_resident);
    akb::emit("pool_peak_slabs." + k, peak_slabs);
    akb::emit("pool_slab_allocs." + k, slab_allocs);
  }
};

// One slice of one pool configuration: a fresh pool, the run, its stats.
// False (with a message) if the pool cannot be created or keeps objects.
bool run_pool(int variant, int threads, double seconds, Runs &out) {
  ak_pool_options o{};
  o.object_size = kElemSize;
  o.release_empty = variant != 1; /* ARAL's free-at-once policy, explicitly */
  if (variant == 0) {
    o.backing = AK_BACKING_HEAP;
    o.slab_size = kAralPage;
  }
  ak_pool *p = ak_pool_create(&o);
  if (!p) {
    std::fprintf(stderr, "ak_bench: ak_pool_create: %s\n", ak_last_error());
    return false;
  }
  Pool pool{p};
  double r0 = rss_bytes();
  Result r = run(pool, threads, seconds);
  double r1 = rss_bytes();
  ak_pool_stats st;
  ak_pool_stats_get(p, &st);
  ak_pool_destroy(p);
  if (!r.ok) {
    std::fprintf(stderr, "ak_bench: ak_pool_alloc returned NULL in the stress loop\n");
    return false;
  }
  if (st.live != 0) {
    std::fprintf(stderr, "ak_bench: pool holds %zu live objects after the run\n", st.live);
    return false;
  }
  out.add(r, r0, r1);
  out.pool = true;
  out.pool_resident = std::max(out.pool_resident, static_cast<double>(st.bytes_resident));
  out.peak_slabs = std::max(out.peak_slabs, static_cast<double>(st.peak_slabs));
  out.slab_allocs += static_cast<double>(st.slab_allocs);
  return true;
}

// The S seconds of every (configuration, T) are cut into `slices` runs,
// taken in turns (slice 1 of every T and configuration, then slice 2, ...),
// and each reports the median slice: a phase in which the machine runs
// slow then costs every T and configuration a slice, not one of them its
// whole figure (on the shared VM such phases last from a second to tens of
// seconds and cut the speed by a third), so the ratios between them hold.
int child(const akb::Params &params) {
  widen_affinity();
  double seconds = static_cast<double>(akb::param_u64(params, "ms", 300)) / 1000.0;
  int slices = static_cast<int>(std::max<std::uint64_t>(1, akb::param_u64(params, "slices", 1)));
  std::vector<int> ts = parse_list(params.count("threads") ? params.at("threads") : "1,2");
  const char *pre = std::getenv("LD_PRELOAD");
  bool glibc = !pre || !*pre;
  // Hardened-build cost: only the pools, not malloc.
  const bool ak_only = glibc && akb::arenakit_only(params);
  // pools=akheap,ak,akonce (child only, for profiling one configuration):
  // the pool variants to run; every one by default.
  const std::string only = params.count("pools") ? "," + params.at("pools") + "," : "";
  static const char *const keys[] = {"akheap", "ak", "akonce"};
  std::map<std::string, Runs> runs;  // by "<configuration>.T<n>"
  std::vector<std::string> order;    // keys in first-run order
  auto slot = [&](const std::string &k) -> Runs & {
    if (!runs.count(k)) order.push_back(k);
    return runs[k];
  };
  const double slice = seconds / slices;
  for (int i = 0; i < slices; i++) {
    for (int t : ts) {
      std::string tk = ".T" + std::to_string(t);
      if (!ak_only) {
        Malloc m;
        double r0 = rss_bytes();
        Result r = run(m, t, slice);
        double r1 = rss_bytes();
        if (!r.ok) return 1;
        slot("malloc" + tk).add(r, r0, r1);
      }
      if (!glibc) continue;
      // ARAL's configuration, the default pool, then the default's slabs
      // with ARAL's free-at-once policy (release_empty).
      for (int variant = 0; variant < 3; variant++) {
        if (!only.empty() && only.find(std::string(",") + keys[variant] + ",") == std::string::npos) continue;
        if (!run_pool(variant, t, slice, slot(keys[variant] + tk))) return 1;
      }
    }
  }
  for (const std::string &k : order) runs[k].emit(k);
  return 0;
}

std::string t_label(int t) { return akb::thread_label(t, kCores); }

akb::Report report(const akb::RunData &d, const akb::Params &params) {
  akb::Report rep;
  std::vector<int> ts = parse_list(params.count("threads") ? params.at("threads") : "1,2");
  struct Col {
    std::string label, alloc, key;
  };
  std::vector<Col> cols;
  if (d.has("glibc", "mops.ak.T" + std::to_string(ts.front())))
    cols.push_back({"arenakit, defaults (mmap, 64 KiB slabs, reclaim policy)", "glibc", "ak"});
  if (d.has("glibc", "mops.akheap.T" + std::to_string(ts.front())))
    cols.push_back({"arenakit, C heap (8 KiB slabs, release_empty)", "glibc", "akheap"});
  if (d.has("glibc", "mops.akonce.T" + std::to_string(ts.front())))
    cols.push_back({"arenakit, release_empty (mmap, 64 KiB slabs, free at once)", "glibc", "akonce"});
  for (const auto &a : d.allocators) cols.push_back({"malloc " + a.label, a.label, "malloc"});
  auto grid = [&](const char *id, const std::string &title, const std::string &what, const char *unit,
                  int precision, double scale) {
    akb::Table t = akb::make_table(id, title, "threads", unit, precision);
    for (const Col &c : cols) t.columns.push_back(c.label);
    for (int th : ts) {
      t.rows.push_back(t_label(th));
      std::vector<double> line;
      for (const Col &c : cols) {
        std::string k = c.key + ".T" + std::to_string(th);
        line.push_back(d.median(c.alloc, what + "." + k) * scale);
      }
      t.cells.push_back(line);
    }
    return t;
  };
  std::string secs = fmt("%.1f", static_cast<double>(akb::param_u64(params, "ms", 0)) / 1000.0);
  std::string slices = std::to_string(akb::param_u64(params, "slices", 1));
  akb::Table mops = grid("mops",
                         "Stress test: M allocations per second (and as many frees), T threads "
                         "x 10,000 elements of 20 bytes, " +
                             secs + " s per run in " + slices + " slices (higher is better)",
                         "mops", "M op/s", 2, 1);
  mops.note =
      "T > 2 is oversubscribed (2 cores). Each child takes the " + slices +
      " slices of every T and column in turns (slice 1 of all, then slice 2, ...) and reports the median "
      "slice, so that a slow phase of the machine costs every figure a slice rather than one figure its "
      "whole "
      "run; the table quotes the median over repetitions. All arenakit columns are one ak_pool in "
      "AK_SYNC_THREADS. The acceptance uses the C heap configuration, that of the test this scenario "
      "reproduces: 8 KiB slabs from the C heap (AK_BACKING_HEAP), each given back at once when it "
      "empties (release_empty). The defaults keep an emptied 64 KiB slab as a spare and reuse it (the "
      "reclaim "
      "policy gives it back once unused for the purge delay); release_empty on the same slabs unmaps "
      "it at once, so the loop maps and faults its slabs in again every pass.";
  akb::Table rss =
      grid("rss_after", "Process RSS after the last slice (threads joined, everything freed), MiB",
           "rss_after", "MiB", 1, 1.0 / 1048576);
  akb::Table delta =
      grid("rss_growth", "RSS growth over one slice of the run (after - before, the largest), MiB",
           "rss_growth", "MiB", 2, 1.0 / 1048576);
  rep.tables = {mops, rss, delta};
  if (d.has("glibc", "mops.akheap.T" + std::to_string(ts.front()))) {
    akb::Table pr = akb::make_table(
        "pool_resident",
        "arenakit pool after each slice (a fresh pool per slice): bytes_resident (ak_pool_stats) "
        "and peak slabs, the largest; slabs obtained, all slices",
        "threads", "", 0);
    pr.columns = {"bytes_resident", "peak slabs", "slabs obtained"};
    for (const char *v : {"ak", "akheap", "akonce"})
      for (int th : ts) {
        std::string k = std::string(v) + ".T" + std::to_string(th);
        std::string name = v == std::string("akheap") ? "C heap, "
                           : v == std::string("ak")   ? "defaults, "
                                                      : "release_empty, ";
        pr.rows.push_back(name + t_label(th));
        pr.cells.push_back({d.median("glibc", "pool_resident." + k),
                            d.median("glibc", "pool_peak_slabs." + k),
                            d.median("glibc", "pool_slab_allocs." + k)});
      }
    rep.tables.push_back(pr);
    if (std::find(ts.begin(), ts.end(), 1) != ts.end()) {
      double a1 = d.median("glibc", "mops.akheap.T1"), g1 = d.median("glibc", "mops.malloc.T1");
      rep.checks.push_back({"arenakit (C heap, 8 KiB slabs) vs glibc malloc at T=1 (" + fmt("%.2f", a1) +
                                " vs " + fmt("%.2f", g1) + " M op/s): ratio",
                            a1 / g1, kMinVsGlibc, "x"});
      if (std::find(ts.begin(), ts.end(), 2) != ts.end()) {
        double a2 = d.median("glibc", "mops.akheap.T2");
        rep.checks.push_back({"arenakit (C heap, 8 KiB slabs) M op/s at T=2 as a share of its T=1 (" +
                                  fmt("%.2f", a2) + " vs " + fmt("%.2f", a1) + "; at least 1.7x)",
                              100 * a2 / a1, kMinT2Percent, "%"});
      }
    }
  }
  return rep;
}

}  // namespace

AKB_SCENARIO(pool_stress, "pool-stress",
             "stress test: T threads x 10,000 elements allocated and freed in a loop, M ops/s and "
             "resident memory after the run, arenakit (AK_SYNC_THREADS) against malloc",
             {{"mops.akheap.T*", akb::Better::higher, "M op/s"},
              {"mops.ak.T*", akb::Better::higher, "M op/s"},
              {"mops.akonce.T*", akb::Better::higher, "M op/s"}});
