// SPDX-License-Identifier: MIT
// scenario_pool_rivals.cpp - pool-rivals: arenakit's fixed-size pool against
// what a C++ user would pick instead, on four workloads:
//   alloc_free  allocate-all/free-all: n objects of 48 bytes allocated (each
//               written whole), then freed in allocation order; `rounds`
//               times with one allocator (ns per allocation, per free)
//   churn       random-order churn: n live 48-byte objects, then `steps`
//               steps that each free a random one and allocate and write a
//               new one, then every object freed in a fixed random order;
//               ns per step, the peak resident memory (VmHWM) above the
//               process's RSS before the fill, the RSS after the frees and
//               after the allocator's destruction, minor faults
//   node        the node benchmark of the source lecture (memnode_benchmark):
//               4096 nodes of 16 bytes {const char *file; unsigned line;},
//               then `ops` times: delete node (i * 7) % 4096 and allocate a
//               new one in its place, then sum the nodes' lines and free them
//               (ns per operation, the whole benchmark timed)
//   threads2    two threads share one allocator, each doing alloc_free on
//               n / 2 objects (thread-safe rows only; ns per allocate+free
//               pair: wall time / the pairs of both threads). The machine's
//               cores are shared with whatever else runs.
// The rows (headline columns):
//   ak_pool                  ak_pool_create with a zeroed options struct
//                            but for object_size (AK_SYNC_THREADS)
//   boost::object_pool       object_pool<T>::malloc/free (Debian's Boost).
//                            Its free() keeps the free list address-ordered
//                            (a walk of that list per call), so freeing all
//                            one by one is quadratic: it is freed by its
//                            destructor in alloc_free and at churn's end
//   boost::pool<>            pool<>::malloc/free
//   pmr unsynchronized_pool  std::pmr::unsynchronized_pool_resource
//   pmr synchronized_pool    std::pmr::synchronized_pool_resource
//   new/delete <malloc>      ::operator new / sized ::operator delete under
//                            glibc, arenakit's malloc (LD_PRELOAD of
//                            libarenakit-malloc.so) and mimalloc (its
//                            library preloaded; n/a when CMake found none)
// and ak_pool's other sync modes (a table of their own). pmr resources are
// called through a memory_resource pointer, as polymorphic_allocator does.
// Every (row, workload) runs in a process of its own from the runner's glibc
// child (VmHWM is its own; killed past a time limit); the runner's other
// children measure nothing here. Single-threaded workloads stay on the CPU
// the runner pins to; threads2 widens to every CPU.
#include <pthread.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory_resource>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "arenakit/pool.h"
#include "bench.h"
#include "bench_util.h"
#include "mw_common.h"

#if defined(AKB_HAVE_BOOST) && __has_include(<boost/pool/object_pool.hpp>)
// GCC reads Boost's pool list through std::optional as maybe uninitialized
// (it is set by the constructor): a false positive in Boost's headers.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <boost/pool/object_pool.hpp>
#include <boost/pool/pool.hpp>
#define AKB_BOOST_POOL 1
#else
#define AKB_BOOST_POOL 0
#endif
#ifndef AKB_MIMALLOC_SO
#define AKB_MIMALLOC_SO ""
#endif

