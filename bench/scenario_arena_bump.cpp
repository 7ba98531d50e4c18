/* SPDX-License-Identifier: MIT */
// scenario_arena_bump.cpp - arena-bump: 8-byte region-arena (bump)
// allocation against malloc(8), the method of the source benchmark
// (docs/benchmarks.md, "Scenarios").
//
// Each child runs `arena_rounds` rounds (20, as the source benchmark) of, in this order
// (steps 4-6 only in the first rounds, see below):
//   1. n x ak_arena_alloc(&a, 8, 8) in a fresh arena          (arena_alloc)
//   2. ak_arena_clear, then n x ak_arena_alloc again           (reused arena)
//   3. ak_arena_destroy of the arena holding n allocations     (arena_free)
//   4. the same three steps writing 8 bytes into every allocation (the
//      "touching" variant: it pays the page faults the first pass avoids;
//      only in the first `write_rounds` (2) rounds, as it is slow in VMs)
//   5. n x malloc(8), storing the pointers in a pre-faulted array that was
//      mmap()ed before the timing (not taken from the malloc under test)
//   6. free() of those n pointers, in allocation order
//      (steps 5-6 in the first `rounds` (3) rounds only: each takes about a
//      second, while steps 1-3 take some 0.1 s together and destroy, a few
//      milliseconds of munmap, is the noisiest figure and needs the rounds)
// and emits the best (shortest) round of each step and the worst. The
// allocations of steps 1-3 are not written to (as in the source benchmark): each pointer
// is sunk through an empty asm statement so that no call can be deleted.
// n is calibrated once, in the parent with glibc, so that n malloc(8) calls
// (warm heap, as in a best round) take more than 0.5 s; every allocator's
// child uses that same n, so all columns measure the same work.
#include <sys/mman.h>

#include <malloc.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "arenakit/arena.h"
#include "bench.h"
#include "bench_util.h"

namespace {

using akb::fmt;

constexpr double kCalibrateTarget = 0.5;          // seconds n malloc(8) must exceed
constexpr double kCalibrateAim = 0.65;            // what the calibration aims at
constexpr std::uint64_t kCalibrateN0 = 8u << 20;  // calibration sample
constexpr std::uint64_t kQuickN = 2000000;        // --quick: fixed n
constexpr int kRounds = 3;                        // rounds with malloc/free
constexpr int kArenaRounds = 20;                  // rounds of the (cheap) arena steps
constexpr int kQuickRounds = 3;
// The touching variant pays a page fault per 4 KiB in the fresh arena
// (slow in VMs): it runs in the first kWriteRounds rounds only, with
// n / kWriteDivisor allocations (its figures are per allocation).
constexpr int kWriteRounds = 2;
constexpr std::uint64_t kWriteDivisor = 4;

// Acceptance criteria of the issue (bounds, not results).
constexpr double kMinFreshPerUs = 1000;
constexpr double kMinFreshVsGlibc = 5;
constexpr double kMinReusedPerUs = 1500;
constexpr double kMinReusedVsGlibc = 8;
constexpr double kMinDestroyVsGlibcFree = 100;

// An array of n pointers from mmap (not from the malloc being measured),
// faulted in before any timing.
struct PtrArray {
  void **p = nullptr;
  std::size_t bytes = 0;
  explicit PtrArray(std::uint64_t n) : bytes(static_cast<std::size_t>(n) * sizeof(void *)) {
    void *m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
      std::perror("ak_bench: mmap of the pointer array");
      std::exit(2);
    }
    std::memset(m, 0, bytes);
    p = static_cast<void **>(m);
  }
  ~PtrArray() { munmap(p, bytes); }
  PtrArray(const PtrArray &) = delete;
  PtrArray &operator=(const PtrArray &) = delete;
};

