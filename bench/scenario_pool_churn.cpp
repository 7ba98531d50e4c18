/* SPDX-License-Identifier: MIT */
// scenario_pool_churn.cpp - pool-churn, a burst that a pool must give back:
// "suddenly all the metrics need a new buffer": 2 million buffers
// allocated at once, then freed in random order, and the process's resident
// memory (RSS, /proc/self/statm) sampled on the way.
//
// One child per malloc. Each run: RSS before; allocate n (2,000,000)
// buffers of 128 bytes and write the first 16 bytes of each (a buffer in
// use); RSS at the peak; free them in a random order (a fixed-seed shuffle
// of the indices), sampling RSS after 25 %, 50 % and 75 % of the frees; RSS
// after the last free, and after 2 s of idling followed by one library call
// (ak_pool_stats_get; for malloc, no call), when the pool's reclaim policy
// has given its spare slabs back. The pointer and index arrays are mmap()ed and faulted
// in before the first sample (they are not taken from the allocator under
// test and sit in every sample alike).
//   arenakit  an ak_pool of 128-byte objects with default options
//             (AK_SYNC_THREADS, 64 KiB slabs, empty slabs kept as spares
//             under the reclaim policy); also its bytes_resident, and RSS
//             after ak_pool_destroy
//   malloc    malloc(128)/free under each preloaded malloc
// arenakit runs in the glibc child, before glibc's own run (so that glibc's
// retained heap is not in its "before").
//
// Then the repeated churn (rounds): `rn` (1,000,000) objects of 48 bytes
// allocated, written (48 bytes each) and freed in allocation order, `rr`
// (20) times, timed as a whole, with the minor page faults (getrusage) of
// the loop. In the glibc child: ak_pool in AK_SYNC_THREADS and AK_SYNC_NONE
// with default options (the headline), with spare_slabs large enough for
// every slab (the tuned column, named by its option) and with
// release_empty (ARAL's free-at-once policy, chosen explicitly); in every
// child: malloc(48)/free in the same loop. After the default pools' last
// round, with the program idle for 2 s: RSS against the baseline before
// the fill, once after one library call (ak_pool_stats_get; no background
// thread) and once with the background thread (ak_reclaim_thread_start)
// and no call at all.
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "arenakit/pool.h"
#include "arenakit/reclaim.h"
#include "bench.h"
#include "bench_util.h"

namespace {

using akb::fmt;
using akb::map_array;

constexpr std::uint64_t kN = 2000000;
constexpr std::uint64_t kQuickN = 500000;
constexpr std::size_t kSize = 128;
constexpr double kMaxAfterPercent = 110;  // arenakit after <= 110 % of before
// The repeated churn: objects, their size, rounds; its acceptance bounds.
constexpr std::uint64_t kRoundsN = 1000000, kQuickRoundsN = 200000;
constexpr int kRounds = 20, kQuickRounds = 5;
constexpr std::size_t kRoundsSize = 48;
constexpr double kMaxVsSpare = 1.1, kMaxVsGlibc = 0.8;
constexpr unsigned kIdleMs = 2000;

double rss_bytes() {
  long pages = 0, resident = 0;
  FILE *f = std::fopen("/proc/self/statm", "r");
  if (!f) return NAN;
  int n = std::fscanf(f, "%ld %ld", &pages, &resident);
  std::fclose(f);
  return n == 2 ? static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) : NAN;
}

struct Malloc {
  void *alloc() { return std::malloc(kSize); }
  void free(void *p) { std::free(p); }
  void stats(ak_pool_stats *) {}
};
struct Pool {
  ak_pool *p;
  void *alloc() { return ak_pool_alloc(p); }
  void free(void *o) { ak_pool_free(p, o); }
  void stats(ak_pool_stats *s) { ak_pool_stats_get(p, s); }
};

double minor_faults() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_minflt);
}

const char *const kPoints[] = {"before", "peak", "freed25", "freed50", "freed75", "after", "idle"};
constexpr std::size_t kNumPoints = sizeof kPoints / sizeof kPoints[0];