namespace {

using akb::map_array;

const char *const kName = "pool-rivals";
constexpr std::uint64_t kN = 1000000, kQuickN = 200000;
constexpr std::uint64_t kSteps = 5000000, kQuickSteps = 1000000;
constexpr std::uint64_t kOps = 10000000, kQuickOps = 2000000;
constexpr int kRounds = 5, kQuickRounds = 3;
constexpr unsigned kNodes = 4096, kNodeStep = 7;
// boost::object_pool's churn: its free() walks its address-ordered free list,
// which makes a step cost microseconds; it gets this limit, and the report a
// lower bound.
constexpr double kOrderedLimit = 15;

struct Obj48 {
  unsigned char b[48];
};
struct memnode {
  const char *file;
  unsigned line;
};

enum Kind { kAkPool, kObjectPool, kBoostPool, kPmrUnsync, kPmrSync, kNewDelete };
struct Row {
  const char *key, *label;
  Kind kind;
  int sync;         // ak_pool: the ak_sync, -1: the zeroed default
  bool threadsafe;  // measured in threads2
  bool headline;    // a column of the headline tables (else: the sync-mode table)
};
const Row kRows[] = {
    {"ak_pool", "ak_pool", kAkPool, -1, true, true},
    {"object_pool", "boost::object_pool", kObjectPool, 0, false, true},
    {"boost_pool", "boost::pool<>", kBoostPool, 0, false, true},
    {"pmr_unsync", "pmr unsynchronized_pool", kPmrUnsync, 0, false, true},
    {"pmr_sync", "pmr synchronized_pool", kPmrSync, 0, true, true},
    {"nd_glibc", "new/delete glibc", kNewDelete, 0, true, true},
    {"nd_arenakit", "new/delete arenakit malloc", kNewDelete, 0, true, true},
    {"nd_mimalloc", "new/delete mimalloc", kNewDelete, 0, true, true},
    {"ak_pool_none", "ak_pool AK_SYNC_NONE", kAkPool, AK_SYNC_NONE, false, false},
    {"ak_pool_spinlock", "ak_pool AK_SYNC_SPINLOCK", kAkPool, AK_SYNC_SPINLOCK, true, false},
    {"ak_pool_lockfree", "ak_pool AK_SYNC_LOCKFREE", kAkPool, AK_SYNC_LOCKFREE, true, false},
};
const char *const kWorkloads[] = {"alloc_free", "churn", "node", "threads2"};

// The process a row runs in: its LD_PRELOAD ("" none; nullptr: not available).
const char *row_preload(const Row &r) {
  if (std::strcmp(r.key, "nd_arenakit") == 0) return *AKB_ARENAKIT_MALLOC ? AKB_ARENAKIT_MALLOC : nullptr;
  if (std::strcmp(r.key, "nd_mimalloc") == 0) return *AKB_MIMALLOC_SO ? AKB_MIMALLOC_SO : nullptr;
  if ((r.kind == kObjectPool || r.kind == kBoostPool) && !AKB_BOOST_POOL) return nullptr;
  return "";
}

// ---- the allocators: alloc(), free(p); bulk_only: freed by destruction ----------

template <class T>
struct AkPoolA {
  static constexpr bool bulk_only = false;
  ak_pool *p;
  explicit AkPoolA(int sync) {
    ak_pool_options o{};
    o.object_size = sizeof(T);
    if (sync >= 0) o.sync = static_cast<ak_sync>(sync);
    p = ak_pool_create(&o);
    if (!p) std::fprintf(stderr, "ak_bench: ak_pool_create: %s\n", ak_last_error());
  }
  ~AkPoolA() {
    if (p) ak_pool_destroy(p);
  }
  bool ok() const { return p != nullptr; }
  void *alloc() { return ak_pool_alloc(p); }
  void free(void *q) { ak_pool_free(p, q); }
};

#if AKB_BOOST_POOL
template <class T>
struct ObjectPoolA {
  static constexpr bool bulk_only = true;
  boost::object_pool<T> p;
  explicit ObjectPoolA(int) {}
  bool ok() const { return true; }
  void *alloc() { return p.malloc(); }
  void free(void *q) { p.free(static_cast<T *>(q)); }
};

template <class T>
struct BoostPoolA {
  static constexpr bool bulk_only = false;
  boost::pool<> p{sizeof(T)};
  explicit BoostPoolA(int) {}
  bool ok() const { return true; }
  void *alloc() { return p.malloc(); }
  void free(void *q) { p.free(q); }
};
#endif

template <class T, class R>
struct PmrA {
  static constexpr bool bulk_only = false;
  R r;
  std::pmr::memory_resource *mr;
  explicit PmrA(int) : mr(&r) { asm volatile("" : "+r"(mr)); }  // as a container holds it: virtual calls
  bool ok() const { return true; }
  void *alloc() { return mr->allocate(sizeof(T), alignof(T)); }
  void free(void *q) { mr->deallocate(q, sizeof(T), alignof(T)); }
};

template <class T>
struct NewDeleteA {
  static constexpr bool bulk_only = false;
  explicit NewDeleteA(int) {}
  bool ok() const { return true; }
  void *alloc() { return ::operator new(sizeof(T)); }
  void free(void *q) { ::operator delete(q, sizeof(T)); }
};

// ---- the workloads -----------------------------------------------------------------

// Allocates n objects (each written whole) into ptr, then frees them in
// allocation order; returns false when an allocation fails.
template <class A>
__attribute__((noinline)) bool fill_free(A &a, void **ptr, std::uint64_t n, double &t_alloc, double &t_free) {
  double t0 = akb::now_s();
  for (std::uint64_t i = 0; i < n; i++) {
    void *p = a.alloc();
    if (!p) return false;
    std::memset(p, static_cast<int>(i), sizeof(Obj48));
    ptr[i] = p;
  }
  double t1 = akb::now_s();
  if (!A::bulk_only)
    for (std::uint64_t i = 0; i < n; i++) a.free(ptr[i]);
  t_alloc = t1 - t0;
  t_free = akb::now_s() - t1;
  return true;
}

template <class A>
bool alloc_free(int sync, std::uint64_t n, int rounds) {
  void **ptr = map_array<void *>(n);
  std::vector<double> ta, tf;
  std::optional<A> a;
  a.emplace(sync);
  for (int r = 0; r < rounds; r++) {
    double t_alloc, t_free;
    if (!a->ok() || !fill_free(*a, ptr, n, t_alloc, t_free)) return false;
    if (A::bulk_only) {  // freed by the destructor, timed as the frees
      double t0 = akb::now_s();
      a.reset();
      t_free = akb::now_s() - t0;
      a.emplace(sync);
    }
    ta.push_back(t_alloc * 1e9 / static_cast<double>(n));
    tf.push_back(t_free * 1e9 / static_cast<double>(n));
  }
  akb::emit("alloc_ns", akb::median_of(ta));
  akb::emit("free_ns", akb::median_of(tf));
  return true;
}

template <class A>
__attribute__((noinline)) std::uint64_t churn_steps(A &a, void **live, std::uint64_t n, std::uint64_t steps) {
  std::uint64_t s = 0x9E3779B97F4A7C15ull, sum = 0;
  for (std::uint64_t k = 0; k < steps; k++) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    std::size_t i = static_cast<std::size_t>(((s >> 32) * n) >> 32);
    sum += *static_cast<unsigned char *>(live[i]);
    a.free(live[i]);
    void *p = a.alloc();
    if (!p) std::abort();
    std::memset(p, static_cast<int>(k), sizeof(Obj48));
    live[i] = p;
  }
  return sum;
}

