// SPDX-License-Identifier: MIT
// scenario_arena_rivals.cpp - arena-rivals: arenakit's region arena against
// what a C++ user would pick instead, on three workloads:
//   (a) the source benchmark's loop (docs/benchmarks.md, arena-bump): n
//       8-byte allocations in a fresh region, again after a reset, then the
//       region destroyed (ns per allocation for each step);
//   (b) the same three steps with sizes of 8 to 256 bytes (uniform, a
//       fixed-seed sequence that every row gets alike);
//   (c) a fresh region per round that writes every byte it gets (8 to 256
//       bytes): creation, allocation and write, and destruction timed as a
//       whole, with the resident memory it added (VmRSS) and its minor page
//       faults.
// The rows:
//   ak_arena                ak_arena_init(&a, NULL): default options
//   ak_arena + buffer       a caller buffer (ak_arena_options.buffer) that
//                           holds the whole round
//   pmr monotonic           std::pmr::monotonic_buffer_resource, upstream
//                           new_delete_resource (malloc)
//   pmr monotonic + buffer  the same with an initial buffer holding the round
//   mi_heap                 mimalloc's mi_heap_new/mi_heap_malloc/
//                           mi_heap_destroy (no reset: "reused" is n/a)
//   malloc glibc|mimalloc   malloc per allocation, free of each at "destroy"
//                           (reference; no reset)
// The reset is ak_arena_clear() for the arena and release() for pmr (which
// hands every chunk back upstream: the next pass allocates them again). pmr
// is called through a memory_resource pointer, as polymorphic_allocator does.
// The buffers are mmap()ed and written once before any timing, so the buffer
// rows start from memory that is already resident (that is what a buffer
// buys); in (c) they fault nothing.
//
// Everything but mimalloc runs in the runner's glibc child (no preload),
// rows interleaved within each round; mi_heap and "malloc mimalloc" run in a
// sub-process of that child with mimalloc's library preloaded
// (AKB_MIMALLOC_SO, found by CMake; mi_heap_* are looked up with dlsym). The
// runner's other children measure nothing here. Each child reports the
// median over its rounds; the runner, the median over its repetitions.
#include <dlfcn.h>
#include <sys/mman.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory_resource>
#include <optional>
#include <string>
#include <vector>

#include "arenakit/arena.h"
#include "bench.h"
#include "bench_util.h"
#include "mw_common.h"

#if defined(AKB_HAVE_MIMALLOC) && __has_include(<mimalloc.h>)
#include <mimalloc.h>
#define AKB_MI_HEAP 1
#else
#define AKB_MI_HEAP 0
#endif

