// SPDX-License-Identifier: MIT
// scenario_pool_random.cpp - pool-random: objects of one size with random
// lifetimes, the use the README gives the pool first. N live objects of 48
// bytes (N = 1,000 ... 1,000,000, and a "thin" N: a few objects short of
// a whole number of the default pool's slabs, below 100,000, so that its
// free slots are a handful spread over many slabs); each step frees a
// random one of them,
// allocates a new one in its place and writes all 48 bytes of it; 20 M
// steps (2 M with --quick). Each (row, N) runs in a process of its own, so
// that its peak resident memory (VmHWM) is its own:
//   malloc                  malloc/free under each column's malloc (arenakit's
//                           drop-in, glibc, jemalloc, tcmalloc, mimalloc)
//   ak_pool <MODE>          ak_pool_alloc/ak_pool_free, a zeroed options
//                           struct but for the sync mode (every mode)
//   boost::pool<>           boost::pool<>::malloc/free (Debian's Boost;
//                           n/a where it is not installed)
// The pool and Boost rows use no malloc for their objects; they run in the
// glibc child only. Time per step: wall time / steps (the free, the
// allocation and the write, and the random index).
#include <sys/mman.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "arenakit/arenakit.h"
#include "bench.h"
#include "bench_util.h"
#include "mw_common.h"

#if __has_include(<boost/pool/pool.hpp>)
#include <boost/pool/pool.hpp>
#define AKB_HAVE_BOOST_POOL 1
#else
#define AKB_HAVE_BOOST_POOL 0
#endif

namespace {

const char *const kName = "pool-random";
constexpr std::size_t kObject = 48;
constexpr std::uint64_t kSteps = 20000000, kQuickSteps = 2000000;
constexpr std::size_t kSizes[] = {1000, 10000, 100000, 1000000};
constexpr std::size_t kThinFree = 3;  // free slots of the thin N

// Slots per slab of a default pool of kObject-byte objects: allocations
// until a second slab is taken, less one.
std::size_t slab_slots() {
  ak_pool_options o{};
  o.object_size = kObject;
  o.sync = AK_SYNC_NONE;
  ak_pool *pool = ak_pool_create(&o);
  if (!pool) return 0;
  std::size_t n = 0;
  ak_pool_stats st{};
  do {
    if (!ak_pool_alloc(pool)) break;
    n++;
    st.version = AK_POOL_STATS_VERSION;
    ak_pool_stats_get(pool, &st);
  } while (st.slabs < 2 && n < 1000000);
  ak_pool_destroy(pool);
  return st.slabs == 2 ? n - 1 : 0;
}

// The live counts in increasing order: kSizes with the thin N ("thin" in
// the parameters; absent where the slabs could not be counted).
std::vector<std::size_t> sizes(const akb::Params &p) {
  std::vector<std::size_t> v(std::begin(kSizes), std::end(kSizes));
  std::size_t thin = static_cast<std::size_t>(akb::param_u64(p, "thin", 0));
  if (thin) v.insert(v.begin() + 2, thin);
  return v;
}

// The rows measured in the glibc child besides its malloc.
struct PoolRow {
  const char *key, *label;
  int sync;  // ak_sync, or -1: boost::pool<>
};
const PoolRow kPoolRows[] = {
    {"pool_threads", "ak_pool AK_SYNC_THREADS", AK_SYNC_THREADS},
    {"pool_none", "ak_pool AK_SYNC_NONE", AK_SYNC_NONE},
    {"pool_spinlock", "ak_pool AK_SYNC_SPINLOCK", AK_SYNC_SPINLOCK},
    {"pool_lockfree", "ak_pool AK_SYNC_LOCKFREE", AK_SYNC_LOCKFREE},
    {"boost_pool", "boost::pool<>", -1},
};

// The random index: the high 32 bits of a xorshift64 state scaled into
// [0, n) by a multiply and a shift (n < 2^32).
struct Rng {
  std::uint64_t s = 0x9E3779B97F4A7C15ull;
  std::size_t below(std::size_t n) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return static_cast<std::size_t>(((s >> 32) * n) >> 32);
  }
};

inline void fill(void *p, std::uint64_t v) {
  auto *w = static_cast<std::uint64_t *>(p);
  for (std::size_t i = 0; i < kObject / 8; i++) w[i] = v + i;
}

