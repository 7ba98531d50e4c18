/* SPDX-License-Identifier: MIT */
// fault_test.cpp - fault injection sweeps over every component: the OS
// layer fails the Nth reservation, commit or file operation
// (_ak_os_fail_nth), for N = 1, 2, ... over a whole bounded workload, until
// a run completes with no injected failure. For each N the test asserts
// that the failure surfaces as NULL (or the documented error code) with the
// injected errno on exactly the call that hit it (or is absorbed by a retry
// with another mapping, which must then have been made), that the failed call
// mapped nothing and left the component's stats unchanged, that the stats
// still agree with the OS layer's counters, that everything written before
// is intact, that the same call succeeds when retried (the component keeps
// working), and that after destroy (for the malloc: after freeing
// everything and ak_collect(true)) the OS layer's counters are back where
// they started.
#include <arenakit/arenakit.h>
#include <errno.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "os/os_mem.h"

extern "C" void _ak_arena_cache_drain(void);  // src/arena/arena_cache.c

namespace {

const char *kind_name(_ak_os_fault k) {
  switch (k) {
    case _AK_OS_FAULT_RESERVE: return "reserve";
    case _AK_OS_FAULT_COMMIT: return "commit";
    default: return "file";
  }
}

// What each kind injects: what the kernel says for memory, a full disk for
// files.
int kind_errno(_ak_os_fault k) { return k == _AK_OS_FAULT_FILE ? ENOSPC : ENOMEM; }

const _ak_os_fault kAllKinds[] = {_AK_OS_FAULT_RESERVE, _AK_OS_FAULT_COMMIT, _AK_OS_FAULT_FILE};

struct OsSnap {
  size_t bytes, maps;
  bool operator==(const OsSnap &o) const { return bytes == o.bytes && maps == o.maps; }
};
std::ostream &operator<<(std::ostream &os, const OsSnap &s) {
  return os << "{mapped " << s.bytes << " B in " << s.maps << " mappings}";
}
OsSnap os_snap() {
  _ak_os_counters c;
  _ak_os_get_counters(&c);
  return {c.mapped_bytes, c.mappings};
}

// ---- contents: a pattern at both ends of every live block ----------------
struct Block {
  void *p;
  size_t size;
  unsigned seed;
};

void fill(const Block &b) {
  auto *c = static_cast<unsigned char *>(b.p);
  size_t head = b.size < 64 ? b.size : 64;
  for (size_t i = 0; i < head; i++) c[i] = static_cast<unsigned char>(b.seed + i);
  for (size_t i = b.size - head; i < b.size; i++) c[i] = static_cast<unsigned char>(b.seed * 7 + i);
}

bool intact(const Block &b) {
  const auto *c = static_cast<const unsigned char *>(b.p);
  size_t head = b.size < 64 ? b.size : 64;
  for (size_t i = b.size - head; i < b.size; i++)
    if (c[i] != static_cast<unsigned char>(b.seed * 7 + i)) return false;
  for (size_t i = 0; i < head && i < b.size - head; i++)
    if (c[i] != static_cast<unsigned char>(b.seed + i)) return false;
  return true;
}

// ---- one run of a workload with one armed fault -----------------------------
// Every call of the workload goes through one of the wrappers below, which
// notice whether the injected failure fired during that call.
class FaultRun {
 public:
  // `state` returns the component's counters that a failed call must not
  // change; `consistent` checks stats against the OS counters and contents.
  FaultRun(_ak_os_fault kind, int err) : kind_(kind), err_(err) {}

  std::function<std::vector<size_t>()> state = [] { return std::vector<size_t>(); };
  std::function<void()> consistent = [] {};
  // What ak_last_error() must start with after a failure (the API names the
  // call); nullptr where none is promised (the malloc family: errno only).
  // `message_names_call`: it must name the very call that failed.
  const char *message_prefix = nullptr;
  bool message_names_call = false;