namespace {

const char *const kName = "arena-rivals";
constexpr std::uint64_t kN8 = 4000000, kQuickN8 = 1000000;         // (a) allocations per pass
constexpr std::uint64_t kNMixed = 1000000, kQuickNMixed = 250000;  // (b), (c)
constexpr int kRounds = 7, kQuickRounds = 3;
constexpr std::size_t kMinSize = 8, kMaxSize = 256;
constexpr double kSubLimit = 300;  // seconds for the mimalloc sub-process

enum Kind { kArena, kArenaBuf, kMono, kMonoBuf, kMiHeap, kMallocGlibc, kMallocMi };
struct Row {
  const char *key, *label;
  Kind kind;
};
const Row kRows[] = {
    {"arena", "ak_arena", kArena},
    {"arena_buf", "ak_arena + buffer", kArenaBuf},
    {"mono", "pmr monotonic", kMono},
    {"mono_buf", "pmr monotonic + buffer", kMonoBuf},
    {"mi_heap", "mi_heap", kMiHeap},
    {"malloc", "malloc glibc", kMallocGlibc},
    {"malloc_mi", "malloc mimalloc", kMallocMi},
};

// ---- the regions: alloc(size), reset() (false: none), destruction ----------------

struct ArenaRegion {
  ak_arena a;
  bool ok;
  ArenaRegion(void *buf, std::size_t size) {
    ak_arena_options o{};
    o.buffer = buf;
    o.buffer_size = size;
    ok = ak_arena_init(&a, buf ? &o : nullptr) == 0;
    if (!ok) std::fprintf(stderr, "ak_bench: ak_arena_init: %s\n", ak_last_error());
  }
  ~ArenaRegion() {
    if (ok) ak_arena_destroy(&a);
  }
  void *alloc(std::size_t n) { return ak_arena_alloc(&a, n, 8); }
  bool reset() {
    ak_arena_clear(&a);
    return true;
  }
};

struct MonoRegion {
  std::optional<std::pmr::monotonic_buffer_resource> r;
  std::pmr::memory_resource *mr;
  bool ok = true;
  MonoRegion(void *buf, std::size_t size) {
    if (buf)
      r.emplace(buf, size);
    else
      r.emplace();
    mr = &*r;
    asm volatile("" : "+r"(mr));  // a pointer as a container holds it: calls stay virtual
  }
  void *alloc(std::size_t n) { return mr->allocate(n, 8); }
  bool reset() {
    r->release();
    return true;
  }
};

#if AKB_MI_HEAP
struct MiApi {
  decltype(&mi_heap_new) heap_new = nullptr;
  decltype(&mi_heap_malloc) heap_malloc = nullptr;
  decltype(&mi_heap_destroy) heap_destroy = nullptr;
  bool load() {
    heap_new = reinterpret_cast<decltype(heap_new)>(dlsym(RTLD_DEFAULT, "mi_heap_new"));
    heap_malloc = reinterpret_cast<decltype(heap_malloc)>(dlsym(RTLD_DEFAULT, "mi_heap_malloc"));
    heap_destroy = reinterpret_cast<decltype(heap_destroy)>(dlsym(RTLD_DEFAULT, "mi_heap_destroy"));
    return heap_new && heap_malloc && heap_destroy;
  }
} g_mi;

struct MiRegion {
  mi_heap_t *h;
  bool ok;
  MiRegion(void *, std::size_t) : h(g_mi.heap_new()), ok(h != nullptr) {}
  ~MiRegion() {
    if (h) g_mi.heap_destroy(h);
  }
  void *alloc(std::size_t n) { return g_mi.heap_malloc(h, n); }
  bool reset() { return false; }
};
#endif

// malloc: every pointer kept (in an mmap()ed array) to be freed at destruction.
struct MallocRegion {
  static void **slots;
  std::size_t count = 0;
  bool ok = true;
  MallocRegion(void *, std::size_t) {}
  ~MallocRegion() {
    for (std::size_t i = 0; i < count; i++) std::free(slots[i]);
  }
  void *alloc(std::size_t n) {
    void *p = std::malloc(n);
    slots[count++] = p;
    return p;
  }
  bool reset() { return false; }
};
void **MallocRegion::slots = nullptr;

void *map_filled(std::size_t bytes) {
  void *m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    std::perror("ak_bench: mmap");
    std::exit(2);
  }
  std::memset(m, 1, bytes);  // resident before any timing
  return m;
}

// ---- the loops -------------------------------------------------------------------

// n allocations of 8 bytes (sizes == nullptr: the constant, as in the source
// benchmark) or of sizes[i]; `write`: every byte written.
template <class R>
__attribute__((noinline)) bool fill(R &r, const std::uint16_t *sizes, std::uint64_t n, bool write) {
  for (std::uint64_t i = 0; i < n; i++) {
    std::size_t sz = sizes ? sizes[i] : 8;
    void *p = r.alloc(sz);
    if (!p) return false;
    if (write) std::memset(p, static_cast<int>(i), sz);
    akb::sink(p);
  }
  return true;
}

using Samples = std::map<std::string, std::vector<double>>;

