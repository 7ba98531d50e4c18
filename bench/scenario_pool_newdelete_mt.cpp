/* SPDX-License-Identifier: MIT */
// scenario_pool_newdelete_mt.cpp - pool-newdelete-mt: 50 million
// allocations and 50 million frees in total, split over T threads
// (T = 1..16), per-thread durations and their average, one table per
// implementation, and the source benchmark's comparison graph (AVG against T).
//
// Work: `rounds` (50) rounds, in each of which every one of the T threads
// allocates `objects` / T (1,000,000 / T) 48-byte objects (constructor
// work, as in pool-newdelete-st), keeping the pointers in an array of its
// own, then destroys them in allocation order. All threads start together
// (they wait on a flag after being created); a thread's duration runs from
// the start to its last free; the run's wall time runs from the start to the
// last thread's exit (thread creation is not timed).
//
// Implementations:
//   new/delete <malloc>   in every child (each malloc preloaded)
//   std::mutex free list  the source benchmark's core::arena_allocator with std::mutex:
//                         one free list of 48-byte slots carved from chunks
//                         of 4,096, a std::mutex around every pop and push
//   AK_SYNC_SPINLOCK, AK_SYNC_LOCKFREE, AK_SYNC_THREADS
//                         ak::object_pool<data_t> in that mode
// The std::mutex list runs at T = 1, 2, 4, 8, 16 only (parameter
// mutex_threads; it is the slowest by far, as in the source benchmark).
// The non-malloc implementations run in the glibc child only (they do not
// call malloc in the timed loops), after its new/delete has run at every T:
// then each implementation through every T in a row, as new/delete runs
// (a column's runs are never separated by another implementation's, so no
// column starts a T after an idle gap the others do not have).
// AK_SYNC_THREADS runs so in every child: the check compares it with the
// new/delete of the same process (the tables show the glibc child's
// figures). Each pool (and the mutex list) lives for the whole child, as a
// malloc heap does. The pools use default options: the slabs they empty
// are kept as spares under the reclaim policy and reused by the next
// round, as the source benchmark's allocator and every malloc keep their
// memory (AKB_NEWDELETE_MT_SPARE=1 in the environment gives the earlier
// tuned configuration instead: spare_slabs large enough for every slab).
//
// The machine has 2 cores: every T above 2 is oversubscribed (threads
// time-share the cores; a thread's duration then includes time it waited
// for a core). The child widens its CPU affinity to every online CPU (the
// runner pins children to one CPU; this scenario needs them all). With no
// more threads than CPUs, thread t is bound to the t-th CPU from the last,
// so that every implementation's T=1 runs on the same CPU and T=2 on two:
// left to the scheduler, a lone thread lands on either CPU, and this
// machine's virtual CPUs ran the same single-thread loop at two different
// speeds, which split every implementation's T=1 times into two groups.
// Oversubscribed runs are left to the scheduler, as in the source benchmark
// (AKB_NOPIN=1 in the environment leaves every run to it).
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "arenakit/arenakit.hpp"
#include "bench.h"
#include "bench_util.h"
#include "object48.h"

namespace {

using akb::data_t;
using akb::fmt;
using akb::parse_list;
using akb::widen_affinity;

constexpr std::uint64_t kObjects = 1000000;  // objects per round, over all threads
constexpr int kRounds = 50;
constexpr std::uint64_t kQuickObjects = 100000;
constexpr int kQuickRounds = 10;
constexpr int kMaxT = 16;
constexpr int kCores = 2;  // the development machine (reported: actual count)

// Acceptance bounds (issue).
constexpr double kMinT2Percent = 170;  // T=2 throughput >= 1.7x T=1
constexpr double kMaxCollapse = 3;     // spinlock/lock-free time(T) <= 3x time(T=1)
constexpr double kMaxSharedT1 = 1.3;   // spinlock/lock-free <= 1.3x AK_SYNC_THREADS at T=1
constexpr double kMaxSharedT2 = 1.5;   // ... and <= 1.5x at T=2

// The source benchmark's core::arena_allocator with std::mutex (zero overhead per slot).
class MutexFreeList {
 public:
  MutexFreeList() = default;
  MutexFreeList(const MutexFreeList &) = delete;
  MutexFreeList &operator=(const MutexFreeList &) = delete;
  ~MutexFreeList() {
    for (Slot *c : chunks_) ::operator delete(c);
  }
  data_t *create(std::uint64_t i) {
    Slot *s;
    {
      std::lock_guard<std::mutex> g(mu_);
      if (!free_) grow();
      s = free_;
      free_ = s->next;
    }
    return ::new (static_cast<void *>(s->mem)) data_t(i);
  }
  void destroy(data_t *d) {
    d->~data_t();
    Slot *s = reinterpret_cast<Slot *>(d);
    std::lock_guard<std::mutex> g(mu_);
    s->next = free_;
    free_ = s;
  }