template <class A>
bool churn(A &a, const char *key, void **ptr, const std::uint32_t *order, std::uint64_t n) {
  double rss[kNumPoints], pool[kNumPoints];
  ak_pool_stats st{};
  auto sample = [&](std::size_t i) {
    rss[i] = rss_bytes();
    st.bytes_resident = 0;
    a.stats(&st);
    pool[i] = static_cast<double>(st.bytes_resident);
  };
  sample(0);
  double flt0 = minor_faults();
  double t0 = akb::now_s();
  for (std::uint64_t i = 0; i < n; i++) {
    void *p = a.alloc();
    if (!p) {
      std::fprintf(stderr, "ak_bench: %s: allocation %llu failed\n", key, static_cast<unsigned long long>(i));
      return false;
    }
    std::memcpy(p, &i, sizeof i);
    std::memcpy(static_cast<char *>(p) + 8, &n, sizeof n);
    ptr[i] = p;
  }
  double t1 = akb::now_s();
  sample(1);
  double tf = 0;
  std::size_t next = 2;
  for (int q = 1; q <= 4; q++) {
    std::uint64_t from = n * static_cast<std::uint64_t>(q - 1) / 4,
                  to = n * static_cast<std::uint64_t>(q) / 4;
    double f0 = akb::now_s();
    for (std::uint64_t i = from; i < to; i++) {
      void *p = ptr[order[i]];
      std::uint64_t v;
      std::memcpy(&v, p, sizeof v);
      if (v != order[i]) {
        std::fprintf(stderr, "ak_bench: %s: buffer %u was overwritten\n", key, order[i]);
        return false;
      }
      a.free(p);
    }
    tf += akb::now_s() - f0;
    sample(next++);
  }
  usleep(kIdleMs * 1000);  // idle; then one library call (the pool's policy runs), then RSS
  a.stats(&st);
  sample(next++);
  std::string k = key;
  for (std::size_t i = 0; i < kNumPoints; i++) {
    akb::emit("rss." + k + "." + kPoints[i], rss[i]);
    akb::emit("pool." + k + "." + kPoints[i], pool[i]);
  }
  akb::emit("alloc_ns." + k, (t1 - t0) * 1e9 / static_cast<double>(n));
  akb::emit("free_ns." + k, tf * 1e9 / static_cast<double>(n));
  akb::emit("minflt." + k, minor_faults() - flt0);
  return true;
}

// ---- the repeated churn ------------------------------------------------------------

struct Malloc48 {
  void *alloc() { return std::malloc(kRoundsSize); }
  void free(void *p) { std::free(p); }
};

// `rounds` times: allocate n objects, write each whole, free them all in
// allocation order. Emits rounds_ns.<key> (per allocate+free pair) and
// rounds_minflt.<key>.
template <class A>
bool churn_rounds(A &a, const std::string &key, void **ptr, std::uint64_t n, int rounds) {
  double f0 = minor_faults(), t0 = akb::now_s();
  for (int r = 0; r < rounds; r++) {
    for (std::uint64_t i = 0; i < n; i++) {
      void *p = a.alloc();
      if (!p) {
        std::fprintf(stderr, "ak_bench: %s: allocation failed\n", key.c_str());
        return false;
      }
      std::memset(p, static_cast<int>(i), kRoundsSize);
      ptr[i] = p;
    }
    for (std::uint64_t i = 0; i < n; i++) a.free(ptr[i]);
  }
  double t1 = akb::now_s(), f1 = minor_faults();
  akb::emit("rounds_ns." + key, (t1 - t0) * 1e9 / (static_cast<double>(n) * rounds));
  akb::emit("rounds_minflt." + key, f1 - f0);
  return true;
}

const struct RoundsMode {
  ak_sync sync;
  const char *name;
} kRoundsModes[] = {{AK_SYNC_THREADS, "threads"}, {AK_SYNC_NONE, "none"}};
const char *const kRoundsConfigs[] = {"default", "spare", "at_once"};