template <class A>
bool churn(int sync, std::uint64_t n, std::uint64_t steps) {
  void **live = map_array<void *>(n);
  auto *order = map_array<std::uint32_t>(n);
  for (std::uint64_t i = 0; i < n; i++) order[i] = static_cast<std::uint32_t>(i);
  std::uint64_t x = 0x2545f4914f6cdd1dull;  // fixed-seed shuffle: the same order for every row
  for (std::uint64_t i = n - 1; i > 0; i--) {
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    std::swap(order[i], order[(x * 0x2545f4914f6cdd1dull) % (i + 1)]);
  }
  double base = akmw::proc_status_bytes("VmRSS"), f0 = akmw::minor_faults();
  std::optional<A> a;
  a.emplace(sync);
  if (!a->ok()) return false;
  for (std::uint64_t i = 0; i < n; i++) {
    live[i] = a->alloc();
    if (!live[i]) return false;
    std::memset(live[i], static_cast<int>(i), sizeof(Obj48));
  }
  double t0 = akb::now_s();
  akb::sink(reinterpret_cast<void *>(churn_steps(*a, live, n, steps)));
  double t1 = akb::now_s();
  if (!A::bulk_only)
    for (std::uint64_t i = 0; i < n; i++) a->free(live[order[i]]);
  double after_free = akmw::proc_status_bytes("VmRSS");
  a.reset();
  double after_destroy = akmw::proc_status_bytes("VmRSS");
  akb::emit("step_ns", (t1 - t0) * 1e9 / static_cast<double>(steps));
  akb::emit("peak_mib", (akmw::proc_status_bytes("VmHWM") - base) / 1048576.0);
  if (!A::bulk_only) akb::emit("freed_mib", (after_free - base) / 1048576.0);
  akb::emit("destroyed_mib", (after_destroy - base) / 1048576.0);
  akb::emit("minflt_k", (akmw::minor_faults() - f0) / 1000.0);
  return true;
}