 private:
  union Slot {
    Slot *next;
    alignas(data_t) unsigned char mem[sizeof(data_t)];
  };
  static constexpr std::size_t kChunk = 4096;
  void grow() {
    Slot *c = static_cast<Slot *>(::operator new(kChunk * sizeof(Slot)));
    chunks_.push_back(c);
    for (std::size_t k = 0; k + 1 < kChunk; k++) c[k].next = &c[k + 1];
    c[kChunk - 1].next = free_;
    free_ = c;
  }
  std::mutex mu_;
  Slot *free_ = nullptr;
  std::vector<Slot *> chunks_;
};

struct NewDelete {
  data_t *create(std::uint64_t i) { return new data_t(i); }
  void destroy(data_t *d) { delete d; }
};

struct Pool {
  ak::object_pool<data_t> p;
  explicit Pool(ak_sync sync, std::size_t spare) : p(options(sync, spare)) {}
  static ak_pool_options options(ak_sync sync, std::size_t spare) {
    ak_pool_options o{};
    o.sync = sync;
    o.spare_slabs = spare;
    return o;
  }
  data_t *create(std::uint64_t i) { return p.create(i); }
  void destroy(data_t *d) { p.destroy(d); }
};

struct Impl {
  const char *key;    // in emitted keys
  const char *label;  // in tables
};
const Impl kAkImpls[] = {
    {"mutex", "std::mutex free list"},
    {"spinlock", "AK_SYNC_SPINLOCK"},
    {"lockfree", "AK_SYNC_LOCKFREE"},
    {"threads", "AK_SYNC_THREADS"},
};

struct RunResult {
  double wall = 0;
  std::vector<double> per_thread;
  bool ok = true;
};

template <class A>
__attribute__((noinline)) bool thread_work(A &a, data_t **arr, std::uint64_t count, int rounds,
                                           std::uint64_t base) {
  std::uint64_t s = 0;
  for (int r = 0; r < rounds; r++) {
    for (std::uint64_t i = 0; i < count; i++) arr[i] = a.create(base + i);
    for (std::uint64_t i = 0; i < count; i++) {
      s += arr[i]->flags;
      a.destroy(arr[i]);
    }
  }
  return s == count * static_cast<std::uint64_t>(rounds);
}

template <class A>
RunResult run(A &a, int threads, std::uint64_t objects, int rounds) {
  RunResult res;
  std::uint64_t count = objects / static_cast<std::uint64_t>(threads);
  res.per_thread.assign(static_cast<std::size_t>(threads), 0);
  std::vector<std::vector<data_t *>> arrays(static_cast<std::size_t>(threads));
  for (auto &v : arrays) v.assign(count, nullptr);  // before the timing
  std::atomic<int> ready{0};
  std::atomic<bool> go{false}, fail{false};
  std::atomic<double> start{0};
  std::vector<std::thread> ts;
  // One thread per CPU at most: bound (see the top of the file).
  std::vector<int> cpus = akb::allowed_cpus();
  for (int t = 0; t < threads; t++) {
    ts.emplace_back([&, t] {
      if (threads <= static_cast<int>(cpus.size()) && !std::getenv("AKB_NOPIN")) {
        int c = cpus[cpus.size() - 1 - static_cast<std::size_t>(t)];
        if (!akb::pin_to_cpu(c)) std::fprintf(stderr, "ak_bench: cannot bind a thread to CPU %d\n", c);
      }
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) sched_yield();
      double t0 = start.load();
      bool ok = thread_work(a, arrays[static_cast<std::size_t>(t)].data(), count, rounds,
                            static_cast<std::uint64_t>(t) * count);
      res.per_thread[static_cast<std::size_t>(t)] = akb::now_s() - t0;
      if (!ok) fail.store(true);
    });
  }
  while (ready.load() < threads) sched_yield();
  double t0 = akb::now_s();
  start.store(t0);
  go.store(true, std::memory_order_release);
  for (auto &th : ts) th.join();
  res.wall = akb::now_s() - t0;
  res.ok = !fail.load();
  return res;
}