// (a) or (b): fresh, reused (when the region has a reset), destroy; ns per allocation.
template <class R>
bool steps(const char *key, const char *c, void *buf, std::size_t bytes, const std::uint16_t *sizes,
           std::uint64_t n, Samples &out) {
  std::optional<R> r;
  double t0 = akb::now_s();
  r.emplace(buf, bytes);
  if (!r->ok || !fill(*r, sizes, n, false)) return false;
  double t1 = akb::now_s();
  double per = 1e9 / static_cast<double>(n);
  std::string k = std::string(key) + "." + c;
  out[k + "_fresh"].push_back((t1 - t0) * per);
  if (r->reset()) {
    if (!fill(*r, sizes, n, false)) return false;
    out[k + "_reused"].push_back((akb::now_s() - t1) * per);
  }
  double t2 = akb::now_s();
  r.reset();
  out[k + "_destroy"].push_back((akb::now_s() - t2) * per);
  return true;
}

// (c): a fresh region, every byte written, destroyed; ns per allocation,
// the RSS it added and its minor faults.
template <class R>
bool fresh_write(const char *key, void *buf, std::size_t bytes, const std::uint16_t *sizes, std::uint64_t n,
                 Samples &out) {
  double rss0 = akmw::proc_status_bytes("VmRSS"), f0 = akmw::minor_faults();
  double t0 = akb::now_s();
  std::optional<R> r;
  r.emplace(buf, bytes);
  if (!r->ok || !fill(*r, sizes, n, true)) return false;
  double rss1 = akmw::proc_status_bytes("VmRSS"), f1 = akmw::minor_faults();
  r.reset();
  double t1 = akb::now_s();
  std::string k = key;
  out[k + ".c_ns"].push_back((t1 - t0) * 1e9 / static_cast<double>(n));
  out[k + ".c_rss"].push_back(rss1 - rss0);
  out[k + ".c_minflt"].push_back(f1 - f0);
  return true;
}

struct Work {
  std::uint64_t n8, nm;
  const std::uint16_t *sizes;
  void *buf8, *bufm;
  std::size_t bytes8, bytesm;
};

template <class R>
bool one_round(const char *key, bool buffered, const Work &w, Samples &out) {
  return steps<R>(key, "a", buffered ? w.buf8 : nullptr, w.bytes8, nullptr, w.n8, out) &&
         steps<R>(key, "b", buffered ? w.bufm : nullptr, w.bytesm, w.sizes, w.nm, out) &&
         fresh_write<R>(key, buffered ? w.bufm : nullptr, w.bytesm, w.sizes, w.nm, out);
}

bool run_row(const Row &row, const Work &w, Samples &out) {
  switch (row.kind) {
    case kArena: return one_round<ArenaRegion>(row.key, false, w, out);
    case kArenaBuf: return one_round<ArenaRegion>(row.key, true, w, out);
    case kMono: return one_round<MonoRegion>(row.key, false, w, out);
    case kMonoBuf: return one_round<MonoRegion>(row.key, true, w, out);
#if AKB_MI_HEAP
    case kMiHeap: return one_round<MiRegion>(row.key, false, w, out);
#else
    case kMiHeap: return true;
#endif
    case kMallocGlibc:
    case kMallocMi: return one_round<MallocRegion>(row.key, false, w, out);
  }
  return false;
}