// memnode_benchmark with the allocator `a` in place of new/delete.
template <class A>
__attribute__((noinline)) unsigned long node_bench(A &a, std::uint64_t ops) {
  static const char kFile[] = "datarep/mb-filename.cc";
  long counter = 0;
  memnode *m[kNodes];
  for (unsigned i = 0; i != kNodes; ++i)
    m[i] = new (a.alloc()) memnode{kFile, static_cast<unsigned>(counter++)};
  for (std::uint64_t i = 0; i != ops; ++i) {
    unsigned pos = static_cast<unsigned>((i * kNodeStep) % kNodes);
    a.free(m[pos]);
    m[pos] = new (a.alloc()) memnode{kFile, static_cast<unsigned>(counter++)};
  }
  unsigned long result = 0;
  for (unsigned i = 0; i != kNodes; ++i) {
    result += m[i]->line;
    a.free(m[i]);
  }
  return result;
}

template <class A>
bool node(int sync, std::uint64_t ops, int rounds) {
  std::vector<double> t;
  unsigned long result = 0;
  for (int r = 0; r < rounds; r++) {
    A a(sync);
    if (!a.ok()) return false;
    double t0 = akb::now_s();
    result = node_bench(a, ops);
    t.push_back((akb::now_s() - t0) * 1e9 / static_cast<double>(ops));
  }
  akb::emit("op_ns", akb::median_of(t));
  akb::emit("result", static_cast<double>(result));
  return true;
}

template <class A>
bool threads2(int sync, std::uint64_t n, int rounds) {
  akb::widen_affinity();
  std::uint64_t half = n / 2;
  void **ptr = map_array<void *>(2 * half);
  A a(sync);
  if (!a.ok()) return false;
  std::atomic<int> ready{0};
  std::atomic<bool> failed{false};
  auto work = [&](void **mine) {
    ready.fetch_add(1);
    while (ready.load() < 2) {
    }
    for (int r = 0; r < rounds; r++) {
      double ta, tf;
      if (!fill_free(a, mine, half, ta, tf)) failed = true;
    }
  };
  double t0 = akb::now_s();
  std::thread other(work, ptr + half);
  work(ptr);
  other.join();
  double t = akb::now_s() - t0;
  if (failed) return false;
  akb::emit("pair_ns", t * 1e9 / (2.0 * static_cast<double>(half) * rounds));
  return true;
}

template <template <class> class A>
int dispatch(const Row &row, const std::string &w, const akb::Params &p) {
  std::uint64_t n = akb::param_u64(p, "n", kQuickN);
  int rounds = static_cast<int>(akb::param_u64(p, "rounds", kQuickRounds));
  bool ok = false;
  if (w == "alloc_free") ok = alloc_free<A<Obj48>>(row.sync, n, rounds);
  if (w == "churn") ok = churn<A<Obj48>>(row.sync, n, akb::param_u64(p, "steps", kQuickSteps));
  if (w == "node") ok = node<A<memnode>>(row.sync, akb::param_u64(p, "ops", kQuickOps), rounds);
  if (w == "threads2") ok = threads2<A<Obj48>>(row.sync, n, rounds);
  return ok ? 0 : 1;
}