  // A call returning a pointer (NULL + errno on failure).
  void *ptr(const char *what, const std::function<void *()> &f) {
    size_t f0 = fired();
    OsSnap s0 = os_snap();
    std::vector<size_t> st0 = state();
    stale_message();
    errno = 0;
    void *p = f();
    int e = errno;
    if (fired() == f0) {
      EXPECT_NE(p, nullptr) << what << " failed (errno " << e << ": " << ak_last_error()
                            << ") without an injected failure";
      return p;
    }
    if (p) {
      // Absorbed: the component retried with another mapping (an arena's
      // smaller chunk, a malloc block's own mapping) and that one worked.
      // (The caller checks the result as any success: its bookkeeping,
      // which `consistent` reads, does not know the new block yet.)
      EXPECT_GT(os_snap().maps, s0.maps) << what << ": the injected failure neither surfaced nor was retried";
      absorbed_++;
      return p;
    }
    failed(what, e, s0, st0, true);
    errno = 0;
    p = f();
    EXPECT_NE(p, nullptr) << what << " fails again after the injected failure (errno " << errno << ")";
    return p;
  }

  // A call returning 0 or an error code. `sets_errno`: errno carries the
  // code too (else errno must be left alone, as posix_memalign does).
  // `partial`: a failure may keep what succeeded before it (reserve).
  int code(const char *what, const std::function<int()> &f, bool sets_errno = true, bool partial = false) {
    size_t f0 = fired();
    OsSnap s0 = os_snap();
    std::vector<size_t> st0 = state();
    stale_message();
    errno = 0;
    int rc = f();
    int e = errno;
    if (fired() == f0) {
      EXPECT_EQ(rc, 0) << what << " failed (" << rc << ": " << ak_last_error()
                       << ") without an injected failure";
      return rc;
    }
    if (rc == 0) {  // absorbed by a retry with another mapping (see ptr)
      EXPECT_GT(os_snap().maps, s0.maps) << what << ": the injected failure neither surfaced nor was retried";
      absorbed_++;
      return rc;
    }
    EXPECT_EQ(rc, err_) << what << ": the injected failure did not surface as its code";
    if (sets_errno) {
      failed(what, e, s0, st0, !partial);
    } else {
      EXPECT_EQ(e, 0) << what << " must not change errno";
      failed(what, err_, s0, st0, !partial);
    }
    rc = f();
    EXPECT_EQ(rc, 0) << what << " fails again after the injected failure";
    return rc;
  }

  // A call that reports nothing (free, trim, clear): an injected failure
  // inside it (a file shrink) must be absorbed.
  // `check`: the component still exists afterwards (not for destroy).
  void quiet(const std::function<void()> &f, bool check = true) {
    size_t f0 = fired();
    f();
    if (fired() != f0) {
      absorbed_++;
      if (check) consistent();
    }
  }

  size_t failures() const { return failures_; }
  size_t absorbed() const { return absorbed_; }

 private:
  size_t fired() const { return _ak_os_faults_fired(kind_); }

  // Leaves a known message behind, so that a failure without a message of
  // its own shows ("ak_arena_init: ..." does not start with another prefix).
  static void stale_message() { (void)ak_arena_init(nullptr, nullptr); }

  void failed(const char *what, int e, const OsSnap &s0, const std::vector<size_t> &st0, bool unchanged) {
    failures_++;
    EXPECT_EQ(e, err_) << what << ": errno of the injected failure (" << ak_last_error() << ")";
    if (message_prefix) {
      std::string want = message_names_call ? std::string(what) + ":" : message_prefix;
      EXPECT_EQ(std::string(ak_last_error()).rfind(want, 0), 0u)
          << what << ": ak_last_error() \"" << ak_last_error() << "\" does not name the call";
    }
    if (unchanged) {
      EXPECT_EQ(os_snap(), s0) << what << ": a failed call must map nothing";
      EXPECT_EQ(state(), st0) << what << ": a failed call must not change the stats";
    }
    consistent();
  }