// Time of n malloc(8) calls with a warm heap, as in the children's best
// rounds: the best of three passes after an untimed one that takes the page
// faults. The pointers go to an mmap()ed array.
double glibc_malloc_time(std::uint64_t n) {
  PtrArray arr(n);
  double best = INFINITY;
  for (int pass = 0; pass < 4; pass++) {
    double t0 = akb::now_s();
    for (std::uint64_t i = 0; i < n; i++) {
      void *q = std::malloc(8);
      akb::sink(q);
      arr.p[i] = q;
    }
    if (pass > 0) best = std::fmin(best, akb::now_s() - t0);
    for (std::uint64_t i = 0; i < n; i++) std::free(arr.p[i]);
  }
  return best;
}

akb::Params prepare(const akb::Options &opts) {
  akb::Params p;
  int rounds = opts.rounds > 0 ? opts.rounds : (opts.quick ? kQuickRounds : kRounds);
  std::uint64_t n = opts.n;
  if (n == 0 && opts.quick) n = kQuickN;
  if (n == 0) {
    // Calibrate with the parent's malloc (glibc: the parent is not
    // preloaded). Warm malloc(8) runs at a steady rate, so n is
    // extrapolated from a warm run of kCalibrateN0 calls to take
    // kCalibrateAim seconds (faulting in a heap of the final size here would
    // cost as much as a whole child); the glibc child's best malloc round
    // then shows whether n calls took more than 0.5 s (the report says so if
    // not).
    n = kCalibrateN0;
    double t = glibc_malloc_time(n);
    if (t <= kCalibrateTarget) {
      n = static_cast<std::uint64_t>(static_cast<double>(n) * kCalibrateAim / std::fmax(t, 1e-6));
      n = (n + 0xfffff) & ~static_cast<std::uint64_t>(0xfffff);  // whole Mi of allocations
    }
    malloc_trim(0);  // give the calibration's heap back
    std::fprintf(stderr,
                 "arena-bump: calibrated n = %llu (%llu warm glibc malloc(8) calls took %.3f s here; "
                 "aiming at %.2f s)\n",
                 static_cast<unsigned long long>(n), static_cast<unsigned long long>(kCalibrateN0), t,
                 kCalibrateAim);
    p["calibration_s"] = std::to_string(t);
  }
  p["n"] = std::to_string(n);
  p["rounds"] = std::to_string(rounds);
  p["arena_rounds"] = std::to_string(std::max(rounds, opts.quick ? kQuickRounds : kArenaRounds));
  p["write_rounds"] = std::to_string(std::min(rounds, kWriteRounds));
  p["write_n"] = std::to_string(std::max<std::uint64_t>(1, n / kWriteDivisor));
  return p;
}

// ---- the child's measurements --------------------------------------------

struct Span {
  double best = INFINITY, worst = 0;
  void add(double t) {
    best = std::fmin(best, t);
    worst = std::fmax(worst, t);
  }
  void emit(const char *key) const {
    if (std::isinf(best)) return;  // never measured (e.g. write_rounds=0)
    akb::emit(std::string("best.") + key, best);
    akb::emit(std::string("worst.") + key, worst);
  }
};

// The loops live in functions of their own so that each is compiled the
// same way whichever step calls it. noinline keeps them out of each other.
__attribute__((noinline)) void arena_allocs(ak_arena *a, std::uint64_t n) {
  for (std::uint64_t i = 0; i < n; i++) {
    void *q = ak_arena_alloc(a, 8, 8);
    akb::sink(q);
  }
}

__attribute__((noinline)) void arena_allocs_write(ak_arena *a, std::uint64_t n) {
  for (std::uint64_t i = 0; i < n; i++) {
    void *q = ak_arena_alloc(a, 8, 8);
    std::memcpy(q, &i, 8);
    akb::sink(q);
  }
}

__attribute__((noinline)) void malloc_n(void **arr, std::uint64_t n) {
  for (std::uint64_t i = 0; i < n; i++) {
    void *q = std::malloc(8);
    akb::sink(q);
    arr[i] = q;
  }
}

__attribute__((noinline)) void free_n(void **arr, std::uint64_t n) {
  for (std::uint64_t i = 0; i < n; i++) std::free(arr[i]);
}

bool check_arena(const ak_arena *a, std::uint64_t n, const char *what) {
  ak_arena_stats st;
  ak_arena_stats_get(a, &st);
  if (st.requested != n * 8) {
    std::fprintf(stderr, "ak_bench: %s: arena holds %zu bytes, expected %llu (%s)\n", what, st.requested,
                 static_cast<unsigned long long>(n * 8), ak_last_error());
    return false;
  }
  return true;
}