// The loop over an allocator given as two callables; returns a check value
// (the first word of every object freed) so nothing is optimised away.
template <class Alloc, class Free>
__attribute__((noinline)) std::uint64_t churn(std::size_t n, std::uint64_t steps, Alloc alloc, Free release) {
  std::vector<void *> live(n);
  for (std::size_t i = 0; i < n; i++) {
    live[i] = alloc();
    if (!live[i]) std::abort();
    fill(live[i], i);
  }
  Rng r;
  std::uint64_t sum = 0;
  for (std::uint64_t k = 0; k < steps; k++) {
    std::size_t i = r.below(n);
    sum += *static_cast<std::uint64_t *>(live[i]);
    release(live[i]);
    void *p = alloc();
    if (!p) std::abort();
    fill(p, k);
    live[i] = p;
  }
  for (void *p : live) release(p);
  akb::clobber();
  return sum;
}

// One (row, N) measurement in this process: emits ns per step, peak RSS and
// minor faults.
int sub(const akb::Params &p) {
  const std::string row = p.at("row");
  std::size_t n = static_cast<std::size_t>(akb::param_u64(p, "n", 1000));
  std::uint64_t steps = akb::param_u64(p, "steps", kQuickSteps);
  double f0 = akmw::minor_faults(), t0 = akb::now_s();
  std::uint64_t sum = 0;
  if (row == "malloc") {
    sum = churn(
        n, steps, [] { return std::malloc(kObject); }, [](void *q) { std::free(q); });
  } else if (row == "boost_pool") {
#if AKB_HAVE_BOOST_POOL
    boost::pool<> bp(kObject);
    sum = churn(
        n, steps, [&] { return bp.malloc(); }, [&](void *q) { bp.free(q); });
#else
    akb::emit("na", 1);
    return 0;
#endif
  } else {
    int sync = -2;
    for (const PoolRow &r : kPoolRows)
      if (row == r.key) sync = r.sync;
    if (sync < 0) return 2;
    ak_pool_options o{};
    o.object_size = kObject;
    o.sync = static_cast<ak_sync>(sync);
    ak_pool *pool = ak_pool_create(&o);
    if (!pool) {
      std::fprintf(stderr, "ak_bench: ak_pool_create: %s\n", ak_last_error());
      return 1;
    }
    sum = churn(
        n, steps, [&] { return ak_pool_alloc(pool); }, [&](void *q) { ak_pool_free(pool, q); });
    ak_pool_destroy(pool);
  }
  double t = akb::now_s() - t0;
  akb::emit("ns", t * 1e9 / static_cast<double>(steps));
  akb::emit("peak_rss", akmw::proc_status_bytes("VmHWM"));
  akb::emit("minflt", akmw::minor_faults() - f0);
  akb::emit("check", static_cast<double>(sum & 0xffff));
  return 0;
}

akb::Params prepare(const akb::Options &opts) {
  akb::Params p;
  p["steps"] = std::to_string(opts.n ? opts.n : (opts.quick ? kQuickSteps : kSteps));
  if (opts.quick) p["quick_sizes"] = "1"; /* up to 100,000 live objects */
  std::size_t per = slab_slots();
  if (per > kThinFree && per <= 100000) p["thin"] = std::to_string(100000 / per * per - kThinFree);
  return p;
}

// Runs (row, n) in `col`'s process and emits "<label>.<n>.<key>".
void measure(const akmw::Column &col, const std::string &row, const std::string &label, std::size_t n,
             const akb::Params &p) {
  akmw::SubResult r = akmw::run_sub(
      col, kName, {"row=" + row, "n=" + std::to_string(n), "steps=" + p.at("steps")}, akmw::kLimitS);
  std::string k = label + "." + std::to_string(n) + ".";
  if (r.kind == akmw::SubResult::kOver) {
    akb::emit(k + "over", 1);
  } else if (r.kind == akmw::SubResult::kCrash) {
    akb::emit(k + "crash", r.status);
  } else if (!r.kv.count("na")) {
    for (const char *key : {"ns", "peak_rss", "minflt"}) akb::emit(k + key, r.num(key));
  }
}

