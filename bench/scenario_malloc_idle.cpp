/* SPDX-License-Identifier: MIT */
// scenario_malloc_idle.cpp - malloc-idle: how much resident memory a program
// keeps when it has freed a burst and then sits idle. A program that
// allocates a lot once (a parse, a load, a cache fill), frees it and then
// waits for work makes no allocator call for a while; whatever the
// allocator did not give back at the free, or from a thread of its own, it
// holds for as long as the program idles.
//
// Each case runs in a process of its own per allocator column (arenakit,
// glibc, simple, jemalloc, tcmalloc, mimalloc; mw_common.h), single-
// threaded, and reads its resident memory (VmRSS of /proc/self/status,
// read with open and read into a buffer on the stack: no allocator call) at
//   base   before the burst
//   peak   right after the burst is allocated and written
//   freed  right after the last free
//   idle   2.0 s after the last free, the process having made no allocator
//          call in between: it only sleeps (clock_nanosleep to an absolute
//          deadline), and emits its figures after the last reading
// with the time of the burst (allocate and write) and the minor page faults
// (getrusage) of the burst and the frees.
//   large  one 24 MiB block, written, then 3 million strings of 16-48
//          bytes (uniform), each written, their pointers kept in one array
//          allocated up front (a Python-like list of strings); then the
//          strings are freed in order, the array and the block
//   small  1 GiB of 64-byte blocks (16 M), each written, linked through
//          their first word, freed in allocation order
//   pool   an ak_pool with a zeroed options struct (AK_SYNC_THREADS, 64
//          KiB slabs) of 48-byte objects, created before `base`: 4 M
//          objects allocated, written, linked through their first word and
//          freed in allocation order. This is arenakit's pool (linked
//          statically into ak_bench) in every column, beside the column's
//          malloc: it runs in the arenakit and glibc columns only.
// Every block is checked before it is freed (a string's first byte, a
// block's index, the large block's first and last bytes).
// Checks: arenakit's idle RSS at most 1.10x glibc's (large, small); the
// pool (arenakit and glibc columns) gave its memory back: its idle RSS at
// most 1.10x (the same process's base + glibc's excess), glibc's excess
// being the growth from base to idle of what glibc's malloc holds from the
// system (mallinfo2: arena + hblkhd, read before base and after idle) in
// the glibc column's pool process, at least 0: what glibc's malloc kept
// for the pool's bookkeeping and the program, not the pool's slabs (which
// it maps itself). Not glibc's own excess in large or small: glibc keeps
// those blocks (its fast bins, freed chunks of up to 128 bytes, are not
// merged back, so its heap is not trimmed), which would let any pool pass.
// --quick runs every case at 15 % of its size.
#include <fcntl.h>
#include <malloc.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "arenakit/pool.h"
#include "bench.h"
#include "mw_common.h"