// One pass of steps 1-3 (write = false) or step 4 (write = true).
bool arena_pass(std::uint64_t n, bool write, Span &fresh, Span &reused, Span &destroy, Span &clear) {
  ak_arena a;
  if (ak_arena_init(&a, nullptr) != 0) return false;
  double t0 = akb::now_s();
  write ? arena_allocs_write(&a, n) : arena_allocs(&a, n);
  double t1 = akb::now_s();
  if (!check_arena(&a, n, "fresh arena")) return false;
  double t2 = akb::now_s();
  ak_arena_clear(&a);
  double t3 = akb::now_s();
  write ? arena_allocs_write(&a, n) : arena_allocs(&a, n);
  double t4 = akb::now_s();
  if (!check_arena(&a, n, "reused arena")) return false;
  double t5 = akb::now_s();
  ak_arena_destroy(&a);
  double t6 = akb::now_s();
  fresh.add(t1 - t0);
  clear.add(t3 - t2);
  reused.add(t4 - t3);
  destroy.add(t6 - t5);
  return true;
}

int child(const akb::Params &params) {
  std::uint64_t n = akb::param_u64(params, "n", kQuickN);
  int rounds = static_cast<int>(akb::param_u64(params, "rounds", kRounds));
  int write_rounds = static_cast<int>(akb::param_u64(params, "write_rounds", kWriteRounds));
  int arena_rounds = std::max(rounds, static_cast<int>(akb::param_u64(params, "arena_rounds", kArenaRounds)));
  std::uint64_t write_n = akb::param_u64(params, "write_n", n);
  // Hardened-build cost: only the arena steps (1-4) are wanted.
  const bool ak_only = akb::arenakit_only(params);
  if (ak_only) rounds = 0;
  PtrArray arr(ak_only ? 1 : n);
  Span fresh, reused, destroy, clear, wfresh, wreused, wdestroy, wclear, mal, fre;
  for (int r = 0; r < arena_rounds; r++) {
    if (!arena_pass(n, false, fresh, reused, destroy, clear)) return 1;
    if (r < write_rounds && !arena_pass(write_n, true, wfresh, wreused, wdestroy, wclear)) return 1;
    if (r >= rounds) continue;
    double t0 = akb::now_s();
    malloc_n(arr.p, n);
    double t1 = akb::now_s();
    for (std::uint64_t i = 0; i < n; i++) {
      if (!arr.p[i]) {
        std::fprintf(stderr, "ak_bench: malloc(8) returned NULL\n");
        return 1;
      }
    }
    double t2 = akb::now_s();
    free_n(arr.p, n);
    double t3 = akb::now_s();
    mal.add(t1 - t0);
    fre.add(t3 - t2);
  }
  akb::emit("n", static_cast<double>(n));
  akb::emit("rounds", rounds);
  akb::emit("arena_rounds", arena_rounds);
  akb::emit("write_n", static_cast<double>(write_n));
  fresh.emit("arena_alloc");
  reused.emit("arena_alloc_reused");
  destroy.emit("arena_free");
  clear.emit("arena_clear");
  wfresh.emit("arena_alloc_write");
  wreused.emit("arena_alloc_write_reused");
  wdestroy.emit("arena_free_written");
  wclear.emit("arena_clear_written");
  mal.emit("malloc");
  fre.emit("free");
  return 0;
}

// ---- the report -------------------------------------------------------------

double per_us(double n, double seconds) { return n / (seconds * 1e6); }