// The rows of this process (sub: mimalloc's; else the others), `rounds`
// times, interleaved; emits each key's median.
int measure(const akb::Params &p, bool sub) {
  Work w{};
  w.n8 = akb::param_u64(p, "n8", kQuickN8);
  w.nm = akb::param_u64(p, "nm", kQuickNMixed);
  int rounds = static_cast<int>(akb::param_u64(p, "rounds", kQuickRounds));
  auto *sizes = static_cast<std::uint16_t *>(map_filled(w.nm * sizeof(std::uint16_t)));
  akmw::Rng rng(35);
  std::size_t total = 0;
  for (std::uint64_t i = 0; i < w.nm; i++) {
    sizes[i] = static_cast<std::uint16_t>(rng.range(kMinSize, kMaxSize));
    total += (sizes[i] + 7u) & ~7u;
  }
  w.sizes = sizes;
  w.bytes8 = w.n8 * 8 + (64u << 10);  // the round, and room for the arena's chunk header
  w.bytesm = total + (64u << 10);
  if (!sub) {
    w.buf8 = map_filled(w.bytes8);
    w.bufm = map_filled(w.bytesm);
  }
  MallocRegion::slots = static_cast<void **>(map_filled((w.n8 > w.nm ? w.n8 : w.nm) * sizeof(void *)));
#if AKB_MI_HEAP
  if (sub && !g_mi.load()) {
    std::fprintf(stderr, "ak_bench: %s: mi_heap_* not found in this process\n", kName);
    return 1;
  }
#endif
  const bool ak_only = akb::arenakit_only(p);  // hardened-build cost: the arena rows only
  Samples out;
  for (int r = 0; r < rounds; r++)
    for (const Row &row : kRows) {
      bool mimalloc = row.kind == kMiHeap || row.kind == kMallocMi;
      bool mine = sub ? mimalloc : !mimalloc && (!ak_only || row.kind == kArena || row.kind == kArenaBuf);
      if (mine && !run_row(row, w, out)) {
        std::fprintf(stderr, "ak_bench: %s: %s failed\n", kName, row.label);
        return 1;
      }
    }
  for (const auto &kv : out) akb::emit(kv.first, akb::median_of(kv.second));
  akb::emit("total_mixed_bytes", static_cast<double>(total));
  if (!sub) akb::emit("loadavg", akmw::load_average());
  return 0;
}

akb::Params prepare(const akb::Options &opts) {
  akb::Params p;
  p["n8"] = std::to_string(opts.n ? opts.n : (opts.quick ? kQuickN8 : kN8));
  p["nm"] = std::to_string(opts.quick ? kQuickNMixed : kNMixed);
  p["rounds"] = std::to_string(opts.rounds ? opts.rounds : (opts.quick ? kQuickRounds : kRounds));
  return p;
}

int child(const akb::Params &p) {
  if (p.count("sub")) return measure(p, true);
  const char *pre = std::getenv("LD_PRELOAD");
  if (pre && *pre) return 0;  // everything is measured from the glibc child
  if (int rc = measure(p, false)) return rc;
#if AKB_MI_HEAP
  if (akb::arenakit_only(p)) return 0;
  akmw::SubResult r =
      akmw::run_sub({"mimalloc", AKB_MIMALLOC_SO}, kName,
                    {"n8=" + p.at("n8"), "nm=" + p.at("nm"), "rounds=" + p.at("rounds")}, kSubLimit);
  if (r.kind != akmw::SubResult::kOk) return 1;
  for (const auto &kv : r.kv)
    if (kv.first.rfind("mi_heap.", 0) == 0 || kv.first.rfind("malloc_mi.", 0) == 0)
      akb::emit(kv.first, std::atof(kv.second.c_str()));
#endif
  return 0;
}

// ---- report ------------------------------------------------------------------------

// The load average the glibc child saw at its end (median over the
// repetitions), for the reader to judge the noise of a shared machine.
std::string load_note(const akb::RunData &d) {
  for (const auto &a : d.allocators)
    if (d.has(a.label, "loadavg"))
      return " 1-minute load average at the end of the children (median): " +
             akb::fmt("%.1f", d.median(a.label, "loadavg")) + " on " +
             akb::fmt("%.0f", static_cast<double>(sysconf(_SC_NPROCESSORS_ONLN))) +
             " CPUs; above the CPU count, other processes competed with the measurement.";
  return "";
}

struct Line {
  const char *key, *label;
};
const Line kTimeLines[] = {
    {"a_fresh", "8 B: fresh region"},
    {"a_reused", "8 B: after reset (clear / release)"},
    {"b_fresh", "8-256 B: fresh region"},
    {"b_reused", "8-256 B: after reset"},
    {"c_ns", "8-256 B, fresh region, every byte written, destroyed"},
};
const Line kDestroyLines[] = {
    {"a_destroy", "8 B allocations"},
    {"b_destroy", "8-256 B allocations"},
};