akb::Params prepare(const akb::Options &opts) {
  akb::Params p;
  p["objects"] = std::to_string(opts.n ? opts.n : (opts.quick ? kQuickObjects : kObjects));
  p["rounds"] = std::to_string(opts.rounds > 0 ? opts.rounds : (opts.quick ? kQuickRounds : kRounds));
  std::string ts;
  if (opts.quick) {
    ts = "1,2,4";
  } else {
    for (int t = 1; t <= kMaxT; t++) ts += (t > 1 ? "," : "") + std::to_string(t);
  }
  p["threads"] = ts;
  // The std::mutex list is by far the slowest (the source benchmark's took 67 s at 16
  // threads): it runs at these T only, so that the scenario stays within
  // about 10 minutes.
  p["mutex_threads"] = opts.quick ? "1,2,4" : "1,2,4,8,16";
  return p;
}

template <class A>
bool measure(A &a, const char *key, int t, std::uint64_t objects, int rounds) {
  RunResult r = run(a, t, objects, rounds);
  if (!r.ok) {
    std::fprintf(stderr, "ak_bench: %s T=%d: wrong check sum\n", key, t);
    return false;
  }
  std::string k = std::string(key) + ".T" + std::to_string(t);
  akb::emit("wall." + k, r.wall);
  double sum = 0;
  for (std::size_t i = 0; i < r.per_thread.size(); i++) {
    akb::emit("th." + k + "." + std::to_string(i + 1), r.per_thread[i]);
    sum += r.per_thread[i];
  }
  akb::emit("avg." + k, sum / static_cast<double>(r.per_thread.size()));
  return true;
}

// The 1-minute load average (other processes on the machine skew every
// multi-threaded figure; the report quotes it).
double loadavg() {
  double l = NAN;
  FILE *f = std::fopen("/proc/loadavg", "r");
  if (f) {
    if (std::fscanf(f, "%lf", &l) != 1) l = NAN;
    std::fclose(f);
  }
  return l;
}