namespace {

using akmw::fmt;

const char *const kName = "malloc-idle";
const char *const kCases[] = {"large", "small", "pool"};
constexpr double kMiB = 1048576.0;
constexpr std::size_t kLargeBlock = 24 << 20;  // bytes
constexpr std::size_t kLargeStrings = 3000000;
constexpr std::size_t kSmallBytes = std::size_t{1} << 30;
constexpr std::size_t kSmallSize = 64;
constexpr std::size_t kPoolObjects = 4000000;
constexpr std::size_t kPoolSize = 48;
constexpr double kIdleS = 2.0;
constexpr double kMaxIdleVsGlibc = 1.10;

// ---- child side -------------------------------------------------------------------

// VmRSS in bytes, read with no allocator call (no stdio, no strings), so
// that the reading after the idle wait does not give the allocator a call
// to run its purges from. NaN if it cannot be read.
double rss_now() {
  char buf[8192];
  int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NAN;
  std::size_t n = 0;
  for (;;) {
    ssize_t got = read(fd, buf + n, sizeof buf - 1 - n);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    n += static_cast<std::size_t>(got);
    if (n == sizeof buf - 1) break;
  }
  close(fd);
  buf[n] = '\0';
  const char *v = std::strstr(buf, "VmRSS:");
  if (!v) return NAN;
  v += 6;
  while (*v == ' ' || *v == '\t') v++;
  double kib = 0;
  for (; *v >= '0' && *v <= '9'; v++) kib = kib * 10 + (*v - '0');
  return kib * 1024.0;
}

// Sleeps until `deadline` (now_s()'s clock, CLOCK_MONOTONIC): no allocator call.
void sleep_until(double deadline) {
  timespec ts;
  ts.tv_sec = static_cast<time_t>(deadline);
  ts.tv_nsec = static_cast<long>((deadline - std::floor(deadline)) * 1e9);
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

// Bytes that glibc's malloc holds from the system (mallinfo2: its heap and
// its own mappings), for the pool check's allowance; glibc's malloc only.
double glibc_heap_bytes() {
  struct mallinfo2 mi = mallinfo2();
  return static_cast<double>(mi.arena + mi.hblkhd);
}

// One case's readings, emitted after the last one.
struct Readings {
  double base = NAN, peak = NAN, freed = NAN, idle = NAN;
  double burst_s = NAN, free_s = NAN, minflt = NAN;
  std::uint64_t bad = 0;
};

// The frame around a case's burst and frees: `burst` allocates and
// writes, `release` checks and frees; readings on either side, then the idle wait.
template <class Burst, class Release>
Readings measure(Burst burst, Release release) {
  Readings r;
  r.base = rss_now();
  double f0 = akmw::minor_faults();
  double t0 = akb::now_s();
  burst();
  double t1 = akb::now_s();
  r.peak = rss_now();
  double t2 = akb::now_s();
  r.bad = release();
  double t3 = akb::now_s();
  r.minflt = akmw::minor_faults() - f0;
  r.freed = rss_now();
  sleep_until(t3 + kIdleS);
  r.idle = rss_now();
  r.burst_s = t1 - t0;
  r.free_s = t3 - t2;
  return r;
}

Readings large(double scale) {
  const auto block = static_cast<std::size_t>(static_cast<double>(kLargeBlock) * scale);
  const auto n = static_cast<std::size_t>(static_cast<double>(kLargeStrings) * scale);
  unsigned char *big = nullptr;
  char **strs = nullptr;
  auto letter = [](std::size_t i) { return static_cast<char>('a' + i % 26); };
  return measure(
      [&] {
        big = static_cast<unsigned char *>(std::malloc(block));
        strs = static_cast<char **>(std::malloc(n * sizeof(char *)));
        if (!big || !strs) std::abort();
        std::memset(big, 0x5a, block);
        akmw::Rng r(800);
        for (std::size_t i = 0; i < n; i++) {
          std::size_t len = r.range(16, 48);
          auto *s = static_cast<char *>(std::malloc(len));
          if (!s) std::abort();
          std::memset(s, letter(i), len - 1);
          s[len - 1] = '\0';
          strs[i] = s;
        }
      },
      [&] {
        std::uint64_t bad = 0;
        for (std::size_t i = 0; i < n; i++) {
          bad += strs[i][0] != letter(i);
          std::free(strs[i]);
        }
        std::free(strs);
        bad += big[0] != 0x5a || big[block - 1] != 0x5a;
        std::free(big);
        return bad;
      });
}

// A block of a linked burst: the next block, its index, the rest written.
struct Linked {
  Linked *next;
  std::uint64_t index;
};

// `n` blocks of `size` bytes from `alloc`, each written whole and linked
// to the next; freed in allocation order with `release`.
template <class Alloc, class Free>
Readings linked(std::size_t n, std::size_t size, Alloc alloc, Free release) {
  Linked *head = nullptr;
  return measure(
      [&] {
        Linked *tail = nullptr;
        for (std::size_t i = 0; i < n; i++) {
          auto *b = static_cast<Linked *>(alloc());
          if (!b) std::abort();
          std::memset(b, static_cast<int>(i), size);
          b->next = nullptr;
          b->index = i;
          (tail ? tail->next : head) = b;
          tail = b;
        }
      },
      [&] {
        std::uint64_t bad = 0, i = 0;
        for (Linked *b = head; b; i++) {
          Linked *next = b->next;
          bad += b->index != i;
          release(b);
          b = next;
        }
        return bad + (i != n);
      });
}

int sub(const akb::Params &p) {
  const std::string c = p.at("case");
  const double scale = std::atof(p.at("scale").c_str());
  Readings r;
  ak_pool *pool = nullptr;
  if (c == "large") {
    r = large(scale);
  } else if (c == "small") {
    r = linked(
        static_cast<std::size_t>(static_cast<double>(kSmallBytes / kSmallSize) * scale), kSmallSize,
        [] { return std::malloc(kSmallSize); }, [](void *b) { std::free(b); });
  } else if (c == "pool") {
    // glibc's heap (the glibc column only): what glibc's malloc holds
    // around the pool, read before `base` and after `idle`.
    const char *pre = std::getenv("LD_PRELOAD");
    const bool glibc = !pre || !*pre;
    double heap0 = glibc ? glibc_heap_bytes() : NAN;
    ak_pool_options o{};
    o.object_size = kPoolSize;
    pool = ak_pool_create(&o);
    if (!pool) {
      std::fprintf(stderr, "ak_bench: ak_pool_create: %s\n", ak_last_error());
      return 1;
    }
    r = linked(
        static_cast<std::size_t>(static_cast<double>(kPoolObjects) * scale), kPoolSize,
        [pool] { return ak_pool_alloc(pool); }, [pool](void *b) { ak_pool_free(pool, b); });
    if (glibc) {
      akb::emit("heap_base", heap0);
      akb::emit("heap_idle", glibc_heap_bytes());
    }
  } else {
    return 2;
  }
  akb::emit("base", r.base);
  akb::emit("peak", r.peak);
  akb::emit("freed", r.freed);
  akb::emit("idle", r.idle);
  akb::emit("time", r.burst_s);
  akb::emit("free_time", r.free_s);
  akb::emit("minflt", r.minflt);
  akb::emit("bad", static_cast<double>(r.bad));
  if (r.bad)
    std::fprintf(stderr, "ak_bench: malloc-idle %s: %llu blocks came back corrupted\n", c.c_str(),
                 static_cast<unsigned long long>(r.bad));
  ak_pool_destroy(pool);
  return 0;
}

// The pool case measures arenakit's pool, whatever the column's malloc: in
// the arenakit column (beside arenakit's malloc) and the glibc one (an
// application linking arenakit) only.
bool runs(const std::string &col, const std::string &c) {
  return c != "pool" || col == "arenakit" || col == "glibc";
}

akb::Params prepare(const akb::Options &opts) {
  akb::Params p;
  p["scale"] = opts.quick ? "0.15" : "1";
  p["idle_s"] = fmt("%.1f", kIdleS);
  // Each limit plus the idle time.
  p["simple_limit_s"] = fmt("%.0f", akmw::simple_limit_s(opts.quick) + kIdleS);
  p["limit_s"] = fmt("%.0f", akmw::kLimitS + kIdleS);
  return p;
}

int child(const akb::Params &p) {
  if (p.count("sub")) return sub(p);
  std::vector<akmw::Column> cols = akmw::child_columns(akb::arenakit_only(p));
  akmw::OverMemo memo(kName);
  for (const char *c : kCases) {
    for (const akmw::Column &col : cols) {
      if (!runs(col.label, c)) continue;
      std::string k = col.label + "." + c;
      if (memo.over(k)) {
        akb::emit(k + ".over", 1);
        continue;
      }
      double limit = std::atof(p.at(col.label == "simple" ? "simple_limit_s" : "limit_s").c_str());
      akmw::SubResult r =
          akmw::run_sub(col, kName, {std::string("case=") + c, "scale=" + p.at("scale")}, limit);
      if (r.kind == akmw::SubResult::kOver) {
        memo.add(k);
        akb::emit(k + ".over", 1);
      } else if (r.kind == akmw::SubResult::kCrash) {
        akb::emit(k + ".crash", r.status);
      } else {
        for (const char *key : {"base", "peak", "freed", "idle", "time", "free_time", "minflt", "bad",
                                "heap_base", "heap_idle"})
          if (r.kv.count(key)) akb::emit(k + "." + key, r.num(key));
      }
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
    for (const char *cs : kCases)
      for (const char *w : {".idle", ".over", ".crash"}) any = any || akmw::has(d, c, std::string(cs) + w);
    if (any) cols.push_back(c);
  }
  auto value = [&](const std::string &col, const std::string &c, const std::string &key) {
    return akmw::median(d, col, c + "." + key);
  };
  auto grid = [&](const std::string &id, const std::string &title, const std::string &unit, int precision,
                  auto cell) {
    akb::Table t = akb::make_table(id, title, "case", unit, precision);
    t.columns = cols;
    for (const char *c : kCases) {
      t.rows.push_back(c);
      std::vector<double> line;
      for (const auto &col : cols) line.push_back(cell(col, std::string(c)));
      t.cells.push_back(line);
    }
    return t;
  };
  auto mib = [&](const char *key) {
    return [&, key](const std::string &col, const std::string &c) { return value(col, c, key) / kMiB; };
  };
  const double scale = std::atof(p.at("scale").c_str());
  const std::string idle_s = p.at("idle_s");

  akb::Table idle =
      grid("idle", "RSS " + idle_s + " s after the last free, no allocator call, MiB", "MiB", 1, mib("idle"));
  idle.note =
      "VmRSS of a process of its own per case and column, the benchmark program included (about 4 MiB under "
      "glibc). large: one " +
      fmt("%.1f", static_cast<double>(kLargeBlock) * scale / kMiB) + " MiB block and " +
      fmt("%.0f", static_cast<double>(kLargeStrings) * scale) +
      " strings of 16-48 B, written, their pointers in one array allocated up front, then all freed; "
      "small: " +
      fmt("%.0f", static_cast<double>(kSmallBytes / kSmallSize) * scale) + " blocks of 64 B (" +
      fmt("%.0f", static_cast<double>(kSmallBytes) * scale / kMiB) +
      " MiB), written, freed in allocation order; pool: an ak_pool with a zeroed options struct "
      "(AK_SYNC_THREADS) of 48-byte objects, " +
      fmt("%.0f", static_cast<double>(kPoolObjects) * scale) + " allocated, written and freed. idle: read " +
      idle_s +
      " s after the last free, the process having only slept since: what the allocator gave back at the "
      "frees or from a thread of its own. The pool case is arenakit's pool in every column (ak_bench links "
      "arenakit statically), so it runs in the arenakit column (beside arenakit's malloc) and the glibc "
      "column (an application that links arenakit) only. n/a: not run, past its time limit or crashed. "
      "Medians.";
  rep.tables.push_back(idle);
  akb::Table freed = grid("freed", "RSS right after the last free, MiB", "MiB", 1, mib("freed"));
  rep.tables.push_back(freed);
  akb::Table peak = grid("peak", "RSS at the peak (burst allocated and written), MiB", "MiB", 1, mib("peak"));
  rep.tables.push_back(peak);
  akb::Table ratio = grid("idle_vs_glibc", "Idle RSS / glibc's idle RSS", "x", 2,
                          [&](const std::string &col, const std::string &c) {
                            return value(col, c, "idle") / value("glibc", c, "idle");
                          });
  ratio.note =
      "Each figure's median over glibc's. pool: both columns measure arenakit's pool (beside arenakit's "
      "malloc, beside glibc's); its check compares the idle RSS with the same process's base plus glibc's "
      "excess: the growth of glibc malloc's heap (mallinfo2: arena + hblkhd) from base to idle in the glibc "
      "column's pool process, at least 0 (what glibc's malloc kept for the pool's bookkeeping and the "
      "program; the pool maps its slabs itself). At most 1.10x that: the pool gave its memory back.";
  rep.tables.push_back(ratio);
  akb::Table base = grid("tab_base", "RSS before the burst (base), MiB", "MiB", 1, mib("base"));
  base.note = "pool: after ak_pool_create.";
  rep.tables.push_back(base);
  akb::Table time = grid("time", "Burst time (allocate and write), seconds", "s", 3,
                         [&](const std::string &col, const std::string &c) { return value(col, c, "time"); });
  rep.tables.push_back(time);
  akb::Table flt =
      grid("minflt", "Minor page faults of the burst and the frees, thousands", "k", 1,
           [&](const std::string &col, const std::string &c) { return value(col, c, "minflt") / 1000.0; });
  rep.tables.push_back(flt);

  std::vector<std::string> problems;
  for (const auto &col : cols)
    for (const char *c : kCases) {
      std::string w = c;
      if (!runs(col, w)) continue;
      if (akmw::has(d, col, w + ".crash")) problems.push_back("CRASH: " + col + " " + w);
      // simple, the naive baseline, may run past its limit (its free walks a list).
      if (col != "simple" && akmw::has(d, col, w + ".over"))
        problems.push_back("PAST ITS TIME LIMIT: " + col + " " + w);
      std::string h = akmw::host_of(d, col, w + ".bad");
      if (!h.empty() && d.max(h, col + "." + w + ".bad") > 0)
        problems.push_back("WRONG RESULT (corrupted blocks): " + col + " " + w);
    }
  std::string det;
  for (const auto &pr : problems) det += "- " + pr + "\n";
  if (!det.empty()) {
    std::printf("\n%s", det.c_str());
    rep.details_md = "## Failures\n\n" + det;
  }

  for (const char *c : {"large", "small"}) {
    double a = value("arenakit", c, "idle") / kMiB, g = value("glibc", c, "idle") / kMiB;
    rep.checks.push_back(akb::at_most(std::string("idle RSS, ") + c + ": arenakit " + fmt("%.1f", a) +
                                          " MiB = " + fmt("%.2f", a / g) + "x glibc's " + fmt("%.1f", g) +
                                          " MiB (at most 1.10x): 1.10 / that",
                                      a / g, kMaxIdleVsGlibc));
  }
  // The pool gave its memory back: its idle RSS against the same process's
  // base, with the allowance of what glibc's malloc kept meanwhile in the
  // glibc column's pool process (its heap's growth from base to idle).
  double excess =
      std::max(0.0, value("glibc", "pool", "heap_idle") - value("glibc", "pool", "heap_base")) / kMiB;
  for (const char *col : {"arenakit", "glibc"}) {
    double i = value(col, "pool", "idle") / kMiB, b = value(col, "pool", "base") / kMiB;
    rep.checks.push_back(akb::at_most(std::string("idle RSS, pool, ") + col + " column: " + fmt("%.1f", i) +
                                          " MiB = " + fmt("%.2f", i / (b + excess)) + "x (its base " +
                                          fmt("%.1f", b) + " MiB + glibc's excess " + fmt("%.2f", excess) +
                                          " MiB) (at most 1.10x): 1.10 / that",
                                      i / (b + excess), kMaxIdleVsGlibc));
  }
  rep.checks.push_back(akb::all_ok("cases with intact blocks, no crash, within their time limit (" +
                                       std::to_string(problems.size()) +
                                       " problems; simple may run past its limit): all",
                                   problems.empty()));
  return rep;
}

}  // namespace

// No metrics for the hardened-build cost: the scenario is about memory, which that cost leaves out.
AKB_SCENARIO(
    malloc_idle, kName,
    "idle programs: a burst allocated, written and freed, then 2 s without an allocator call "
    "(large: 24 MiB + 3 M small strings, small: 1 GiB of 64-byte blocks, pool: 4 M ak_pool objects); "
    "resident memory under each malloc",
    {});