// A table with a column per row of kRows and a line per entry of `lines`:
// value(row, line) each.
template <class F, std::size_t N>
akb::Table grid(akb::Table t, const Line (&lines)[N], F value) {
  for (const Row &r : kRows) t.columns.push_back(r.label);
  for (const Line &l : lines) {
    t.rows.push_back(l.label);
    std::vector<double> cells;
    for (const Row &r : kRows) cells.push_back(value(r, l.key));
    t.cells.push_back(cells);
  }
  return t;
}

akb::Report report(const akb::RunData &d, const akb::Params &p) {
  akb::Report rep;
  auto val = [&](const Row &r, const std::string &k) { return akmw::median(d, r.key, k); };
  akb::Table t =
      grid(akb::make_table("time", "ns per allocation (lower is faster)", "ns per allocation", "ns", 2),
           kTimeLines, val);
  akb::Table x =
      grid(akb::make_table("vs_arenakit",
                           "Time relative to ak_arena (rival / ak_arena; above 1: ak_arena is faster)",
                           "x ak_arena", "x", 2),
           kTimeLines, [&](const Row &r, const char *k) { return val(r, k) / val(kRows[0], k); });
  akb::Table de =
      grid(akb::make_table("destroy", "Destroying the region (malloc: free of each), microseconds",
                           "destroy (us)", "us", 1),
           kDestroyLines, [&](const Row &r, const char *k) {
             double n = static_cast<double>(akb::param_u64(p, k[0] == 'a' ? "n8" : "nm", 0));
             return val(r, k) * n / 1000.0;
           });
  const Line mem[] = {{"c_rss", "RSS added by a fresh region (at its last allocation), MiB"},
                      {"c_minflt", "minor page faults (thousands)"}};
  akb::Table m =
      grid(akb::make_table("fresh_memory", "Fresh region, every byte written: resident memory added, MiB",
                           "per round", "MiB", 1),
           mem, [&](const Row &r, const char *k) { return val(r, k) / (k[2] == 'r' ? 1048576.0 : 1000.0); });
  std::string n8 = p.count("n8") ? p.at("n8") : "?", nm = p.count("nm") ? p.at("nm") : "?";
  double mixed = NAN;
  for (const auto &a : d.allocators)
    if (d.has(a.label, "total_mixed_bytes")) mixed = d.median(a.label, "total_mixed_bytes");
  t.note =
      n8 + " allocations of 8 B, " + nm + " of 8-256 B (" + akb::fmt("%.0f", mixed / 1048576.0) +
      " MiB, every row the same sizes); creation is in \"fresh\", the reset in \"after reset\". Each round "
      "runs the 8 B steps, the 8-256 B steps and the written region in turn in one process, so a region may "
      "reuse memory the step before gave back (malloc and mi_heap keep freed pages for a while); medians "
      "over rounds, then over repetitions. n/a: no reset (mi_heap, malloc), or the rival is not installed "
      "(mimalloc: Debian libmimalloc-dev, found by CMake). Single-threaded, one CPU.";
  x.note = "Ratios of the medians above." + load_note(d);
  de.note = "The whole region: " + n8 + " or " + nm + " allocations.";
  m.note =
      "Medians over rounds: from the second round on, malloc and mi_heap reuse memory they kept, and the "
      "buffer rows write into a buffer made resident before timing; ak_arena and pmr monotonic (its "
      "upstream, glibc malloc, keeps part) take fresh pages from the kernel each round.";
  rep.tables = {t, x, de, m};
  return rep;
}

}  // namespace

AKB_SCENARIO(arena_rivals, kName,
             "ak_arena against pmr monotonic_buffer_resource, mimalloc's mi_heap and malloc",
             {{"arena.*_fresh", akb::Better::lower, "ns"},
              {"arena.*_reused", akb::Better::lower, "ns"},
              {"arena.*_destroy", akb::Better::lower, "ns"},
              {"arena.c_ns", akb::Better::lower, "ns"}},
             3, 1);