  _ak_os_fault kind_;
  int err_;
  size_t failures_ = 0, absorbed_ = 0;
};

// Runs `workload` with the Nth call of `kind` failing, N = 1, 2, ..., until
// a run has no injected failure. Returns the number of runs.
size_t sweep(_ak_os_fault kind, const std::function<void(FaultRun &)> &workload, size_t max_runs = 400) {
  int err = kind_errno(kind);
  for (size_t n = 1;; n++) {
    SCOPED_TRACE(std::string("failing ") + kind_name(kind) + " call #" + std::to_string(n));
    size_t f0 = _ak_os_faults_fired(kind);
    FaultRun run(kind, err);
    _ak_os_fail_nth(kind, n, err);
    workload(run);
    size_t calls = _ak_os_fault_calls(kind);
    _ak_os_fail_nth(kind, 0, 0);
    bool fired = _ak_os_faults_fired(kind) != f0;
    if (!fired) {
      EXPECT_LT(calls, n);
      EXPECT_EQ(run.failures() + run.absorbed(), 0u);
      return n;
    }
    EXPECT_EQ(run.failures() + run.absorbed(), 1u) << "the one injected failure is seen by exactly one call";
    if (::testing::Test::HasFailure() || n >= max_runs) {
      ADD_FAILURE_AT(__FILE__, __LINE__) << "sweep stopped at N = " << n;
      return n;
    }
  }
}

// =============================================================================
// The arena: regular chunks growing, dedicated chunks, a caller buffer,
// marks, realloc, zalloc/array/strdup, defer, clear.
// =============================================================================

void arena_consistent(const ak_arena *a, const OsSnap &base, const std::vector<Block> &live) {
  ak_arena_stats st;
  ak_arena_stats_get(a, &st);
  _ak_arena_cache_drain();  // chunks released so far are the cache's, not the arena's
  OsSnap now = os_snap();
  EXPECT_EQ(now.bytes - base.bytes, st.reserved) << "arena stats vs OS counters";
  EXPECT_EQ(now.maps - base.maps, st.chunks) << "arena stats vs OS counters";
  EXPECT_GE(st.used, st.requested);
  EXPECT_GE(st.peak_reserved, st.reserved);
  for (const Block &b : live) EXPECT_TRUE(intact(b)) << "block " << b.p << " of " << b.size << " B corrupted";
}

int g_deferred_runs;
void count_defer(void *) { g_deferred_runs++; }

void arena_workload(FaultRun &r) {
  _ak_arena_cache_drain();  // every chunk is a mapping of this run: the Nth call is the Nth chunk's
  OsSnap base = os_snap();
  alignas(16) static unsigned char buffer[1024];
  ak_arena_options o{};
  o.first_chunk = 4096;
  o.max_chunk = 64 * 1024;  // requests above 16 KiB get a dedicated chunk
  o.buffer = buffer;
  o.buffer_size = sizeof buffer;
  ak_arena a;
  ASSERT_EQ(ak_arena_init(&a, &o), 0);
  std::vector<Block> live;
  r.state = [&] {
    ak_arena_stats st;
    ak_arena_stats_get(&a, &st);
    return std::vector<size_t>{st.requested, st.used, st.reserved, st.chunks};
  };
  r.consistent = [&] { arena_consistent(&a, base, live); };
  r.message_prefix = "ak_arena_alloc";
  auto alloc = [&](size_t size, size_t align, unsigned seed) {
    void *p = r.ptr("ak_arena_alloc", [&] { return ak_arena_alloc(&a, size, align); });
    if (!p) return;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % align, 0u);
    live.push_back({p, size, seed});
    fill(live.back());
  };
  g_deferred_runs = 0;
  int deferred = 0;
  ak_arena_mark mark{};
  size_t live_at_mark = 0;
  for (unsigned i = 0; i < 160; i++) {
    size_t size = 8 + (i * 37) % 400;
    size_t align = (i % 13 == 0) ? 4096 : (i % 5 == 0) ? 64 : 8;
    if (i % 23 == 11) size = 20000 + i * 100;  // a dedicated chunk
    alloc(size, align, i);
    if (i % 19 == 7 && !live.empty()) {  // grow the newest block (in place or moved)
      Block &b = live.back();
      size_t nsize = b.size * 3;
      void *q = r.ptr("ak_arena_realloc", [&] { return ak_arena_realloc(&a, b.p, b.size, nsize, 8); });
      if (q) {
        EXPECT_TRUE(intact({q, b.size, b.seed}) || b.size > 64) << "realloc lost the head of the block";
        b = {q, nsize, b.seed + 1000};
        fill(b);
      }
    }
    if (i % 29 == 3) {
      auto *z = static_cast<unsigned char *>(
          r.ptr("ak_arena_zalloc", [&] { return ak_arena_zalloc(&a, 3000 + i * 10, 16); }));
      if (z) {
        for (size_t k = 0; k < 3000 + i * 10; k += 97) EXPECT_EQ(z[k], 0);
      }
      auto *v = static_cast<uint64_t *>(
          r.ptr("ak_arena_alloc_array", [&] { return ak_arena_alloc_array(&a, 700, 8, 8, 1); }));
      if (v) {
        EXPECT_EQ(v[699], 0u);
      }
      char *s = static_cast<char *>(r.ptr("ak_arena_strdup", [&] { return ak_arena_strdup(&a, "fault"); }));
      if (s) {
        EXPECT_STREQ(s, "fault");
      }
      if (r.code("ak_arena_defer", [&] { return ak_arena_defer(&a, count_defer, nullptr); }) == 0) deferred++;
    }
    if (i == 50) {
      mark = ak_arena_save(&a);
      live_at_mark = live.size();
    }
    if (i == 110) {  // frees the blocks after the mark, dedicated chunks included
      r.quiet([&] { ak_arena_restore(&a, mark); });
      live.resize(live_at_mark);
      r.consistent();
    }
  }
  r.consistent();
  for (const Block &b : live) ASSERT_TRUE(intact(b));
  r.quiet([&] { ak_arena_clear(&a); });
  live.clear();
  for (unsigned i = 0; i < 40; i++) alloc(100 + i * 50, 8, 500 + i);  // works after clear
  alloc(40000, 8, 999);                                               // dedicated after clear
  r.consistent();
  r.quiet([&] { ak_arena_destroy(&a); }, false);
  _ak_arena_cache_drain();  // the cache gives the chunks back (the reclaim policy does, in time)
  EXPECT_EQ(os_snap(), base) << "everything goes back after destroy";
  EXPECT_GE(g_deferred_runs, deferred);
}