int child(const akb::Params &params) {
  widen_affinity();
  akb::emit("loadavg_start", loadavg());
  std::uint64_t objects = akb::param_u64(params, "objects", kQuickObjects);
  int rounds = static_cast<int>(akb::param_u64(params, "rounds", kQuickRounds));
  std::vector<int> ts = parse_list(params.count("threads") ? params.at("threads") : "1,2");
  std::vector<int> mts = parse_list(params.count("mutex_threads") ? params.at("mutex_threads") : "1,2");
  const char *pre = std::getenv("LD_PRELOAD");
  bool glibc = !pre || !*pre;
  // Default options (0), or, tuned, enough spare slabs to keep every
  // object's slab (64 KiB slabs).
  const char *tuned = std::getenv("AKB_NEWDELETE_MT_SPARE");
  std::size_t spare = tuned && std::strcmp(tuned, "1") == 0
                          ? static_cast<std::size_t>(objects * sizeof(data_t) / 65536 + 2 * kMaxT + 16)
                          : 0;
  NewDelete nd;
  MutexFreeList mu;
  Pool spin(AK_SYNC_SPINLOCK, spare), lf(AK_SYNC_LOCKFREE, spare), thr(AK_SYNC_THREADS, spare);
  // Hardened-build cost: only the ak_pool modes, and only at the headline's
  // T (those of the std::mutex list: 1, 2, 4, 8, 16), which keeps 2 x 3
  // children of the full run affordable (LOCKFREE alone takes 10-20 s per T).
  const bool ak_only = glibc && akb::arenakit_only(params);
  // impls=newdelete,mutex,spinlock,lockfree,threads (child only, for
  // profiling one implementation): the implementations to run; all by default.
  const std::string only = params.count("impls") ? "," + params.at("impls") + "," : "";
  auto want = [&](const char *key) {
    return only.empty() || only.find("," + std::string(key) + ",") != std::string::npos;
  };
  if (ak_only) {
    std::vector<int> keep;
    for (int t : ts)
      if (std::find(mts.begin(), mts.end(), t) != mts.end()) keep.push_back(t);
    ts = keep;
  }
  // Pass 1: new/delete at every T, with nothing else run in between (an
  // ak_pool run between two of them would change the malloc's state: its
  // threads and the pool's per-thread state call malloc; mimalloc's T=2
  // ran 0.33 s instead of 0.18 after a pool run at T=1).
  if (!ak_only && want("newdelete"))
    for (int t : ts) {
      double t0 = akb::now_s();
      if (!measure(nd, "newdelete", t, objects, rounds)) return 1;
      std::fprintf(stderr, "    new/delete T=%d: %.1f s\n", t, akb::now_s() - t0);
    }
  // Pass 2: each of the others through every T in a row, as pass 1 runs
  // new/delete and as the source benchmark runs each implementation (its
  // 16 runs back to back). Every column thus follows its own previous T
  // with no other work in between: a pool left idle while other
  // implementations ran (the std::mutex list takes many seconds at T > 1)
  // would give its empty slabs back under the reclaim policy and refault
  // them in its next T, a cost the malloc columns never pay here.
  // AK_SYNC_THREADS runs in every child: the check compares it with the
  // new/delete of the same process.
  auto sweep = [&](const char *key, auto &impl, const std::vector<int> &at) {
    if (!want(key)) return true;
    for (int t : at) {
      double t0 = akb::now_s();
      if (!measure(impl, key, t, objects, rounds)) return false;
      std::fprintf(stderr, "    %s T=%d: %.1f s\n", key, t, akb::now_s() - t0);
    }
    return true;
  };
  std::vector<int> mutex_ts;  // the std::mutex list's T: those of mutex_threads that run
  for (int t : ts)
    if (!ak_only && std::find(mts.begin(), mts.end(), t) != mts.end()) mutex_ts.push_back(t);
  if (!sweep("threads", thr, ts)) return 1;
  if (glibc && (!sweep("mutex", mu, mutex_ts) || !sweep("spinlock", spin, ts) || !sweep("lockfree", lf, ts)))
    return 1;
  akb::emit("loadavg_end", loadavg());
  return 0;
}

// ---- report -------------------------------------------------------------------

std::string t_label(int t) { return akb::thread_label(t, kCores); }