// The pools of the repeated churn (glibc child). The default pools are
// followed by the idle RSS measurement.
bool pool_rounds(void **ptr, std::uint64_t n, int rounds) {
  for (const RoundsMode &m : kRoundsModes) {
    for (const char *cfg : kRoundsConfigs) {
      ak_pool_options o{};
      o.object_size = kRoundsSize;
      o.sync = m.sync;
      std::string c = cfg;
      if (c == "spare") o.spare_slabs = static_cast<std::size_t>(n * kRoundsSize / 60000 + 16);
      if (c == "at_once") o.release_empty = true;
      double base = rss_bytes();
      ak_pool *p = ak_pool_create(&o);
      if (!p) {
        std::fprintf(stderr, "ak_bench: ak_pool_create: %s\n", ak_last_error());
        return false;
      }
      Pool pool{p};
      if (!churn_rounds(pool, std::string(m.name) + "." + c, ptr, n, rounds)) return false;
      if (c == "default") {
        // Idle: no call for 2 s, then one (stats); then again with the
        // background thread and no call.
        std::string k = std::string(m.name);
        akb::emit("idle.base." + k, base);
        akb::emit("idle.now." + k, rss_bytes());
        usleep(kIdleMs * 1000);
        ak_pool_stats st;
        ak_pool_stats_get(p, &st);
        akb::emit("idle.call." + k, rss_bytes());
        // One more round makes spares again (the call gave them back).
        if (!churn_rounds(pool, k + ".default_bg", ptr, n, 1)) return false;
        ak_reclaim_thread_start();
        usleep(kIdleMs * 1000);
        akb::emit("idle.bg." + k, rss_bytes());
        ak_reclaim_thread_stop();
      }
      ak_pool_destroy(p);
    }
  }
  return true;
}

akb::Params prepare(const akb::Options &opts) {
  akb::Params p;
  p["n"] = std::to_string(opts.n ? opts.n : (opts.quick ? kQuickN : kN));
  p["rn"] = std::to_string(opts.quick ? kQuickRoundsN : kRoundsN);
  p["rr"] = std::to_string(opts.rounds ? opts.rounds : (opts.quick ? kQuickRounds : kRounds));
  return p;
}

int child(const akb::Params &params) {
  std::uint64_t n = akb::param_u64(params, "n", kQuickN);
  void **ptr = map_array<void *>(n);
  std::uint32_t *order = map_array<std::uint32_t>(n);
  for (std::uint64_t i = 0; i < n; i++) order[i] = static_cast<std::uint32_t>(i);
  std::uint64_t x = 0x9e3779b97f4a7c15ull;  // xorshift64*, fixed seed: the same order in every child
  for (std::uint64_t i = n - 1; i > 0; i--) {
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    std::uint64_t j = (x * 0x2545f4914f6cdd1dull) % (i + 1);
    std::swap(order[i], order[j]);
  }
  const char *pre = std::getenv("LD_PRELOAD");
  if (!pre || !*pre) {
    ak_pool_options o{};
    o.object_size = kSize;
    ak_pool *p = ak_pool_create(&o);
    if (!p) {
      std::fprintf(stderr, "ak_bench: ak_pool_create: %s\n", ak_last_error());
      return 1;
    }
    Pool pool{p};
    if (!churn(pool, "ak", ptr, order, n)) return 1;
    ak_pool_destroy(p);
    akb::emit("rss.ak.destroyed", rss_bytes());
  }
  std::uint64_t rn = akb::param_u64(params, "rn", kQuickRoundsN);
  int rr = static_cast<int>(akb::param_u64(params, "rr", kQuickRounds));
  void **rptr = map_array<void *>(rn);
  if ((!pre || !*pre) && !pool_rounds(rptr, rn, rr)) return 1;
  if (akb::arenakit_only(params)) return 0;  // hardened-build cost: the pool only
  Malloc m;
  if (!churn(m, "malloc", ptr, order, n)) return 1;
  Malloc48 m48;
  if (!churn_rounds(m48, "malloc", rptr, rn, rr)) return 1;
  return 0;
}