TEST(ArenaFault, EveryKindSwept) {
  for (_ak_os_fault k : kAllKinds) {
    size_t runs = sweep(k, arena_workload);
    std::printf("[   info   ] arena: %zu runs for %s faults\n", runs, kind_name(k));
    if (k == _AK_OS_FAULT_RESERVE) {
      EXPECT_GT(runs, 5u) << "the workload maps chunks";
    }
  }
}

// The arena with a budget: a failure of the OS is ENOMEM, and the budget
// accounting is unchanged by it.
TEST(ArenaFault, BudgetUnchangedByFailure) {
  sweep(_AK_OS_FAULT_RESERVE, [](FaultRun &r) {
    _ak_arena_cache_drain();
    OsSnap base = os_snap();
    ak_arena_options o{};
    o.max_bytes = 100000;
    ak_arena a;
    ASSERT_EQ(ak_arena_init(&a, &o), 0);
    std::vector<Block> live;
    r.state = [&] {
      ak_arena_stats st;
      ak_arena_stats_get(&a, &st);
      return std::vector<size_t>{st.requested, st.used, st.reserved, st.chunks};
    };
    r.consistent = [&] { arena_consistent(&a, base, live); };
    r.message_prefix = "ak_arena_alloc";
    size_t got = 0;
    for (unsigned i = 0; got + 2000 <= 90000; i++) {
      void *p = r.ptr("ak_arena_alloc", [&] { return ak_arena_alloc(&a, 2000, 8); });
      if (!p) break;
      got += 2000;
      live.push_back({p, 2000, i});
      fill(live.back());
    }
    errno = 0;
    EXPECT_EQ(ak_arena_alloc(&a, 20000, 8), nullptr) << "the budget still holds";
    EXPECT_EQ(errno, ENOMEM);
    r.consistent();
    ak_arena_destroy(&a);
    _ak_arena_cache_drain();
    EXPECT_EQ(os_snap(), base);
  });
}

// =============================================================================
// The pool: every sync mode, every backing; alloc, free, reserve, trim.
// =============================================================================

struct PoolCase {
  ak_sync sync;
  ak_backing backing;
};

std::string pool_case_name(const PoolCase &c) {
  static const char *const syncs[] = {"threads", "none", "spinlock", "lockfree"};
  static const char *const backs[] = {"mmap", "heap", "file"};
  return std::string(syncs[c.sync]) + "_" + backs[c.backing];
}

class PoolFault : public ::testing::TestWithParam<PoolCase> {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ak_fault_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    unlink((dir_ + "/pool.dat").c_str());
    rmdir(dir_.c_str());
  }
  std::string dir_;
};