akb::Report report(const akb::RunData &d, const akb::Params &params) {
  akb::Report rep;
  std::vector<int> ts = parse_list(params.count("threads") ? params.at("threads") : "1,2");
  std::uint64_t objects = akb::param_u64(params, "objects", kQuickObjects);
  std::uint64_t rounds = akb::param_u64(params, "rounds", kQuickRounds);
  // Columns: new/delete under each malloc, then the glibc child's others.
  struct Col {
    std::string label, alloc, key;
  };
  std::vector<Col> cols;
  std::vector<std::string> mallocs;
  for (const auto &a : d.allocators) {
    cols.push_back({"new/delete " + a.label, a.label, "newdelete"});
    mallocs.push_back(a.label);
  }
  if (d.has("glibc", "wall.threads.T" + std::to_string(ts.front())))
    for (const Impl &im : kAkImpls) cols.push_back({im.label, "glibc", im.key});
  auto val = [&](const Col &c, const char *what, int t) {
    return d.median(c.alloc, std::string(what) + "." + c.key + ".T" + std::to_string(t));
  };
  auto grid = [&](const std::string &id, const std::string &title, const char *what, const std::string &unit,
                  const std::vector<int> &rows, double scale) {
    akb::Table tb = akb::make_table(id, title, "threads", unit, 3);
    for (const Col &c : cols) tb.columns.push_back(c.label);
    for (int t : rows) {
      tb.rows.push_back(t_label(t));
      std::vector<double> line;
      for (const Col &c : cols) {
        double v = val(c, what, t);
        line.push_back(scale > 0 ? scale / v : v);
      }
      tb.cells.push_back(line);
    }
    return tb;
  };
  std::vector<int> head;
  for (int t : ts)
    if (t == 1 || t == 2 || t == 4 || t == 8 || t == 16) head.push_back(t);
  double total_ops = 2.0 * static_cast<double>(objects) * static_cast<double>(rounds);
  std::string work = fmt("%.0f", static_cast<double>(objects) * static_cast<double>(rounds) / 1e6) +
                     "M allocations + the same number of frees in total per T (" + std::to_string(rounds) +
                     " rounds of objects/T each per thread, objects = " + std::to_string(objects) + ")";
  akb::Table h = grid("avg_headline",
                      "Multi-thread: AVG per-thread seconds for " + work +
                          " (lower is better; T > 2 oversubscribed on 2 cores)",
                      "avg", "s", head, 0);
  akb::Table avg = grid("vsT_avg", "AVG per-thread duration against T, every T", "avg", "s", ts, 0);
  akb::Table wall = grid("vsT_wall", "Wall time of the whole run against T (start to last thread's exit)",
                         "wall", "s", ts, 0);
  akb::Table tput =
      grid("vsT_tput", "Total throughput: million operations (allocations + frees) per second of wall time",
           "wall", "M op/s", ts, total_ops / 1e6);
  std::string cores = " Machine: " + fmt("%.0f", d.median("glibc", "cpus")) +
                      " CPUs available to the child; T > 2 is oversubscription. 1-minute load average "
                      "(this run included) at the start and end of each child:";
  for (const auto &a : d.allocators)
    cores += " " + a.label + " " + fmt("%.1f", d.median(a.label, "loadavg_start")) + "/" +
             fmt("%.1f", d.median(a.label, "loadavg_end")) + ";";
  cores += " above about 2, other processes shared the cores.";
  h.note =
      "Median over repetitions of each run's per-thread average; full tables in "
      "results/pool-newdelete-mt.md." +
      cores;
  avg.note = cores;
  rep.tables = {h, avg, wall, tput};

  // Per-implementation tables in the source benchmark's layout.
  for (const Col &c : cols) {
    akb::Table tb;
    tb.id = "pt_" + c.key + (c.key == "newdelete" ? "_" + c.alloc : "");
    tb.title = "Results for " + c.label + ": seconds per thread (columns: thread index) and their AVG";
    tb.corner = "Threads";
    tb.unit = "s";
    int maxt = *std::max_element(ts.begin(), ts.end());
    for (int i = 1; i <= maxt; i++) tb.columns.push_back(std::to_string(i));
    tb.columns.push_back("AVG");
    tb.columns.push_back("wall");
    for (int t : ts) {
      if (std::isnan(val(c, "wall", t))) continue;  // not run at this T
      tb.rows.push_back(t_label(t));
      std::vector<double> line;
      for (int i = 1; i <= maxt; i++)
        line.push_back(
            i <= t ? d.median(c.alloc, "th." + c.key + ".T" + std::to_string(t) + "." + std::to_string(i))
                   : NAN);
      line.push_back(val(c, "avg", t));
      line.push_back(val(c, "wall", t));
      tb.cells.push_back(line);
    }
    rep.tables.push_back(tb);
  }

  // Acceptance, from the wall times of this run.
  if (cols.size() > mallocs.size()) {
    const Col *thr = nullptr, *spin = nullptr, *lf = nullptr;
    for (const Col &c : cols) {
      if (c.key == "threads") thr = &c;
      if (c.key == "spinlock") spin = &c;
      if (c.key == "lockfree") lf = &c;
    }
    // Paired in each malloc's child: new/delete's wall time over that
    // child's AK_SYNC_THREADS wall time at the same T; the median over
    // repetitions.
    double worst = INFINITY;
    std::string where;
    akb::Table pair = akb::make_table(
        "threads_paired",
        "AK_SYNC_THREADS against new/delete in each malloc's child: wall-time ratio new/delete / "
        "AK_SYNC_THREADS (higher is better; the check wants > 1 everywhere)",
        "threads", "x", 3);
    for (const std::string &m : mallocs) pair.columns.push_back("new/delete " + m);
    for (int t : ts) {
      std::string tk = ".T" + std::to_string(t);
      pair.rows.push_back(t_label(t));
      std::vector<double> line;
      for (const std::string &m : mallocs) {
        double r = d.median_ratio(m, "wall.newdelete" + tk, "wall.threads" + tk);
        line.push_back(r);
        if (!std::isnan(worst) && (std::isnan(r) || r < worst)) {  // a missing figure fails the check
          worst = r;
          where = m + " at T=" + std::to_string(t);
        }
      }
      pair.cells.push_back(line);
    }
    pair.note =
        "Each child runs AK_SYNC_THREADS (ak_pool does not call malloc in the timed loop) at every T "
        "after its new/delete has run at every T; a ratio is taken within one child, then the median over "
        "repetitions. "
        "The AK_SYNC_THREADS columns of the other tables are the glibc child's.";
    rep.tables.push_back(pair);
    std::string trange = "T=" + std::to_string(ts.front()) + ".." + std::to_string(ts.back());
    rep.checks.push_back({"AK_SYNC_THREADS faster than new/delete under every malloc at every " + trange +
                              " (wall time, paired in each malloc's child; closest: " + where +
                              "): slowest new/delete-to-threads time ratio",
                          worst, 1, "x"});
    if (std::find(ts.begin(), ts.end(), 1) != ts.end() && std::find(ts.begin(), ts.end(), 2) != ts.end()) {
      double p = 100 * val(*thr, "wall", 1) / val(*thr, "wall", 2);
      rep.checks.push_back({"AK_SYNC_THREADS total throughput at T=2 as a share of T=1 (at least 1.7x)", p,
                            kMinT2Percent, "%"});
    }
    for (const Col *c : {spin, lf}) {
      double w = 0;
      int wt = 0;
      for (int t : ts) {
        double r = val(*c, "wall", t) / val(*c, "wall", ts.front());
        if (r > w) {
          w = r;
          wt = t;
        }
      }
      rep.checks.push_back(akb::at_most(std::string(c->label) + ": worst wall time over " + trange + " is " +
                                            fmt("%.2f", w) + "x its T=" + std::to_string(ts.front()) +
                                            " time (T=" + std::to_string(wt) + "; at most 3x): 3 / that",
                                        w, kMaxCollapse));
    }
    // The shared modes against AK_SYNC_THREADS (same child) and against
    // new/delete under glibc and mimalloc (their own children), from the
    // average per-thread time.
    auto nd = [&](const char *m, int t) -> double {
      for (const Col &c : cols)
        if (c.key == "newdelete" && c.alloc == m) return val(c, "avg", t);
      return static_cast<double>(NAN);
    };
    const std::pair<int, double> bounds[] = {{1, kMaxSharedT1}, {2, kMaxSharedT2}};
    for (const Col *c : {spin, lf}) {
      for (const auto &[t, bound] : bounds) {
        if (std::find(ts.begin(), ts.end(), t) == ts.end()) continue;
        rep.checks.push_back(akb::at_most(std::string(c->label) + " at T=" + std::to_string(t) +
                                              " against AK_SYNC_THREADS (" + fmt("%.3f", val(*c, "avg", t)) +
                                              " s vs " + fmt("%.3f", val(*thr, "avg", t)) + " s; at most " +
                                              fmt("%.1f", bound) + "x): " + fmt("%.1f", bound) + " / that",
                                          val(*c, "avg", t) / val(*thr, "avg", t), bound));
      }
      if (std::find(ts.begin(), ts.end(), 2) == ts.end()) continue;
      for (const char *m : {"glibc", "mimalloc"}) {
        double theirs = nd(m, 2);
        if (std::isnan(theirs)) continue;
        rep.checks.push_back(akb::at_most(std::string(c->label) + " at T=2 against new/delete under " + m +
                                              " (" + fmt("%.3f", val(*c, "avg", 2)) + " s vs " +
                                              fmt("%.3f", theirs) + " s; at most that)",
                                          val(*c, "avg", 2), theirs));
      }
    }
  }
  return rep;
}

}  // namespace

AKB_SCENARIO(
    pool_newdelete_mt, "pool-newdelete-mt",
    "multi-thread: 50M allocations + 50M frees split over T = 1..16 threads, per-thread "
    "durations and AVG, new/delete under each malloc, std::mutex free list, ak_pool spinlock, lock-free "
    "and threads modes",
    {{"wall.spinlock.T*", akb::Better::lower, "s"},
     {"wall.lockfree.T*", akb::Better::lower, "s"},
     {"wall.threads.T*", akb::Better::lower, "s"}});
