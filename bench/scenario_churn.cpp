/* SPDX-License-Identifier: MIT */
// scenario_churn.cpp - the churn behind ARAL's motivation (seed 004):
// "suddenly all the metrics need a new buffer": 2 million buffers
// allocated at once, then freed in random order, and the process's resident
// memory (RSS, /proc/self/statm) sampled on the way.
//
// One child per malloc. Each run: RSS before; allocate n (2,000,000)
// buffers of 128 bytes and write the first 16 bytes of each (a buffer in
// use); RSS at the peak; free them in a random order (a fixed-seed shuffle
// of the indices), sampling RSS after 25 %, 50 % and 75 % of the frees; RSS
// after the last free. The pointer and index arrays are mmap()ed and faulted
// in before the first sample (they are not taken from the allocator under
// test and sit in every sample alike).
//   arenakit  an ak_pool of 128-byte objects with default options
//             (AK_SYNC_THREADS, 64 KiB slabs, no spare slabs: an empty slab
//             goes back to the OS at once); also its bytes_resident, and RSS
//             after ak_pool_destroy
//   malloc    malloc(128)/free under each preloaded malloc
// arenakit runs in the glibc child, before glibc's own run (so that glibc's
// retained heap is not in its "before").
#include <sys/mman.h>
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
#include "bench.h"
#include "bench_util.h"

namespace {

using akb::fmt;

constexpr std::uint64_t kN = 2000000;
constexpr std::uint64_t kQuickN = 500000;
constexpr std::size_t kSize = 128;
constexpr double kMaxAfterPercent = 110;  // arenakit after <= 110 % of before

double rss_bytes() {
  long pages = 0, resident = 0;
  FILE *f = std::fopen("/proc/self/statm", "r");
  if (!f) return NAN;
  int n = std::fscanf(f, "%ld %ld", &pages, &resident);
  std::fclose(f);
  return n == 2 ? static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) : NAN;
}

template <class T>
T *map_array(std::uint64_t n) {
  std::size_t bytes = static_cast<std::size_t>(n) * sizeof(T);
  void *m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    std::perror("ak_bench: mmap");
    std::exit(2);
  }
  std::memset(m, 0, bytes);
  return static_cast<T *>(m);
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

const char *const kPoints[] = {"before", "peak", "freed25", "freed50", "freed75", "after"};
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
  std::string k = key;
  for (std::size_t i = 0; i < kNumPoints; i++) {
    akb::emit("rss." + k + "." + kPoints[i], rss[i]);
    akb::emit("pool." + k + "." + kPoints[i], pool[i]);
  }
  akb::emit("alloc_ns." + k, (t1 - t0) * 1e9 / static_cast<double>(n));
  akb::emit("free_ns." + k, tf * 1e9 / static_cast<double>(n));
  return true;
}

akb::Params prepare(const akb::Options &opts) {
  akb::Params p;
  p["n"] = std::to_string(opts.n ? opts.n : (opts.quick ? kQuickN : kN));
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
  if (akb::arenakit_only(params)) return 0;  // hardened-build cost: the pool only
  Malloc m;
  if (!churn(m, "malloc", ptr, order, n)) return 1;
  return 0;
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
  const char *labels[] = {"before",    "peak (all allocated)", "25% freed", "50% freed",
                          "75% freed", "after (all freed)"};
  akb::Table t;
  t.id = "rss";
  t.title = "Churn: " + (params.count("n") ? params.at("n") : std::string("?")) +
            " buffers of 128 bytes allocated at once, freed in random order: process RSS, MiB";
  t.corner = "RSS (MiB)";
  t.unit = "MiB";
  t.precision = 1;
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
  tm.title = "Churn: ns per allocation (including a 16-byte write) and per free (random order)";
  tm.corner = "ns";
  tm.unit = "ns";
  tm.precision = 1;
  tm.rows = {"allocate + write", "free (random order)"};
  tm.cells.clear();
  for (const char *k : {"alloc_ns", "free_ns"}) {
    std::vector<double> line;
    for (const Col &c : cols) line.push_back(d.median(c.alloc, std::string(k) + "." + c.key));
    tm.cells.push_back(line);
  }
  rep.tables = {t, tm};
  if (ak) {
    akb::Table pr;
    pr.id = "pool_resident";
    pr.title = "arenakit: the pool's bytes_resident (ak_pool_stats), MiB, and RSS after ak_pool_destroy";
    pr.corner = "sample";
    pr.unit = "MiB";
    pr.precision = 2;
    pr.columns = {"pool bytes_resident", "process RSS"};
    for (std::size_t i = 0; i < kNumPoints; i++) {
      pr.rows.push_back(labels[i]);
      pr.cells.push_back({d.median("glibc", std::string("pool.ak.") + kPoints[i]) * mib,
                          d.median("glibc", std::string("rss.ak.") + kPoints[i]) * mib});
    }
    pr.rows.push_back("after ak_pool_destroy");
    pr.cells.push_back({NAN, d.median("glibc", "rss.ak.destroyed") * mib});
    rep.tables.push_back(pr);
    double before = d.median("glibc", "rss.ak.before"), after = d.median("glibc", "rss.ak.after");
    double pct = 100 * after / before;
    rep.checks.push_back({"arenakit RSS after freeing everything = " + fmt("%.1f", after * mib) + " MiB, " +
                              fmt("%.1f", pct) + "% of the " + fmt("%.1f", before * mib) +
                              " MiB before the fill (at most 110%): 110% / that",
                          kMaxAfterPercent / pct, 1, "x"});
  }
  return rep;
}

}  // namespace

extern const akb::Scenario akb_scenario_churn;
const akb::Scenario akb_scenario_churn = {
    "pool-churn",
    "churn after ARAL's motivation: 2 million 128-byte buffers allocated at once, freed in random order, "
    "process RSS before, at the peak, during the frees and after, arenakit against malloc",
    prepare,
    child,
    report,
    3,
    1,
    {
        {"alloc_ns.ak", akb::Better::lower, "ns"},
        {"free_ns.ak", akb::Better::lower, "ns"},
    },
};