void pool_workload(FaultRun &r, const PoolCase &c, const std::string &path) {
  OsSnap base = os_snap();
  ak_pool_options o{};
  o.object_size = 48;
  o.sync = c.sync;
  o.backing = c.backing;
  o.slab_size = 4096;  // ~80 objects a slab: many slabs in a short run
  o.name = "faulty";
  if (c.backing == AK_BACKING_FILE) o.path = path.c_str();
  ak_pool *p = ak_pool_create(&o);
  ASSERT_NE(p, nullptr) << ak_last_error();
  std::vector<Block> live;
  auto stats = [&] {
    ak_pool_stats st;
    ak_pool_stats_get(p, &st);
    return st;
  };
  r.state = [&] {
    ak_pool_stats st = stats();
    return std::vector<size_t>{st.live, st.slabs, st.bytes_reserved, st.slab_allocs, st.slab_releases};
  };
  r.consistent = [&] {
    ak_pool_stats st = stats();
    OsSnap now = os_snap();
    EXPECT_EQ(st.live, live.size()) << "live objects";
    EXPECT_EQ(st.slab_allocs - st.slab_releases, st.slabs);
    EXPECT_EQ(st.bytes_reserved, st.slabs * 4096);
    EXPECT_EQ(now.maps - base.maps, st.slabs) << "pool stats vs OS counters";
    EXPECT_EQ(now.bytes - base.bytes, st.bytes_reserved) << "pool stats vs OS counters";
    for (const Block &b : live) EXPECT_TRUE(intact(b)) << "object " << b.p << " corrupted";
  };
  r.message_prefix = "ak_pool_";
  r.message_names_call = true;
  unsigned seed = 0;
  auto alloc = [&](int n) {
    for (int i = 0; i < n; i++) {
      void *q = r.ptr("ak_pool_alloc", [&] { return ak_pool_alloc(p); });
      if (!q) return;
      EXPECT_TRUE(ak_pool_owns(p, q));
      live.push_back({q, 48, seed++});
      fill(live.back());
    }
  };
  auto free_every = [&](size_t k) {  // `live` stays exact during each free
    for (size_t orig = 0, at = 0; at < live.size(); orig++) {
      if (orig % k == 0) {
        void *q = live[at].p;
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(at));
        r.quiet([&] { ak_pool_free(p, q); });
      } else {
        at++;
      }
    }
  };
  alloc(300);
  free_every(3);
  alloc(100);
  r.code(
      "ak_pool_reserve", [&] { return ak_pool_reserve(p, 400); }, true, true);
  alloc(200);
  free_every(2);
  r.quiet([&] { ak_pool_trim(p); });
  r.consistent();
  alloc(150);
  free_every(1);
  r.quiet([&] { ak_pool_trim(p); });
  r.consistent();
  alloc(100);  // works after everything went back
  r.consistent();
  free_every(1);
  r.quiet([&] { ak_pool_destroy(p); }, false);
  EXPECT_EQ(os_snap(), base) << "everything goes back after destroy";
  if (c.backing == AK_BACKING_FILE) {
    struct stat sb;
    ASSERT_EQ(stat(path.c_str(), &sb), 0);
  }
}

TEST_P(PoolFault, EveryKindSwept) {
  const PoolCase c = GetParam();
  std::string path = dir_ + "/pool.dat";
  for (_ak_os_fault k : kAllKinds) {
    size_t runs = sweep(k, [&](FaultRun &r) { pool_workload(r, c, path); });
    std::printf("[   info   ] pool %s: %zu runs for %s faults\n", pool_case_name(c).c_str(), runs,
                kind_name(k));
    bool counted = k == _AK_OS_FAULT_RESERVE || (k == _AK_OS_FAULT_FILE && c.backing == AK_BACKING_FILE);
    if (counted) {
      EXPECT_GT(runs, 5u) << "the workload takes slabs";
    }
  }
}

std::vector<PoolCase> pool_cases() {
  std::vector<PoolCase> v;
  for (ak_sync s : {AK_SYNC_NONE, AK_SYNC_SPINLOCK, AK_SYNC_LOCKFREE, AK_SYNC_THREADS})
    for (ak_backing b : {AK_BACKING_MMAP, AK_BACKING_HEAP, AK_BACKING_FILE}) v.push_back({s, b});
  return v;
}
INSTANTIATE_TEST_SUITE_P(All, PoolFault, ::testing::ValuesIn(pool_cases()),
                         [](const auto &pi) { return pool_case_name(pi.param); });

// =============================================================================
// The malloc: small, medium, large, huge-aligned, calloc, realloc growth by
// mremap, posix_memalign. It has no destroy: after everything is freed and
// ak_collect(true), the OS counters must be back at the baseline taken
// after the same collect. What the malloc legitimately keeps across that
// is only the calling thread's heap struct (one small mapping, created by
// the warm-up before the baseline): empty segments, cached segments and
// large mappings all go back on ak_collect(true).
// =============================================================================