template <class T>
using Unsync = PmrA<T, std::pmr::unsynchronized_pool_resource>;
template <class T>
using Sync = PmrA<T, std::pmr::synchronized_pool_resource>;

// One (row, workload) in this process.
int sub(const akb::Params &p) {
  const Row *row = nullptr;
  for (const Row &r : kRows)
    if (p.at("row") == r.key) row = &r;
  if (!row || !p.count("w")) return 2;
  const std::string w = p.at("w");
  switch (row->kind) {
    case kAkPool: return dispatch<AkPoolA>(*row, w, p);
#if AKB_BOOST_POOL
    case kObjectPool: return dispatch<ObjectPoolA>(*row, w, p);
    case kBoostPool: return dispatch<BoostPoolA>(*row, w, p);
#else
    case kObjectPool:
    case kBoostPool: return 0;
#endif
    case kPmrUnsync: return dispatch<Unsync>(*row, w, p);
    case kPmrSync: return dispatch<Sync>(*row, w, p);
    case kNewDelete: return dispatch<NewDeleteA>(*row, w, p);
  }
  return 2;
}

akb::Params prepare(const akb::Options &opts) {
  akb::Params p;
  p["n"] = std::to_string(opts.n ? opts.n : (opts.quick ? kQuickN : kN));
  p["steps"] = std::to_string(opts.quick ? kQuickSteps : kSteps);
  p["ops"] = std::to_string(opts.quick ? kQuickOps : kOps);
  p["rounds"] = std::to_string(opts.rounds ? opts.rounds : (opts.quick ? kQuickRounds : kRounds));
  return p;
}

int child(const akb::Params &p) {
  if (p.count("sub")) return sub(p);
  const char *pre = std::getenv("LD_PRELOAD");
  if (pre && *pre) return 0;  // everything runs from the glibc child
  std::vector<std::string> args;
  for (const char *k : {"n", "steps", "ops", "rounds"}) args.push_back(std::string(k) + "=" + p.at(k));
  for (const char *w : kWorkloads)
    for (const Row &row : kRows) {
      const char *preload = row_preload(row);
      if (!preload || (std::string(w) == "threads2" && !row.threadsafe)) continue;
      if (akb::arenakit_only(p) && row.kind != kAkPool) continue;
      std::vector<std::string> a = args;
      a.push_back(std::string("row=") + row.key);
      a.push_back(std::string("w=") + w);
      akmw::SubResult r =
          akmw::run_sub({*preload ? row.key : "glibc", preload}, kName, a,
                        row.kind == kObjectPool && std::string(w) == "churn" ? kOrderedLimit : akmw::kLimitS);
      std::string k = std::string(row.key) + "." + w + ".";
      if (r.kind == akmw::SubResult::kOver) akb::emit(k + "over", 1);
      if (r.kind == akmw::SubResult::kCrash) return 1;
      if (r.kind != akmw::SubResult::kOk) continue;
      for (const auto &kv : r.kv)
        if (kv.first != "malloc_from" && kv.first != "allocator")
          akb::emit(k + kv.first, std::atof(kv.second.c_str()));
    }
  akb::emit("loadavg", akmw::load_average());
  return 0;
}

// ---- report ------------------------------------------------------------------------

struct Line {
  const char *key, *label;
};
const Line kTimeLines[] = {
    {"alloc_free.alloc_ns", "allocate-all: allocate + write 48 B"},
    {"alloc_free.free_ns", "free-all, in allocation order"},
    {"churn.step_ns", "random churn: free one, allocate + write one"},
    {"node.op_ns", "node benchmark (16 B): per operation"},
    {"threads2.pair_ns", "two threads: allocate + free pair"},
};
const Line kMemLines[] = {
    {"churn.peak_mib", "random churn: peak RSS (VmHWM) above the start"},
    {"churn.freed_mib", "after freeing every object"},
    {"churn.destroyed_mib", "after destroying the allocator"},
    {"churn.minflt_k", "minor page faults, thousands"},
};