// The repeated churn's tables and checks.
void rounds_report(const akb::RunData &d, const akb::Params &params, akb::Report &rep) {
  if (!d.has("glibc", "rounds_ns.threads.default")) return;
  std::string spare = std::to_string(akb::param_u64(params, "rn", 0) * kRoundsSize / 60000 + 16);
  akb::Table t =
      akb::make_table("rounds",
                      "Repeated churn: " + params.at("rn") + " objects of 48 B allocated, written, " +
                          "freed, " + params.at("rr") + " rounds: ns per allocate+free pair",
                      "configuration", "ns", 1);
  t.columns = {"ns per pair", "minor faults", "x spare_slabs pool", "x glibc malloc"};
  double glibc = d.median("glibc", "rounds_ns.malloc");
  for (const RoundsMode &m : kRoundsModes) {
    std::string mk = m.name;
    double sp = d.median("glibc", "rounds_ns." + mk + ".spare");
    const char *labels[] = {"default options", "spare_slabs=", "release_empty (free at once)"};
    for (int i = 0; i < 3; i++) {
      std::string key = mk + "." + kRoundsConfigs[i];
      double ns = d.median("glibc", "rounds_ns." + key);
      std::string label = std::string("ak_pool ") +
                          (m.sync == AK_SYNC_THREADS ? "AK_SYNC_THREADS" : "AK_SYNC_NONE") + ", " +
                          labels[i] + (i == 1 ? spare : "");
      t.rows.push_back(label);
      t.cells.push_back({ns, d.median("glibc", "rounds_minflt." + key), ns / sp, ns / glibc});
    }
  }
  for (const auto &a : d.allocators) {
    double ns = d.median(a.label, "rounds_ns.malloc");
    t.rows.push_back("malloc/free " + a.label);
    t.cells.push_back({ns, d.median(a.label, "rounds_minflt.malloc"), NAN, ns / glibc});
  }
  t.note = "Ratios of medians over repetitions; minor faults of the whole loop (getrusage).";
  akb::Table idle = akb::make_table("idle_rss",
                                    "Repeated churn, default options: RSS (MiB) after the last free, "
                                    "with the program idle for 2 s",
                                    "RSS (MiB)", "MiB", 1);
  idle.columns = {"before the fill", "at the last free", "2 s idle, then one call",
                  "2 s idle, background thread"};
  const double mib = 1.0 / 1048576;
  for (const RoundsMode &m : kRoundsModes) {
    std::string mk = m.name;
    idle.rows.push_back(m.sync == AK_SYNC_THREADS ? "AK_SYNC_THREADS" : "AK_SYNC_NONE");
    idle.cells.push_back(
        {d.median("glibc", "idle.base." + mk) * mib, d.median("glibc", "idle.now." + mk) * mib,
         d.median("glibc", "idle.call." + mk) * mib, d.median("glibc", "idle.bg." + mk) * mib});
    double vs_spare = d.median_ratio("glibc", "rounds_ns." + mk + ".default", "rounds_ns." + mk + ".spare");
    rep.checks.push_back(
        akb::at_most(std::string("repeated churn, ") + m.name +
                         ", default options: time vs the spare_slabs pool (at most 1.1x): 1.1 / that",
                     vs_spare, kMaxVsSpare));
    double vs_glibc = d.median("glibc", "rounds_ns." + mk + ".default") / glibc;
    rep.checks.push_back(
        akb::at_most(std::string("repeated churn, ") + m.name +
                         ", default options: time vs glibc malloc (at most 0.8x): 0.8 / that",
                     vs_glibc, kMaxVsGlibc));
    for (const char *when : {"call", "bg"}) {
      double pct = 100 * d.median("glibc", std::string("idle.") + when + "." + mk) /
                   d.median("glibc", "idle.base." + mk);
      rep.checks.push_back(
          akb::at_most(std::string("repeated churn, ") + m.name + ": RSS 2 s after the last free (" +
                           (when[0] == 'c' ? "then one call" : "background thread") +
                           ") = " + fmt("%.1f", pct) + "% of before the fill (at most 110%): 110% / that",
                       pct, kMaxAfterPercent));
    }
  }
  rep.tables.push_back(t);
  rep.tables.push_back(idle);
}