struct MallocState {
  size_t allocated, large_blocks, large_bytes;
};

std::vector<size_t> malloc_state() {
  static ak_malloc_stats st;  // large
  ak_malloc_stats_get(&st);
  return {st.allocated, st.large_blocks, st.large_bytes, st.segments};
}

void malloc_workload(FaultRun &r) {
  ak_collect(true);
  OsSnap base = os_snap();
  std::vector<size_t> st_base = malloc_state();
  std::vector<Block> live;
  r.state = malloc_state;
  r.consistent = [&] {
    for (const Block &b : live) EXPECT_TRUE(intact(b)) << "block " << b.p << " of " << b.size << " corrupted";
    for (const Block &b : live) EXPECT_GE(ak_usable_size(b.p), b.size);
  };
  unsigned seed = 0;
  auto keep = [&](void *p, size_t n) {
    if (!p) return;
    live.push_back({p, n, seed++});
    fill(live.back());
  };
  // Small and medium (segments), large (own mappings).
  for (unsigned i = 0; i < 48; i++) {
    size_t n = 16 + (i * 211) % 1500;
    keep(r.ptr("ak_malloc small", [&] { return ak_malloc(n); }), n);
  }
  for (unsigned i = 0; i < 12; i++) {
    size_t n = 4000 + i * 37000;  // up to ~410 KiB: spans of several pages
    keep(r.ptr("ak_malloc medium", [&] { return ak_malloc(n); }), n);
  }
  for (unsigned i = 0; i < 4; i++) {
    size_t n = 600000 + i * 700000;  // solo spans: whole pages of a segment
    keep(r.ptr("ak_malloc solo", [&] { return ak_malloc(n); }), n);
  }
  for (unsigned i = 0; i < 2; i++) {
    size_t n = (size_t{5} << 20) + i * 700000;  // above SOLO_MAX: own mappings
    keep(r.ptr("ak_malloc large", [&] { return ak_malloc(n); }), n);
  }
  // Aligned: in-class, over-allocated, large, huge (4 MiB) aligned.
  for (size_t align : {64, 8192, 65536, 1 << 20, 4 << 20}) {
    size_t n = 1000 + align / 2;
    void *p = r.ptr("ak_aligned_alloc", [&] { return ak_aligned_alloc(align, n); });
    if (p) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % align, 0u);
    }
    keep(p, n);
  }
  void *pm = nullptr;
  r.code(
      "ak_posix_memalign", [&] { return ak_posix_memalign(&pm, 1 << 21, 700000); }, false);
  keep(pm, 700000);
  // calloc: small (recycled memory must be zeroed) and large.
  for (size_t n : {size_t(24), size_t(5000), size_t(900000)}) {
    auto *z = static_cast<unsigned char *>(r.ptr("ak_calloc", [&] { return ak_calloc(n / 8, 8); }));
    if (z) {
      for (size_t k = 0; k < n; k += 61) ASSERT_EQ(z[k], 0);
    }
    keep(z, n);
  }
  // realloc: a solo block grown in place, then into the large range and
  // by mremap (in place or moved); a small block moved into the solo and
  // large ranges.
  for (size_t step = 0; step < 2; step++) {
    Block &b = live[step == 0 ? 60 : 3];  // a solo block, then a small one
    for (size_t n = 700000 * (step + 1); n < 24000000; n *= 2) {
      Block old = b;
      void *q = r.ptr("ak_realloc", [&] { return ak_realloc(old.p, n); });
      if (!q) continue;
      Block head{q, old.size < 64 ? old.size : 64, old.seed};
      auto *c = static_cast<unsigned char *>(q);
      for (size_t i = 0; i < head.size; i++) EXPECT_EQ(c[i], static_cast<unsigned char>(old.seed + i));
      b = {q, n, seed++};
      fill(b);
    }
  }
  r.consistent();
  for (Block &b : live) r.quiet([&] { ak_free(b.p); });
  live.clear();
  // The memory freed above (pages of every class used) serves new blocks:
  // a failure absorbed by a free must not have left any of it unusable.
  for (unsigned i = 0; i < 96; i++) {
    size_t n = 16 + (i * 977) % 70000;
    keep(r.ptr("ak_malloc after frees", [&] { return ak_malloc(n); }), n);
  }
  r.consistent();
  for (Block &b : live) r.quiet([&] { ak_free(b.p); });
  live.clear();
  r.quiet([] { ak_collect(true); });
  EXPECT_EQ(os_snap(), base) << "after free and ak_collect(true) the malloc keeps nothing new";
  std::vector<size_t> st = malloc_state();
  EXPECT_EQ(st[0], st_base[0]) << "allocated bytes back to the baseline";
  EXPECT_EQ(st[1], st_base[1]) << "large blocks back to the baseline";
}