int child(const akb::Params &p) {
  if (p.count("sub")) return sub(p);
  akb::widen_affinity();
  bool host = !std::getenv("LD_PRELOAD") || !*std::getenv("LD_PRELOAD");
  for (std::size_t n : sizes(p)) {
    if (p.count("quick_sizes") && n > 100000) continue;
    for (const akmw::Column &col : akmw::child_columns(akb::arenakit_only(p)))
      if (col.label != "simple") measure(col, "malloc", col.label, n, p);  // simple: a first-fit list, hours
    if (host)
      for (const PoolRow &r : kPoolRows) measure({"glibc", ""}, r.key, r.key, n, p);
  }
  return 0;
}

// ---- report --------------------------------------------------------------------

akb::Report report(const akb::RunData &d, const akb::Params &p) {
  akb::Report rep;
  std::vector<std::string> cols;  // the mallocs that ran, then the pool rows
  for (const auto &c : akmw::column_order())
    if (c != "simple" && akmw::has(d, c, "1000.ns")) cols.push_back(c);
  std::vector<std::string> labels;
  for (const auto &c : cols) labels.push_back(c == "arenakit" ? "arenakit malloc" : c + " malloc");
  for (const PoolRow &r : kPoolRows)
    if (akmw::has(d, r.key, "1000.ns") || akmw::has(d, r.key, "1000.over")) {
      cols.push_back(r.key);
      labels.push_back(r.label);
    }
  auto grid = [&](const char *id, const std::string &title, const char *unit, int prec, const char *key,
                  double scale) {
    akb::Table t = akb::make_table(id, title, "live objects", unit, prec);
    t.columns = labels;
    for (std::size_t n : sizes(p)) {
      if (!akmw::has(d, cols[0], std::to_string(n) + ".ns")) continue;
      t.rows.push_back(std::to_string(n));
      std::vector<double> line;
      for (const auto &c : cols) line.push_back(akmw::median(d, c, std::to_string(n) + "." + key) / scale);
      t.cells.push_back(line);
    }
    return t;
  };
  akb::Table ns =
      grid("ns_per_step", "ns per step: free a random live object, allocate one, write it", "ns", 1, "ns", 1);
  ns.note = p.at("steps") +
            " steps of 48-byte objects per (row, live objects), each in a process of its own; medians. "
            "n/a: not installed (boost::pool<>), or past its time limit (" +
            akmw::fmt("%.0f", akmw::kLimitS) + " s)." +
            (p.count("thin") ? " " + p.at("thin") + ": " + std::to_string(kThinFree) +
                                   " objects short of a whole number of the default pool's slabs (its free "
                                   "slots few, over many slabs)."
                             : std::string());
  akb::Table rss =
      grid("peak_rss", "Peak resident memory of the process (VmHWM), MiB", "MiB", 1, "peak_rss", 1048576.0);
  rss.note = "Includes the benchmark program (about 4 MiB) and the array of N pointers.";
  akb::Table flt = grid("minflt", "Minor page faults, thousands", "k", 1, "minflt", 1000.0);
  rep.tables = {ns, rss, flt};
  for (std::size_t n : sizes(p)) {
    if (n > 100000 || !akmw::has(d, "mimalloc", std::to_string(n) + ".ns")) continue;
    std::string k = std::to_string(n) + ".";
    double mi = akmw::median(d, "mimalloc", k + "ns"), mi_rss = akmw::median(d, "mimalloc", k + "peak_rss");
    for (const char *row : {"pool_threads", "pool_none"}) {
      double v = akmw::median(d, row, k + "ns"), v_rss = akmw::median(d, row, k + "peak_rss");
      rep.checks.push_back(akb::speedup(
          std::string(row) + ", " + std::to_string(n) + " live: " + akmw::fmt("%.2f", v) +
              " ns against mimalloc's malloc " + akmw::fmt("%.2f", mi) + " ns (at most mimalloc's)",
          v, mi, 1.0));
      rep.checks.push_back(
          akb::at_most(std::string(row) + " peak RSS, " + std::to_string(n) +
                           " live: " + akmw::fmt("%.1f", v_rss / 1048576.0) + " MiB against mimalloc's " +
                           akmw::fmt("%.1f", mi_rss / 1048576.0) + " MiB (ratio, at most 1.0)",
                       v_rss / mi_rss, 1.0));
    }
  }
  return rep;
}

}  // namespace

AKB_SCENARIO(pool_random, kName,
             "objects of one size with random lifetimes: free a random one of N live 48-byte objects, "
             "allocate and write one, under each malloc, ak_pool in every sync mode and boost::pool<>",
             {{"pool_*.ns", akb::Better::lower, "ns"}});