template <class F, std::size_t N>
akb::Table grid(akb::Table t, bool headline, const Line (&lines)[N], F value) {
  std::vector<const Row *> cols;
  for (const Row &r : kRows)
    if (r.headline == headline || (!headline && r.kind == kAkPool)) cols.push_back(&r);
  for (const Row *r : cols) t.columns.push_back(r->label);
  for (const Line &l : lines) {
    t.rows.push_back(l.label);
    std::vector<double> cells;
    for (const Row *r : cols) cells.push_back(value(*r, l.key));
    t.cells.push_back(cells);
  }
  return t;
}

akb::Report report(const akb::RunData &d, const akb::Params &p) {
  akb::Report rep;
  auto val = [&](const Row &r, const std::string &k) -> double {
    if (r.kind == kNewDelete && k == "churn.destroyed_mib") return NAN;  // no allocator to destroy
    return akmw::median(d, r.key, k);
  };
  akb::Table t = grid(akb::make_table("time", "ns per operation (lower is faster)", "ns", "ns", 2), true,
                      kTimeLines, val);
  akb::Table x = grid(
      akb::make_table("vs_arenakit", "Time relative to ak_pool (rival / ak_pool; above 1: ak_pool is faster)",
                      "x ak_pool", "x", 2),
      true, kTimeLines, [&](const Row &r, const char *k) { return val(r, k) / val(kRows[0], k); });
  akb::Table m =
      grid(akb::make_table("memory", "Random churn: resident memory above the start, MiB", "MiB", "MiB", 1),
           true, kMemLines, val);
  akb::Table s =
      grid(akb::make_table("tab_sync_modes", "ak_pool's sync modes: ns per operation", "ns", "ns", 2), false,
           kTimeLines, val);
  std::string over;
  for (const Row &r : kRows)
    for (const char *w : kWorkloads)
      if (akmw::has(d, r.key, std::string(w) + ".over")) {
        double lim = r.kind == kObjectPool && std::string(w) == "churn" ? kOrderedLimit : akmw::kLimitS;
        over += std::string(over.empty() ? "" : ", ") + r.label + " " + w + " (killed at " +
                akb::fmt("%.0f", lim) + " s, unfinished)";
      }
  t.note =
      "n = " + p.at("n") + " objects of 48 B (allocate-all, churn: live objects; two threads: n / 2 each), " +
      p.at("steps") + " churn steps, " + p.at("ops") + " node operations; medians over " + p.at("rounds") +
      " rounds (churn: one), then over repetitions. n/a: not measured - boost::object_pool's free-all is its "
      "destructor (its free() keeps an address-ordered free list), single-thread allocators have no "
      "two-thread row, a rival that is not installed (Boost: libboost-dev; mimalloc: libmimalloc-dev)" +
      (over.empty() ? std::string(".") : "; past its time limit: " + over + ".") +
      " boost::pool<> hands out the slot freed last (its free list is a stack), which churn has just read. "
      "Two threads on a machine whose 2 cores are shared: above 2 threads would be oversubscribed.";
  x.note = "Ratios of the medians above.";
  for (const auto &a : d.allocators)
    if (d.has(a.label, "loadavg"))
      x.note += " 1-minute load average at the end of the children (median): " +
                akb::fmt("%.1f", d.median(a.label, "loadavg")) + " on " +
                akb::fmt("%.0f", static_cast<double>(sysconf(_SC_NPROCESSORS_ONLN))) +
                " CPUs; above the CPU count, other processes competed with the measurement.";
  m.note =
      "Above the process's RSS before the fill (the pointer and order arrays already resident); "
      "boost::object_pool is freed by its destructor; new/delete has no allocator to destroy.";
  rep.tables = {t, x, m, s};
  return rep;
}

}  // namespace

AKB_SCENARIO(pool_rivals, kName,
             "ak_pool against boost::object_pool, boost::pool<>, pmr pool resources and new/delete",
             {{"ak_pool*.*_ns", akb::Better::lower, "ns"}}, 3, 1);