TEST(MallocFault, EveryKindSwept) {
  ak_free(ak_malloc(16));  // the thread's heap exists before any baseline
  for (_ak_os_fault k : kAllKinds) {
    size_t runs = sweep(k, malloc_workload);
    std::printf("[   info   ] malloc: %zu runs for %s faults\n", runs, kind_name(k));
    if (k != _AK_OS_FAULT_FILE) {
      EXPECT_GT(runs, 3u);
    }
  }
}

// A thread whose heap cannot be created gets NULL + ENOMEM, and its next
// call creates the heap and succeeds.
TEST(MallocFault, NewThreadHeapFailure) {
  std::thread t([] {
    size_t f0 = _ak_os_faults_fired(_AK_OS_FAULT_RESERVE);
    _ak_os_fail_nth(_AK_OS_FAULT_RESERVE, 1, ENOMEM);
    errno = 0;
    void *p = ak_malloc(32);
    _ak_os_fail_nth(_AK_OS_FAULT_RESERVE, 0, 0);
    EXPECT_EQ(_ak_os_faults_fired(_AK_OS_FAULT_RESERVE), f0 + 1);
    EXPECT_EQ(p, nullptr);
    EXPECT_EQ(errno, ENOMEM);
    p = ak_malloc(32);
    ASSERT_NE(p, nullptr);
    std::memset(p, 1, 32);
    ak_free(p);
  });
  t.join();
}

// The legacy spelling still arms the FILE kind.
TEST(OsFault, LegacyFileSpellingAndCounters) {
  _ak_os_fail_file_op(2, EIO);
  EXPECT_EQ(_ak_os_fault_calls(_AK_OS_FAULT_FILE), 0u);
  size_t f0 = _ak_os_faults_fired(_AK_OS_FAULT_FILE);
  errno = 0;
  EXPECT_EQ(_ak_os_file_resize(-1, 0), -1);  // call 1 reaches ftruncate: EBADF
  EXPECT_EQ(errno, EBADF);
  errno = 0;
  EXPECT_EQ(_ak_os_file_resize(-1, 0), -1);  // call 2 is the injected failure
  EXPECT_EQ(errno, EIO);
  EXPECT_EQ(_ak_os_faults_fired(_AK_OS_FAULT_FILE), f0 + 1);
  EXPECT_EQ(_ak_os_fault_calls(_AK_OS_FAULT_FILE), 2u);
  _ak_os_fail_file_op(0, 0);
  // Argument errors are not counted; a disarmed kind counts nothing.
  _ak_os_fail_nth(_AK_OS_FAULT_RESERVE, 1, 0);
  errno = 0;
  EXPECT_EQ(_ak_os_alloc(0, 4096), nullptr);
  EXPECT_EQ(errno, EINVAL);
  void *p = _ak_os_alloc(4096, 4096);  // fails with the default errno, ENOMEM
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(errno, ENOMEM);
  p = _ak_os_alloc(4096, 4096);
  ASSERT_NE(p, nullptr);
  _ak_os_fail_nth(_AK_OS_FAULT_COMMIT, 1, ENOMEM);
  void *q = _ak_os_remap(p, 4096, 4096 * 4, 4096);  // growth counts as a commit
  EXPECT_EQ(q, nullptr);
  q = _ak_os_remap(p, 4096, 4096 * 4, 4096);
  ASSERT_NE(q, nullptr);
  _ak_os_fail_nth(_AK_OS_FAULT_COMMIT, 1, ENOMEM);
  void *s = _ak_os_remap(q, 4096 * 4, 4096, 4096);  // shrinking does not count
  EXPECT_EQ(s, q);
  EXPECT_EQ(_ak_os_fault_calls(_AK_OS_FAULT_COMMIT), 0u);
  _ak_os_fail_nth(_AK_OS_FAULT_COMMIT, 0, 0);
  _ak_os_fail_nth(_AK_OS_FAULT_RESERVE, 0, 0);
  _ak_os_free(s, 4096);
}

}  // namespace