akb::Report report(const akb::RunData &d, const akb::Params &params) {
  akb::Report rep;
  struct Col {
    std::string label, alloc, key;
  };
  std::vector<Col> cols;
  bool ak = d.has("glibc", "rss.ak.before");
  if (ak) cols.push_back({"arenakit (ak_pool)", "glibc", "ak"});
  for (const auto &a : d.allocators) cols.push_back({"malloc " + a.label, a.label, "malloc"});
  const double mib = 1.0 / 1048576;
  const char *labels[] = {"before",
                          "peak (all allocated)",
                          "25% freed",
                          "50% freed",
                          "75% freed",
                          "after (all freed)",
                          "2 s idle, then one call (ak_pool_stats_get)"};
  akb::Table t =
      akb::make_table("rss",
                      "Churn: " + (params.count("n") ? params.at("n") : std::string("?")) +
                          " buffers of 128 bytes allocated at once, freed in random order: process RSS, MiB",
                      "RSS (MiB)", "MiB", 1);
  for (const Col &c : cols) t.columns.push_back(c.label);
  for (std::size_t i = 0; i < kNumPoints; i++) {
    t.rows.push_back(labels[i]);
    std::vector<double> line;
    for (const Col &c : cols) line.push_back(d.median(c.alloc, "rss." + c.key + "." + kPoints[i]) * mib);
    t.cells.push_back(line);
  }
  t.note = "The pointer and index arrays (mmap, " +
           fmt("%.1f", static_cast<double>(akb::param_u64(params, "n", 0)) * 12 * mib) +
           " MiB) are in every figure. Median over repetitions.";
  akb::Table tm = t;
  tm.id = "time";
  tm.title =
      "Churn: ns per allocation (including a 16-byte write) and per free (random order); minor page faults";
  tm.corner = "ns";
  tm.unit = "ns";
  tm.precision = 1;
  tm.rows = {"allocate + write", "free (random order)", "minor faults (fill, frees, 2 s idle and call)"};
  tm.cells.clear();
  for (const char *k : {"alloc_ns", "free_ns", "minflt"}) {
    std::vector<double> line;
    for (const Col &c : cols) line.push_back(d.median(c.alloc, std::string(k) + "." + c.key));
    tm.cells.push_back(line);
  }
  rep.tables = {t, tm};
  if (ak) {
    akb::Table pr = akb::make_table(
        "pool_resident",
        "arenakit: the pool's bytes_resident (ak_pool_stats), MiB, and RSS after ak_pool_destroy", "sample",
        "MiB", 2);
    pr.columns = {"pool bytes_resident", "process RSS"};
    for (std::size_t i = 0; i < kNumPoints; i++) {
      pr.rows.push_back(labels[i]);
      pr.cells.push_back({d.median("glibc", std::string("pool.ak.") + kPoints[i]) * mib,
                          d.median("glibc", std::string("rss.ak.") + kPoints[i]) * mib});
    }
    pr.rows.push_back("after ak_pool_destroy");
    pr.cells.push_back({NAN, d.median("glibc", "rss.ak.destroyed") * mib});
    rep.tables.push_back(pr);
    double before = d.median("glibc", "rss.ak.before"), after = d.median("glibc", "rss.ak.idle");
    double pct = 100 * after / before;
    rep.checks.push_back(akb::at_most(
        "arenakit RSS 2 s after freeing everything, then one call = " + fmt("%.1f", after * mib) + " MiB, " +
            fmt("%.1f", pct) + "% of the " + fmt("%.1f", before * mib) +
            " MiB before the fill (at most 110%): 110% / that",
        pct, kMaxAfterPercent));
  }
  rounds_report(d, params, rep);
  return rep;
}

}  // namespace

AKB_SCENARIO(pool_churn, "pool-churn",
             "churn: 2 million 128-byte buffers allocated at once, freed in random order, "
             "process RSS before, at the peak, during the frees and after, arenakit against malloc",
             {{"alloc_ns.ak", akb::Better::lower, "ns"},
              {"free_ns.ak", akb::Better::lower, "ns"},
              {"rounds_ns.threads.default", akb::Better::lower, "ns"},
              {"rounds_ns.none.default", akb::Better::lower, "ns"}});