akb::Report report(const akb::RunData &d, const akb::Params &params) {
  akb::Report rep;
  const double nan = NAN;
  std::vector<std::string> cols;
  for (const auto &a : d.allocators) cols.push_back(a.label);

  // Throughputs from the median (over repetitions) of each child's best
  // round; every ratio below is computed from these same medians.
  auto tput = [&](const std::string &al, const std::string &key) {
    if (!d.has(al, "best." + key)) return nan;
    // the touching variant runs write_n allocations per step
    const char *count = key.find("write") != std::string::npos ? "write_n" : "n";
    return per_us(d.median(al, count), d.median(al, "best." + key));
  };

  akb::Table sp;
  sp.id = "speedup";
  sp.title = "Speedup in throughput of the arena over each malloc (Q_arena / Q_malloc, 8-byte allocations)";
  sp.corner = "speedup";
  sp.unit = "x";
  sp.columns = cols;
  sp.rows = {"arena_alloc()", "arena_alloc() (reused arena)", "arena_free()"};
  akb::Table wsp = sp;
  wsp.id = "speedup_write";
  wsp.title =
      "Touching variant: the arena writes 8 bytes into every allocation, so the fresh arena takes a page "
      "fault per 4 KiB (malloc side unchanged: malloc(8) without a write, free())";
  wsp.corner = "speedup (arena writes)";
  wsp.rows = {"arena_alloc() + write", "arena_alloc() + write (reused arena)",
              "arena_free() (written arena)"};
  sp.cells.assign(3, std::vector<double>(cols.size(), nan));
  wsp.cells = sp.cells;

  akb::Table tp;
  tp.id = "throughput";
  tp.title = "Throughput: operations per microsecond (median over repetitions of each child's best round)";
  tp.corner = "per us";
  tp.unit = "ops/us";
  tp.columns = cols;
  tp.rows = {"arena_alloc()",
             "arena_alloc() (reused arena)",
             "arena_free() (allocations freed per us)",
             "arena_alloc() + write",
             "arena_alloc() + write (reused arena)",
             "arena_free() (written arena)",
             "malloc(8)",
             "free()"};
  const char *keys[] = {"arena_alloc",
                        "arena_alloc_reused",
                        "arena_free",
                        "arena_alloc_write",
                        "arena_alloc_write_reused",
                        "arena_free_written",
                        "malloc",
                        "free"};
  tp.cells.assign(tp.rows.size(), std::vector<double>(cols.size(), nan));
  for (std::size_t c = 0; c < cols.size(); c++) {
    for (std::size_t r = 0; r < tp.rows.size(); r++) tp.cells[r][c] = tput(cols[c], keys[r]);
    double m = tput(cols[c], "malloc"), f = tput(cols[c], "free");
    sp.cells[0][c] = tput(cols[c], "arena_alloc") / m;
    sp.cells[1][c] = tput(cols[c], "arena_alloc_reused") / m;
    sp.cells[2][c] = tput(cols[c], "arena_free") / f;
    wsp.cells[0][c] = tput(cols[c], "arena_alloc_write") / m;
    wsp.cells[1][c] = tput(cols[c], "arena_alloc_write_reused") / m;
    wsp.cells[2][c] = tput(cols[c], "arena_free_written") / f;
  }
  std::string n = params.count("n") ? params.at("n") : "?";
  std::string wn = params.count("write_n") ? params.at("write_n") : "?";
  tp.note = "n = " + n + " allocations of 8 bytes per step (the touching variant: " + wn +
            "); arena_free() = ak_arena_destroy() of an arena holding them, free() = n calls of free().";
  if (params.count("calibration_s") && d.has("glibc", "best.malloc") &&
      d.median("glibc", "best.malloc") <= kCalibrateTarget)
    tp.note += " Note: glibc's best malloc round took " + fmt("%.3f", d.median("glibc", "best.malloc")) +
               " s, not above 0.5 s as calibrated (the machine was faster than during calibration).";
  rep.tables = {sp, wsp, tp};

  // Acceptance: the arena figures of the glibc child against glibc itself.
  if (d.has("glibc", "best.malloc")) {
    const std::string g = "glibc";
    double fresh = tput(g, "arena_alloc"), reused = tput(g, "arena_alloc_reused");
    rep.checks.push_back(
        {"8-byte arena_alloc(), fresh arena: allocations per us", fresh, kMinFreshPerUs, "/us"});
    rep.checks.push_back({"8-byte arena_alloc(), fresh arena: throughput vs glibc malloc(8)",
                          fresh / tput(g, "malloc"), kMinFreshVsGlibc, "x"});
    rep.checks.push_back(
        {"8-byte arena_alloc(), reused arena: allocations per us", reused, kMinReusedPerUs, "/us"});
    rep.checks.push_back({"8-byte arena_alloc(), reused arena: throughput vs glibc malloc(8)",
                          reused / tput(g, "malloc"), kMinReusedVsGlibc, "x"});
    rep.checks.push_back(
        akb::speedup("ak_arena_destroy() vs glibc free() of the same n allocations one by one (time ratio)",
                     d.median(g, "best.arena_free"), d.median(g, "best.free"), kMinDestroyVsGlibcFree));
  }

  // Per-allocator output in the source benchmark's format.
  std::string &md = rep.details_md;
  md += "<details>\n<summary>Full benchmark output (per allocator)</summary>\n\n";
  md += "Times: `(min)` is the median over the " + std::to_string(d.reps) +
        " repetitions of each child's best round, `(max)` the worst round seen in any repetition.\n\n";
  for (const auto &a : d.allocators) {
    const std::string &l = a.label;
    auto line = [&](const char *label, const char *key) {
      return std::string(label) + fmt("%.6fs (min), ", d.median(l, std::string("best.") + key)) +
             fmt("%.6fs (max)\n", d.max(l, std::string("worst.") + key));
    };
    md += "#### " + l + (a.version.empty() ? "" : " " + a.version) + "\n\n```\n";
    md += line("Arena allocation time:             ", "arena_alloc");
    md += line("Arena (reused) allocation time:    ", "arena_alloc_reused");
    md += line("Arena free time:                   ", "arena_free");
    md += line("Arena clear time:                  ", "arena_clear");
    md += fmt("Arena allocations per us:          %.3f\n", tput(l, "arena_alloc"));
    md += fmt("Arena (reused) allocations per us: %.3f\n", tput(l, "arena_alloc_reused"));
    md += fmt("Arena allocation frees per us:     %.3f\n\n", tput(l, "arena_free"));
    md += line("Arena+write allocation time:          ", "arena_alloc_write");
    md += line("Arena+write (reused) allocation time: ", "arena_alloc_write_reused");
    md += line("Arena (written) free time:            ", "arena_free_written");
    md += fmt("Arena+write allocations per us:          %.3f\n", tput(l, "arena_alloc_write"));
    md += fmt("Arena+write (reused) allocations per us: %.3f\n", tput(l, "arena_alloc_write_reused"));
    md += fmt("Arena (written) allocation frees per us: %.3f\n\n", tput(l, "arena_free_written"));
    md += line("Standard allocation time:         ", "malloc");
    md += line("Standard free time:               ", "free");
    md += fmt("Standard allocations per us:      %.3f\n", tput(l, "malloc"));
    md += fmt("Standard allocation frees per us: %.3f\n\n", tput(l, "free"));
    md +=
        fmt("         arena_alloc() vs malloc() speedup: %.3f\n", tput(l, "arena_alloc") / tput(l, "malloc"));
    md += fmt("(reused) arena_alloc() vs malloc() speedup: %.3f\n",
              tput(l, "arena_alloc_reused") / tput(l, "malloc"));
    md += fmt("          arena_free() vs   free() speedup: %.3f\n", tput(l, "arena_free") / tput(l, "free"));
    md += "```\n\n";
  }
  md += "</details>\n";
  return rep;
}

}  // namespace

AKB_SCENARIO(arena_bump, "arena-bump",
             "n 8-byte ak_arena_alloc() in a fresh and a reused arena, ak_arena_destroy(), against "
             "n malloc(8) and n free() (best round, throughput, speedup)",
             {
                 {"best.arena_alloc", akb::Better::lower, "s"},
                 {"best.arena_alloc_reused", akb::Better::lower, "s"},
                 {"best.arena_free", akb::Better::lower, "s"},
                 {"best.arena_alloc_write", akb::Better::lower, "s"},
                 {"best.arena_alloc_write_reused", akb::Better::lower, "s"},
                 {"best.arena_free_written", akb::Better::lower, "s"},
             },
             3, 3);
