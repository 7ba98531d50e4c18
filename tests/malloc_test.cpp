/* SPDX-License-Identifier: MIT */
// malloc_test.cpp - behaviour of the general heap (ak_malloc family):
// sizes and classes, alignment, edge cases with their errno, realloc,
// threads and remote frees, thread exit, fork, memory return, stats.
#include <arenakit/arenakit.h>
#include <arenakit/reclaim.h>
#include <errno.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "malloc/size_class.h"
#include "os/os_mem.h"
#include "reclaim_testing.h"
#include "sanitizers.h"

#ifndef AK_HARDENED
#define AK_HARDENED 0
#endif

namespace {

bool aligned(const void *p, size_t a) { return (reinterpret_cast<uintptr_t>(p) & (a - 1)) == 0; }

size_t committed() {
  ak_malloc_stats s;
  ak_malloc_stats_get(&s);
  return s.committed;
}

TEST(MallocClasses, WasteUnderOneEighthAbove128) {
  ak_free(ak_malloc(1));  // initialises the tables
  for (size_t n = 1; n <= AK_MEDIUM_MAX; n += (n < 4096 ? 1 : 61)) {
    unsigned c = _ak_size_class(n);
    ASSERT_LT(c, static_cast<unsigned>(AK_NCLS)) << n;
    size_t block = _ak_cls_size[c];
    ASSERT_GE(block, n) << n;
    if (c > 0) {
      ASSERT_LT(_ak_cls_size[c - 1], n) << "class " << c << " is not the smallest for " << n;
    }
    if (n > 128) {
      ASSERT_LT(static_cast<double>(block - n) / static_cast<double>(block), 0.125) << n;
    }
  }
}

TEST(Malloc, SizesAlignmentContentsNoOverlap) {
  std::mt19937 rng(11);
  std::vector<std::pair<unsigned char *, size_t>> live;
  for (int i = 0; i < 20000; i++) {
    size_t n = (rng() % 8 == 0) ? rng() % 600000 : rng() % 1500;
    auto *p = static_cast<unsigned char *>(ak_malloc(n));
    ASSERT_NE(p, nullptr);
    ASSERT_TRUE(aligned(p, n <= 8 ? 8 : 16)) << n;
    ASSERT_GE(ak_usable_size(p), n);
    std::memset(p, static_cast<int>(i & 0xff), n);
    live.emplace_back(p, n);
    if (rng() % 3 == 0) {
      size_t k = rng() % live.size();
      auto [q, m] = live[k];
      for (size_t j = 0; j < m; j++) ASSERT_EQ(q[j], q[0]) << "contents changed";
      ak_free(q);
      live[k] = live.back();
      live.pop_back();
    }
  }
  std::vector<std::pair<uintptr_t, size_t>> r;
  for (auto [p, n] : live) r.emplace_back(reinterpret_cast<uintptr_t>(p), n);
  std::sort(r.begin(), r.end());
  for (size_t i = 1; i < r.size(); i++) ASSERT_LE(r[i - 1].first + r[i - 1].second, r[i].first);
  for (auto [p, n] : live) ak_free(p);
}

TEST(Malloc, ZeroSizeGivesUniquePointers) {
  void *a = ak_malloc(0), *b = ak_malloc(0);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a, b);
  ak_free(a);
  ak_free(b);
  ak_free(nullptr);
}

TEST(Malloc, ImpossibleSizesAreEnomem) {
  for (size_t n : {SIZE_MAX, SIZE_MAX - 4096, SIZE_MAX / 2}) {
    errno = 0;
    EXPECT_EQ(ak_malloc(n), nullptr) << n;
    EXPECT_EQ(errno, ENOMEM);
  }
}

TEST(Calloc, OverflowIsEnomemAndMemoryIsZero) {
  errno = 0;
  EXPECT_EQ(ak_calloc(SIZE_MAX / 2, 3), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  // Dirty some blocks, free them, calloc must still return zeros.
  for (int round = 0; round < 3; round++) {
    std::vector<void *> v;
    for (int i = 0; i < 1000; i++) {
      void *p = ak_malloc(200);
      std::memset(p, 0xab, 200);
      v.push_back(p);
    }
    for (void *p : v) ak_free(p);
    for (int i = 0; i < 1000; i++) {
      auto *p = static_cast<unsigned char *>(ak_calloc(25, 8));
      for (int j = 0; j < 200; j++) ASSERT_EQ(p[j], 0);
      v[static_cast<size_t>(i)] = p;
    }
    for (void *p : v) ak_free(p);
  }
  auto *big = static_cast<unsigned char *>(ak_calloc(1, 3 << 20));
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(big[0] | big[(3 << 20) - 1], 0);
  ak_free(big);
}

TEST(Realloc, GlibcEdgeCasesAndContents) {
  void *p = ak_realloc(nullptr, 40);  // realloc(NULL, n) == malloc(n)
  ASSERT_NE(p, nullptr);
  std::memset(p, 7, 40);
  EXPECT_EQ(ak_realloc(p, 0), nullptr);  // realloc(p, 0) frees, returns NULL
  // Growth through small, medium, large and remapped large sizes.
  auto *q = static_cast<unsigned char *>(ak_malloc(10));
  for (size_t i = 0; i < 10; i++) q[i] = static_cast<unsigned char>(i);
  size_t have = 10;
  for (size_t n : {size_t{100}, size_t{5000}, size_t{100000}, size_t{2} << 20, size_t{40} << 20,
                   size_t{3} << 20, size_t{50}}) {
    auto *r = static_cast<unsigned char *>(ak_realloc(q, n));
    ASSERT_NE(r, nullptr) << n;
    for (size_t i = 0; i < std::min(have, n); i++) ASSERT_EQ(r[i], static_cast<unsigned char>(i)) << n;
    for (size_t i = std::min(have, n); i < n; i++) r[i] = static_cast<unsigned char>(i);
    q = r;
    have = n;
  }
  ak_free(q);
  errno = 0;
  void *s = ak_malloc(16);
  EXPECT_EQ(ak_realloc(s, SIZE_MAX - 10), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  EXPECT_GE(ak_usable_size(s), 16u) << "a failed realloc leaves the block alone";
  errno = 0;
  EXPECT_EQ(ak_reallocarray(s, SIZE_MAX / 2, 4), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  ak_free(s);
}

TEST(Realloc, LargeBlocksGrowWithoutCopying) {
  auto *p = static_cast<char *>(ak_malloc(8 << 20));
  std::memset(p, 'x', 8 << 20);
  auto *q = static_cast<char *>(ak_realloc(p, 64 << 20));
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q[0], 'x');
  EXPECT_EQ(q[(8 << 20) - 1], 'x');
  EXPECT_GE(ak_usable_size(q), size_t{64} << 20);
  ak_free(q);
}

// Large blocks (above AK_SOLO_MAX): a freed mapping is kept in the large-block
// cache and reused without a system call; a growing realloc moves into a
// cached mapping; the cache's budget follows the recent peak of large bytes
// in use; ak_collect(true) unmaps it.
TEST(LargeCache, MallocFreeLoopReusesTheMapping) {
  ak_collect(true);
  const size_t n = size_t{5} << 20;
  void *p = ak_malloc(n);
  ASSERT_NE(p, nullptr);
  std::memset(p, 1, n);
  ak_free(p);
  _ak_os_counters a, b;
  _ak_os_get_counters(&a);
  for (int i = 0; i < 20; i++) {
    void *q = ak_malloc(i % 2 ? n : n - 100000);  // the same mapping fits both
    EXPECT_EQ(q, p);
    std::memset(q, i, n - 100000);
    ak_free(q);
  }
  _ak_os_get_counters(&b);
  EXPECT_EQ(b.map_calls, a.map_calls) << "no new mapping while one is cached";
  EXPECT_EQ(b.mapped_bytes, a.mapped_bytes);
  ak_collect(true);
  _ak_os_get_counters(&b);
  EXPECT_LE(b.mapped_bytes + n, a.mapped_bytes) << "ak_collect(true) unmaps the cache";
}

TEST(LargeCache, CallocOfAReusedBlockIsZero) {
  ak_collect(true);
  const size_t n = size_t{6} << 20;
  auto *p = static_cast<unsigned char *>(ak_malloc(n));
  std::memset(p, 0xff, n);
  ak_free(p);
  auto *q = static_cast<unsigned char *>(ak_calloc(1, n));
  ASSERT_EQ(q, p) << "the cached mapping is reused";
  size_t nonzero = 0;
  for (size_t i = 0; i < n; i++) nonzero += q[i] != 0;
  EXPECT_EQ(nonzero, 0u);
  ak_free(q);
}

TEST(LargeCache, ReallocGrowsIntoACachedMapping) {
  ak_collect(true);
  auto *big = static_cast<char *>(ak_malloc(size_t{40} << 20));
  std::memset(big, 1, size_t{40} << 20);
  const size_t n = size_t{5} << 20;
  auto *p = static_cast<char *>(ak_malloc(n));  // a mapping of its own
  ASSERT_NE(p, big);
  ak_free(big);  // cached: 40 MiB
  for (size_t i = 0; i < n; i++) p[i] = static_cast<char>(i * 7);
  auto *q = static_cast<char *>(ak_realloc(p, size_t{30} << 20));
  EXPECT_EQ(q, big) << "moved into the cached mapping";
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) bad += q[i] != static_cast<char>(i * 7);
  EXPECT_EQ(bad, 0u);
  EXPECT_GE(ak_usable_size(q), size_t{30} << 20);
  std::memset(q, 2, size_t{30} << 20);
  ak_free(q);
  ak_collect(true);
}

// A block that grew into a cached mapping lies in two of the kernel's
// mappings (its moved pages, then the rest of the cached one), which
// mremap cannot grow or move as one: the next growth must still succeed,
// contents intact (it once returned NULL: Python's MemoryError in
// test_unicode under the preload).
TEST(LargeCache, ABlockGrownIntoACachedMappingGrowsAgain) {
  ak_collect(true);
  auto *big = static_cast<char *>(ak_malloc(size_t{12} << 20));
  std::memset(big, 1, size_t{12} << 20);
  const size_t n = size_t{5} << 20;
  auto *p = static_cast<char *>(ak_malloc(n));  // a mapping of its own
  ASSERT_NE(p, nullptr);
  ak_free(big);  // cached: 12 MiB
  for (size_t i = 0; i < n; i++) p[i] = static_cast<char>(i * 7);
  auto *q = static_cast<char *>(ak_realloc(p, size_t{9} << 20));
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q, big) << "moved into the cached mapping";
  auto *r = static_cast<char *>(ak_realloc(q, size_t{40} << 20));
  ASSERT_NE(r, nullptr) << "grows past the cached mapping";
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) bad += r[i] != static_cast<char>(i * 7);
  EXPECT_EQ(bad, 0u);
  std::memset(r, 2, size_t{40} << 20);
  auto *s = static_cast<char *>(ak_realloc(r, size_t{6} << 20));  // and shrinks
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s[(size_t{6} << 20) - 1], 2);
  ak_free(s);
  ak_collect(true);
}

// The cache's budget follows use: a freed mapping stays committed while
// the program's large blocks in use stay near their recent peak, and goes
// back once that peak is two windows old (reuse has stopped): decommitted
// by the budget, unmapped past the release delay. On the fake clock.
class LargeCacheBudget : public ::testing::Test, public FakeClockTest {
 protected:
  void SetUp() override {
    ak_collect(true);
    use_fake_clock();
  }
  void TearDown() override {
    ak_collect(true);
    restore_clock();
  }
};

TEST_F(LargeCacheBudget, KeptWhileReusedGivenBackWhenReuseStops) {
  const size_t n = size_t{8} << 20;
  void *p = ak_malloc(n);
  std::memset(p, 1, n);
  size_t with_block = committed();
  ak_free(p);
  for (int i = 0; i < 8; i++) {  // reused every 200 ms for 1.6 s: kept committed all along
    g_fake_ms += 200;
    ak_collect(false);
    EXPECT_GE(committed() + 4096, with_block) << "decommitted while reused, step " << i;
    void *q = ak_malloc(n);
    EXPECT_EQ(q, p) << "the cached mapping is reused, step " << i;
    ak_free(q);
  }
  _ak_os_counters a, b;
  _ak_os_get_counters(&a);
  g_fake_ms += 1100;  // reuse stopped: the peak is two windows old and the release delay passed
  ak_collect(false);
  EXPECT_LE(committed() + n - 4096, with_block) << "given back once reuse stopped";
  _ak_os_get_counters(&b);
  EXPECT_LE(b.mapped_bytes + n, a.mapped_bytes) << "unmapped past the release delay";
}

// What the cache holds committed never takes the large bytes above their
// recent peak: four blocks freed at once stay (the peak held them all),
// and a later spike's memory does not outlive two windows.
TEST_F(LargeCacheBudget, CommittedCacheStaysUnderTheRecentPeak) {
  const size_t n = size_t{6} << 20;
  void *p[4];
  for (void *&x : p) {
    x = ak_malloc(n);
    std::memset(x, 1, n);
  }
  size_t all = committed();
  for (void *x : p) ak_free(x);
  ak_collect(false);
  EXPECT_GE(committed() + 4 * 4096, all) << "the recent peak held all four: all four kept";
  g_fake_ms += 400;
  void *one = ak_malloc(n);  // one reused; the peak now moves on with one block in use
  g_fake_ms += 700;
  ak_collect(false);
  EXPECT_LE(committed(), all - 3 * n + 4 * 4096) << "the three unused ones went back";
  ak_free(one);
}

// A request larger than every cached mapping grows the largest one by
// mremap: its resident pages come along, only the growth faults in.
TEST(LargeCache, ALargerRequestGrowsTheLargestCachedMapping) {
  // ThreadSanitizer's shadow (several times the memory written) faults in
  // beside the block: the count says nothing about the block's pages.
  if (AK_TEST_TSAN) GTEST_SKIP() << "page faults of the shadow memory swamp the count";
  ak_collect(true);
  const size_t small = size_t{10} << 20, big = size_t{20} << 20;
  auto *p = static_cast<char *>(ak_malloc(small));
  std::memset(p, 1, small);
  ak_free(p);
  struct rusage r0, r1;
  getrusage(RUSAGE_SELF, &r0);
  auto *q = static_cast<char *>(ak_malloc(big));
  ASSERT_NE(q, nullptr);
  std::memset(q, 2, big);
  getrusage(RUSAGE_SELF, &r1);
  long faults = r1.ru_minflt - r0.ru_minflt;
  // A fresh mapping faults every page in (big / 4096, and more under a
  // sanitizer, whose shadow pages fault too); the grown one only the growth.
  EXPECT_LT(faults, static_cast<long>(big / 4096 * 3 / 4)) << "the cached pages came along";
  EXPECT_GE(ak_usable_size(q), big);
  ak_free(q);
  ak_collect(true);
}

// AK_PURGE_DELAY=0: nothing is cached.
TEST(LargeCache, PageDelayZeroCachesNothing) {
  long old = ak_option_get(AK_OPTION_PURGE_DELAY);
  ak_option_set(AK_OPTION_PURGE_DELAY, 0);
  ak_free(ak_malloc(16));  // the heap exists before the count
  ak_collect(true);
  _ak_os_counters a, b;
  _ak_os_get_counters(&a);
  void *q = ak_malloc(size_t{8} << 20);
  ak_free(q);
  _ak_os_get_counters(&b);
  EXPECT_EQ(b.mapped_bytes, a.mapped_bytes) << "unmapped at once";
  ak_option_set(AK_OPTION_PURGE_DELAY, old);
}

// A request just above a multiple of 64 KiB is not handed the rest of
// another 64 KiB page.
TEST(Malloc, SoloBlocksAreRoundedToFourKiB) {
  for (size_t n : {size_t{65537}, size_t{70000}, size_t{131073}, size_t{1} << 20, size_t{3} << 20}) {
    auto *p = static_cast<char *>(ak_malloc(n));
    ASSERT_NE(p, nullptr);
    size_t u = ak_usable_size(p);
    EXPECT_GE(u, n);
    EXPECT_LT(u, n + 4096) << n;
    std::memset(p, 1, u);
    auto *q = static_cast<char *>(ak_realloc(p, n + 5000));  // grows within its span or moves
    ASSERT_NE(q, nullptr);
    EXPECT_GE(ak_usable_size(q), n + 5000);
    EXPECT_EQ(q[n - 1], 1);
    std::memset(q, 2, n + 5000);
    ak_free(q);
  }
}

// Solo spans (AK_SOLO_MIN < n <= AK_SOLO_MAX): realloc grows a block into the
// free pages after it and gives tail pages back when it shrinks, without
// moving it; a buffer grown step by step is copied only a few times.
TEST(Realloc, SoloBlocksGrowAndShrinkInPlace) {
  ak_collect(true);
  size_t n = AK_SOLO_MIN + 1000;
  auto *p = static_cast<unsigned char *>(ak_malloc(n));
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(aligned(p, AK_PAGE_SIZE)) << "a solo block starts a page";
  for (size_t i = 0; i < n; i++) p[i] = static_cast<unsigned char>(i * 7);
  int moves = 0;
  for (size_t m = n + 4000; m <= (size_t{3} << 20); m += 4000) {
    auto *q = static_cast<unsigned char *>(ak_realloc(p, m));
    ASSERT_NE(q, nullptr) << m;
    moves += q != p;
    ASSERT_GE(ak_usable_size(q), m);
    for (size_t i = n; i < m; i++) q[i] = static_cast<unsigned char>(i * 7);
    p = q;
    n = m;
  }
  // Hardened guard pages (AK_HARDENED bit 2) end every span: a solo block
  // moves instead of growing over its guard.
  if (!(AK_HARDENED & 2)) {
    EXPECT_LE(moves, 4) << "solo blocks grow in place into free pages";
  }
  for (size_t i = 0; i < n; i++) ASSERT_EQ(p[i], static_cast<unsigned char>(i * 7)) << i;
  // Shrinking keeps the block and its head, and gives the tail pages back.
  size_t before = ak_usable_size(p);
  auto *r = static_cast<unsigned char *>(ak_realloc(p, 200000));
  if (!(AK_HARDENED & 2)) {
    EXPECT_EQ(r, p);
    EXPECT_LT(ak_usable_size(r), before / 2);
  }
  EXPECT_GE(ak_usable_size(r), 200000u);
  for (size_t i = 0; i < 200000; i++) ASSERT_EQ(r[i], static_cast<unsigned char>(i * 7)) << i;
  // Below AK_SOLO_MIN the block moves to a size class.
  auto *s = static_cast<unsigned char *>(ak_realloc(r, 1000));
  ASSERT_NE(s, nullptr);
  for (size_t i = 0; i < 1000; i++) ASSERT_EQ(s[i], static_cast<unsigned char>(i * 7)) << i;
  ak_free(s);
}

TEST(Calloc, SoloBlocksOverUsedPagesAreZero) {
  for (int round = 0; round < 3; round++) {
    std::vector<unsigned char *> v;
    for (int i = 0; i < 8; i++) {
      v.push_back(static_cast<unsigned char *>(ak_malloc(size_t{300000} + static_cast<size_t>(i) * 50000)));
      std::memset(v.back(), 0xee, size_t{300000} + static_cast<size_t>(i) * 50000);
    }
    for (auto *p : v) ak_free(p);
    for (int i = 0; i < 8; i++) {
      size_t n = size_t{200000} + static_cast<size_t>(i) * 70000;
      auto *z = static_cast<unsigned char *>(ak_calloc(n, 1));
      ASSERT_NE(z, nullptr);
      for (size_t k = 0; k < n; k++) ASSERT_EQ(z[k], 0) << "calloc(" << n << ") byte " << k;
      v[static_cast<size_t>(i)] = z;
    }
    for (auto *p : v) ak_free(p);
  }
}

TEST(Aligned, EveryAlignmentAndErrors) {
  for (size_t a = 1; a <= (size_t{16} << 20); a *= 2) {
    for (size_t n : {size_t{1}, size_t{24}, size_t{3000}, size_t{700000}}) {
      void *p = ak_aligned_alloc(a, n);
      ASSERT_NE(p, nullptr) << a << " " << n;
      ASSERT_TRUE(aligned(p, a)) << a << " " << n;
      ASSERT_GE(ak_usable_size(p), n);
      std::memset(p, 1, n);
      ak_free(p);
    }
  }
  errno = 0;
  EXPECT_EQ(ak_aligned_alloc(3, 10), nullptr);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(ak_aligned_alloc(0, 10), nullptr);
  EXPECT_EQ(errno, EINVAL);
  void *out = reinterpret_cast<void *>(0x1);
  errno = 1234;
  EXPECT_EQ(ak_posix_memalign(&out, 4, 10), EINVAL) << "alignment below sizeof(void *)";
  EXPECT_EQ(ak_posix_memalign(&out, 24, 10), EINVAL);
  EXPECT_EQ(out, reinterpret_cast<void *>(0x1)) << "*out untouched on failure";
  EXPECT_EQ(ak_posix_memalign(&out, 64, SIZE_MAX - 100), ENOMEM);
  EXPECT_EQ(errno, 1234) << "posix_memalign does not set errno";
  ASSERT_EQ(ak_posix_memalign(&out, 256, 100), 0);
  EXPECT_TRUE(aligned(out, 256));
  ak_free(out);
  void *m = ak_memalign(100, 10);  // glibc rounds 100 up to 128
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(aligned(m, 128));
  ak_free(m);
}

TEST(Threads, RemoteFreesProducerConsumer) {
  constexpr int kN = 300000;
  std::vector<std::atomic<void *>> ring(512);
  for (auto &r : ring) r.store(nullptr);
  std::thread producer([&] {
    for (int i = 0; i < kN; i++) {
      auto *p = static_cast<int *>(ak_malloc(16 + static_cast<size_t>(i % 200)));
      *p = i;
      auto &slot = ring[static_cast<size_t>(i) % ring.size()];
      while (slot.load(std::memory_order_acquire)) std::this_thread::yield();
      slot.store(p, std::memory_order_release);
    }
  });
  long sum = 0;
  for (int i = 0; i < kN; i++) {
    auto &slot = ring[static_cast<size_t>(i) % ring.size()];
    void *p;
    while (!(p = slot.load(std::memory_order_acquire))) std::this_thread::yield();
    slot.store(nullptr, std::memory_order_release);
    sum += *static_cast<int *>(p);
    ak_free(p);
  }
  producer.join();
  EXPECT_EQ(sum, static_cast<long>(kN) * (kN - 1) / 2);
}

TEST(Threads, StressManyThreadsCrossFrees) {
  constexpr int kThreads = 8;
  std::vector<std::atomic<void *>> mailbox(2048);
  for (auto &m : mailbox) m.store(nullptr);
  std::atomic<bool> bad{false};
  std::vector<std::thread> th;
  for (int id = 0; id < kThreads; id++) {
    th.emplace_back([&, id] {
      std::mt19937 rng(static_cast<unsigned>(id));
      std::vector<uint64_t *> mine;
      for (int i = 0; i < 50000; i++) {
        unsigned r = rng() % 4;
        if (r < 2 || mine.empty()) {
          size_t n = 8 + rng() % 3000;
          auto *p = static_cast<uint64_t *>(ak_malloc(n));
          p[0] = static_cast<uint64_t>(id);
          mine.push_back(p);
        } else if (r == 2) {
          if (mine.back()[0] != static_cast<uint64_t>(id)) bad = true;
          ak_free(mine.back());
          mine.pop_back();
        } else {
          uint64_t *p = mine.back();
          mine.pop_back();
          p[0] = 0xfeed;
          void *prev = mailbox[rng() % mailbox.size()].exchange(p);
          if (prev) {
            if (*static_cast<uint64_t *>(prev) != 0xfeed) bad = true;
            ak_free(prev);
          }
        }
      }
      for (uint64_t *p : mine) ak_free(p);
    });
  }
  for (auto &t : th) t.join();
  for (auto &m : mailbox) ak_free(m.load());
  EXPECT_FALSE(bad.load());
}

TEST(Threads, ExitedThreadsStrandNothing) {
  ak_collect(true);
  size_t before = committed();
  std::vector<void *> survivors;
  for (int round = 0; round < 20; round++) {
    std::thread([&] {
      std::vector<void *> v;
      for (int i = 0; i < 20000; i++) v.push_back(ak_malloc(64 + static_cast<size_t>(i % 500)));
      for (size_t i = 0; i < v.size(); i++) {
        if (i % 1000 == 0)
          survivors.push_back(v[i]);
        else
          ak_free(v[i]);
      }
    }).join();
  }
  // The survivors live in abandoned segments; freeing them from here
  // releases those segments.
  for (void *p : survivors) ak_free(p);
  ak_collect(true);
  ak_malloc_stats s;
  ak_malloc_stats_get(&s);
  EXPECT_EQ(s.abandoned, 0u) << "abandoned segments are released once empty";
  EXPECT_LE(committed(), before + (size_t{4} << 20));
}

// Counts the decommits (madvise) of the OS layer while installed.
std::atomic<size_t> g_decommits{0};
int counting_decommit(void *p, size_t n, void *ctx) {
  g_decommits++;
  return _ak_os_default_hooks().decommit(p, n, ctx);
}

// The `threads` workload of malloc-workloads in small: two short-lived
// threads at a time allocate 1,000 blocks of 16-1024 bytes, free 3/4 and
// leave 1/4 to the main thread, which frees them after the threads exited.
void short_thread_generation(unsigned g) {
  std::vector<void *> left[2];
  std::thread ts[2];
  for (unsigned t = 0; t < 2; t++) {
    ts[t] = std::thread([&left, g, t] {
      std::mt19937 rng(g * 2 + t);
      std::vector<void *> mine(1000);
      for (auto &p : mine) {
        size_t n = 16 + rng() % 1009;
        p = ak_malloc(n);
        std::memset(p, 0x5a, n);
      }
      for (size_t i = 0; i < mine.size(); i++) {
        if (i % 4 == 3)
          left[t].push_back(mine[i]);
        else
          ak_free(mine[i]);
      }
    });
  }
  for (auto &th : ts) th.join();
  for (auto &v : left)
    for (void *p : v) ak_free(p);
}

// Thread exit hands its segments on with their pages committed: threads
// that come and go reuse them, so the number of mappings, segments and
// committed bytes stays bounded and nothing is decommitted (no madvise and
// no page faults per thread) while the purge delay has not passed.
TEST(Threads, ShortLivedThreadsReuseSegmentsWithoutSystemCalls) {
  long old_delay = ak_option_get(AK_OPTION_PURGE_DELAY), old_purge, old_release;
  ak_option_set(AK_OPTION_PURGE_DELAY, 600000);  // no purge by time during the test
  ak_reclaim_get_delays(&old_purge, &old_release);
  ak_reclaim_set_delays(-1, -1);  // nor of the spare segments
  ak_collect(true);               // no large mappings cached by earlier tests (their budget may shrink now)
  ak_free(ak_malloc(16));         // this thread has a heap (it adopts segments)
  for (unsigned g = 0; g < 10; g++) short_thread_generation(g);
  _ak_os_counters c0, c1;
  _ak_os_get_counters(&c0);
  _ak_os_hooks hooks = _ak_os_default_hooks();
  hooks.decommit = counting_decommit;
  _ak_os_hooks saved = _ak_os_set_hooks(&hooks);
  g_decommits = 0;
  size_t max_segments = 0, max_committed = 0;
  for (unsigned g = 10; g < 210; g++) {
    short_thread_generation(g);
    ak_malloc_stats s;
    ak_malloc_stats_get(&s);
    max_segments = std::max(max_segments, s.segments);
    max_committed = std::max(max_committed, s.committed);
  }
  _ak_os_set_hooks(&saved);
  _ak_os_get_counters(&c1);
  ak_option_set(AK_OPTION_PURGE_DELAY, old_delay);
  ak_reclaim_set_delays(old_purge, old_release);
  EXPECT_EQ(g_decommits.load(), 0u) << "thread exit or adoption decommitted pages";
  EXPECT_LE(c1.map_calls - c0.map_calls, 4u) << "400 threads mapped new segments";
  EXPECT_LE(max_segments, 8u);
  EXPECT_LE(max_committed, size_t{8} * AK_SEG_SIZE);
  ak_collect(true);
}

// A thread that frees the blocks of an exited thread does not take its
// segment: the frees are remote, the segment stays abandoned until the
// abandoned sweep settles it (a purge tick, or ak_collect), which gives it
// to the spare segments once entirely free, and allocating the blocks
// again maps nothing.
TEST(Threads, FreeIntoExitedThreadsSegmentLeavesItAbandoned) {
  ak_collect(true);
  ak_free(ak_malloc(16));  // this thread has a heap
  std::vector<void *> blocks(2000);
  std::thread([&] {
    for (auto &p : blocks) p = ak_malloc(48);
  }).join();
  ak_malloc_stats s;
  ak_malloc_stats_get(&s);
  ASSERT_EQ(s.abandoned, 1u);
  for (size_t i = 1; i < blocks.size(); i++) ak_free(blocks[i]);
  ak_malloc_stats_get(&s);
  EXPECT_EQ(s.abandoned, 1u) << "a free adopted the segment";  // which holds blocks[0] still
  ak_free(blocks[0]);
  ak_collect(false);
  ak_malloc_stats_get(&s);
  EXPECT_EQ(s.abandoned, 0u) << "the sweep left an entirely free segment abandoned";
  _ak_os_counters c0, c1;
  _ak_os_get_counters(&c0);
  for (auto &p : blocks) p = ak_malloc(48);
  _ak_os_get_counters(&c1);
  EXPECT_EQ(c1.map_calls, c0.map_calls) << "the freed segment was not reused";
  for (void *p : blocks) ak_free(p);
  ak_collect(true);
}

// Two threads that run at once, so that each maps a segment of its own,
// allocate 2000 blocks of 48 bytes each into `kept` and exit, leaving two
// abandoned segments. With `spare_pages`, each also leaves free pages that
// held 1000-byte blocks (committed).
void exit_two_threads_with_a_segment_each(std::vector<void *> kept[2], bool spare_pages) {
  std::atomic<int> ready{0};
  auto fill = [&ready, spare_pages](std::vector<void *> *k) {
    std::vector<void *> tmp(spare_pages ? 400 : 0);
    for (auto &p : tmp) p = ak_malloc(1000);
    for (int i = 0; i < 2000; i++) k->push_back(ak_malloc(48));
    for (void *p : tmp) ak_free(p);
    ready++;
    while (ready.load() != 2) std::this_thread::yield();  // both own a segment before either exits
  };
  std::thread e1(fill, &kept[0]), e2(fill, &kept[1]);
  e1.join();
  e2.join();
}

// Runs `work` in a thread t1 and, while t1 is still running, a thread that
// allocates a block. Returns the abandoned segments once `work` is done
// and the mappings the other thread made; t1 then frees what `work`
// returned.
std::pair<size_t, size_t> abandoned_after_and_maps_beside(const std::function<std::vector<void *>()> &work) {
  std::atomic<int> step{0};
  size_t abandoned_after = 0;
  std::thread t1([&] {
    std::vector<void *> mine = work();
    ak_malloc_stats st;
    ak_malloc_stats_get(&st);
    abandoned_after = st.abandoned;
    step = 1;
    while (step.load() != 2) std::this_thread::yield();
    for (void *p : mine) ak_free(p);
  });
  while (step.load() != 1) std::this_thread::yield();
  _ak_os_counters c0, c1;
  _ak_os_get_counters(&c0);
  std::thread([] { ak_free(ak_malloc(48)); }).join();  // beside t1
  _ak_os_get_counters(&c1);
  step = 2;
  t1.join();
  return {abandoned_after, c1.map_calls - c0.map_calls};
}

// Stops the background thread for a scope and restores the mode after it:
// what the library's own calls do is then all that happens.
struct NoBackgroundThread {
  ak_background was = ak_reclaim_get_background();
  NoBackgroundThread() { EXPECT_EQ(ak_reclaim_set_background(AK_BACKGROUND_OFF), 0); }
  ~NoBackgroundThread() { ak_reclaim_set_background(was); }
};

// A thread that only frees the blocks of exited threads (a consumer that
// outlives its producers) still gives their memory back: such frees tick
// the purge clock, whose sweep settles the abandoned segments, so the
// segment it emptied goes to the spares with no allocation and no
// ak_collect. Without the background thread: its sweep holds the
// abandoned list's lock, which the tick skips when busy, and a sweep
// preempted on a loaded machine can hold it across all of the loop's ticks.
TEST(Threads, FreeingOnlyExitedThreadsBlocksSettlesTheirSegments) {
  NoBackgroundThread quiet;
  ak_collect(true);
  ak_free(ak_malloc(16));  // this thread has a heap
  std::vector<void *> blocks[2];
  exit_two_threads_with_a_segment_each(blocks, false);
  ak_malloc_stats s;
  ak_malloc_stats_get(&s);
  ASSERT_EQ(s.abandoned, 2u);
  for (void *p : blocks[0]) ak_free(p);                 // the first segment is entirely free now
  for (int i = 0; i < 200; i++) ak_free(blocks[1][i]);  // more than a tick's worth of frees
  ak_malloc_stats_get(&s);
  EXPECT_EQ(s.abandoned, 1u) << "the emptied segment was not settled without a call to ak_collect";
  for (size_t i = 200; i < blocks[1].size(); i++) ak_free(blocks[1][i]);
  ak_collect(true);
}

// Threads that take over the blocks of exited threads (larson: each
// generation frees its predecessors' objects) each find a segment to adopt:
// a running thread that frees blocks of a segment it did not adopt leaves
// that segment to the thread that starts beside it, which then maps none.
TEST(Threads, FreeingAnotherSegmentsBlocksLeavesItToTheNextThread) {
  ak_collect(true);
  ak_free(ak_malloc(16));  // this thread has a heap: three running with t1, t2
  std::vector<void *> kept[2];
  exit_two_threads_with_a_segment_each(kept, false);
  ak_malloc_stats s;
  ak_malloc_stats_get(&s);
  ASSERT_EQ(s.abandoned, 2u);
  auto [abandoned_after_t1, maps_beside] = abandoned_after_and_maps_beside([&kept] {
    std::vector<void *> mine{ak_malloc(48)};  // no segment yet: adopts one
    for (auto &k : kept)                      // frees into both exited threads' segments
      for (size_t i = 0; i < k.size(); i += 2) ak_free(k[i]);
    return mine;
  });
  EXPECT_EQ(abandoned_after_t1, 1u) << "t1's frees adopted the segment it did not need";
  EXPECT_EQ(maps_beside, 0u) << "a thread beside t1 mapped a fresh segment";
  for (auto &k : kept)
    for (size_t i = 1; i < k.size(); i += 2) ak_free(k[i]);
  ak_collect(true);
}

// A heap that has committed free pages of its own adopts no abandoned
// segment beyond one per other running thread: a thread that starts beside
// it adopts the one left instead of mapping a fresh segment (larson, two
// threads a generation: each fresh segment cost ~270 page faults).
TEST(Threads, AHeapWithCommittedPagesLeavesAnAbandonedSegmentToAnotherThread) {
  ak_collect(true);
  ak_free(ak_malloc(16));  // this thread has a heap: two running with t1
  ak_malloc_stats s;
  ak_malloc_stats_get(&s);
  ASSERT_EQ(s.abandoned, 0u);
  // Two threads that run at once exit, each leaving a segment with live
  // 48-byte blocks and free pages that held 1000-byte blocks (committed).
  std::vector<void *> kept[2];
  exit_two_threads_with_a_segment_each(kept, true);
  ak_malloc_stats_get(&s);
  ASSERT_EQ(s.abandoned, 2u);
  auto [abandoned_after_t1, maps_beside] = abandoned_after_and_maps_beside([] {
    return std::vector<void *>{ak_malloc(48),     // no segment yet: adopts one
                               ak_malloc(3000)};  // a new class, committed free pages at hand
  });
  EXPECT_EQ(abandoned_after_t1, 1u) << "the second segment was left to another thread";
  EXPECT_EQ(maps_beside, 0u) << "a thread beside t1 mapped a fresh segment";
  for (auto &k : kept)
    for (void *p : k) ak_free(p);
  ak_collect(true);
}

// Frees from a thread without a heap go on the remote lists of an
// abandoned segment; ak_collect (here from that thread) settles them and
// releases the segment: nothing stays stranded.
TEST(Threads, RemoteFreesIntoAbandonedSegmentsAreCollected) {
  ak_collect(true);
  size_t before = committed();
  std::vector<void *> blocks(5000);
  std::thread([&] {
    for (size_t i = 0; i < blocks.size(); i++) blocks[i] = ak_malloc(16 + i % 700);
  }).join();
  ak_malloc_stats s;
  std::thread([&] {  // never allocates through arenakit: no heap
    for (void *p : blocks) ak_free(p);
    ak_collect(true);
    ak_malloc_stats_get(&s);
  })
      .join();
  EXPECT_EQ(s.abandoned, 0u);
  EXPECT_LE(committed(), before + AK_SEG_SIZE);
}

TEST(Threads, AllocationInThreadDestructors) {
  static pthread_key_t key;
  static std::atomic<int> ran{0};
  ASSERT_EQ(pthread_key_create(&key,
                               [](void *p) {
                                 ak_free(p);
                                 void *q = ak_malloc(100);  // malloc after the heap was handed back
                                 std::memset(q, 1, 100);
                                 ak_free(q);
                                 ran++;
                               }),
            0);
  ran = 0;
  std::thread([] { pthread_setspecific(key, ak_malloc(50)); }).join();
  EXPECT_EQ(ran.load(), 1);
  pthread_key_delete(key);
}

TEST(Fork, ChildAllocatesAndFreesBlocksFromBeforeTheFork) {
  std::vector<char *> before;
  for (int i = 0; i < 1000; i++) {
    before.push_back(static_cast<char *>(ak_malloc(100)));
    std::strcpy(before.back(), "before fork");
  }
  std::atomic<bool> stop{false};
  std::thread busy([&] {  // another thread allocating while we fork
    while (!stop) ak_free(ak_malloc(64));
  });
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int ok = 1;
    for (char *p : before) ok &= std::strcmp(p, "before fork") == 0;
    for (char *p : before) ak_free(p);
    std::vector<void *> v;
    for (int i = 0; i < 100000; i++) v.push_back(ak_malloc(static_cast<size_t>(i % 3000) + 1));
    for (void *p : v) ak_free(p);
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  stop = true;
  busy.join();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  for (char *p : before) ak_free(p);
}

// Full pages: a page that ran out of blocks stays on its class's full list
// while frees refill it, and comes back to serve allocations once a run of
// its blocks is free - not after each free (a page going back and forth
// for every block would take the slow paths on every call). Run in a
// thread of their own, with a size class (3 KiB blocks, 21 to a 64 KiB
// page) that the other tests do not leave half used in this heap.
namespace {
constexpr size_t kPageBlock = 2900, kPerPage = 21;
uintptr_t page_of(const void *p) { return reinterpret_cast<uintptr_t>(p) >> 16; }
}  // namespace

TEST(MallocPages, OneFreeIntoAFullPageDoesNotTakeOverFromTheCurrentPage) {
  std::thread([] {
    std::vector<void *> v;
    for (size_t i = 0; i < 3 * kPerPage + 5; i++) v.push_back(ak_malloc(kPageBlock));
    void *last = v.back();                         // on the page being allocated from
    ASSERT_NE(page_of(v.front()), page_of(last));  // the first block's page is full
    void *first = v.front();
    ak_free(first);
    void *next = ak_malloc(kPageBlock);
    EXPECT_NE(next, first);
    EXPECT_EQ(page_of(next), page_of(last));
    v.front() = next;
    for (void *p : v) ak_free(p);
  }).join();
}

// A full page with as many free blocks as a carve of the current page
// would hand out (blocks of this class: one or two per 4 KiB) comes back
// before the carve, which would touch memory not touched yet, even with
// fewer than an eighth of its blocks free.
TEST(MallocPages, AFullPageWithACarvesWorthFreeComesBackBeforeACarve) {
  std::thread([] {
    std::vector<void *> v;
    for (size_t i = 0; i < 2 * kPerPage + 3; i++) v.push_back(ak_malloc(kPageBlock));
    uintptr_t full = page_of(v.front());
    ASSERT_NE(full, page_of(v.back()));  // the first block's page is full
    ak_free(v[0]);                       // two of its 21 blocks free: fewer than an eighth
    ak_free(v[1]);
    size_t from_full = 0;
    for (size_t i = 0; i < 4; i++) {
      void *p = ak_malloc(kPageBlock);
      from_full += page_of(p) == full;
      v.push_back(p);
    }
    EXPECT_GE(from_full, 1u) << "the current page carved on while the full page had two blocks free";
    for (size_t i = 2; i < v.size(); i++) ak_free(v[i]);
  }).join();
}

TEST(MallocPages, RefilledFullPagesAreReusedBeforeFreshSpans) {
  std::thread([] {
    std::vector<void *> v;
    for (size_t i = 0; i < 8 * kPerPage; i++) v.push_back(ak_malloc(kPageBlock));
    std::vector<uintptr_t> pages;
    for (void *p : v) pages.push_back(page_of(p));
    std::sort(pages.begin(), pages.end());
    for (size_t i = 0; i < v.size(); i += 2) {
      ak_free(v[i]);
      v[i] = nullptr;
    }
    // As many blocks as were freed: every one comes from a page in use.
    size_t on_old_pages = 0;
    std::vector<void *> again;
    for (size_t i = 0; i < v.size(); i += 2) {
      void *p = ak_malloc(kPageBlock);
      again.push_back(p);
      on_old_pages += std::binary_search(pages.begin(), pages.end(), page_of(p));
    }
    EXPECT_EQ(on_old_pages, again.size());
    for (void *p : again) ak_free(p);
    for (void *p : v) ak_free(p);
  }).join();
}

TEST(MemoryReturn, BurstThenFreeGoesBackToBaseline) {
  ak_collect(true);
  size_t base = committed();
  std::vector<void *> v;
  for (int i = 0; i < 400000; i++) v.push_back(ak_malloc(static_cast<size_t>(16 + i % 1000)));
  size_t peak = committed();
  EXPECT_GT(peak, base + (size_t{100} << 20));
  std::shuffle(v.begin(), v.end(), std::mt19937(5));
  for (void *p : v) ak_free(p);
  ak_collect(true);
  EXPECT_LE(committed(), base + (size_t{8} << 20)) << "peak " << peak << " base " << base;
}

// Purge policy: free pages stay committed while their segment is busy and
// are decommitted once it has been quiet for the delay (for this running
// thread's segment, the reclaim policy's purge delay).
TEST(MemoryReturn, QuietSegmentsArePurgedAfterTheDelay) {
  long old = ak_option_get(AK_OPTION_PURGE_DELAY), old_purge, old_release;
  ak_reclaim_get_delays(&old_purge, &old_release);
  ak_option_set(AK_OPTION_PURGE_DELAY, 20);
  ASSERT_EQ(ak_reclaim_set_delays(20, 1000), 0);
  ak_collect(true);
  void *keep = ak_malloc(100000);  // keeps the segment of the blocks below
  std::vector<void *> v;
  for (int i = 0; i < 3; i++) {
    v.push_back(ak_malloc(size_t{1} << 20));
    std::memset(v.back(), 1, size_t{1} << 20);
  }
  for (void *p : v) ak_free(p);
  size_t freed = committed();
  ak_collect(false);  // a tick: the free pages start to age, nothing goes yet
  EXPECT_GE(committed(), freed) << "pages freed just now are not purged";
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  ak_collect(false);  // free for a whole delay: decommitted
  EXPECT_LE(committed() + (size_t{3} << 20), freed) << "3 MiB freed 60 ms ago are purged";
  ak_free(keep);
  ak_option_set(AK_OPTION_PURGE_DELAY, old);
  ak_reclaim_set_delays(old_purge, old_release);
}

// Idle return: once the purge delays have passed, the next calls that
// reach a slow path (here one block allocated and freed over and over) give
// back the free pages of the heap's segments (AK_PURGE_DELAY) and of the
// spare empty segments (the reclaim policy's purge delay), without
// ak_collect.
TEST(MemoryReturn, FreedMemoryGoesBackAfterTheDelayWithoutCollect) {
  long old = ak_option_get(AK_OPTION_PURGE_DELAY), old_purge, old_release;
  ak_reclaim_get_delays(&old_purge, &old_release);
  ak_option_set(AK_OPTION_PURGE_DELAY, 25);
  ASSERT_EQ(ak_reclaim_set_delays(25, 1000), 0);
  ak_collect(true);
  ak_free(ak_malloc(1024));
  size_t base = committed();
  std::vector<void *> v;
  for (int i = 0; i < 64 * 1024; i++) {  // 64 MiB of 1 KiB blocks
    v.push_back(ak_malloc(1024));
    std::memset(v.back(), 1, 1024);
  }
  for (void *p : v) ak_free(p);
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  for (int i = 0; i < 20000; i++) ak_free(ak_malloc(1024));
  EXPECT_LE(committed(), base + (size_t{256} << 10)) << "base " << base;
  ak_option_set(AK_OPTION_PURGE_DELAY, old);
  ak_reclaim_set_delays(old_purge, old_release);
}

TEST(Stats, AddUpAndPrint) {
  ak_collect(true);
  ak_malloc_stats a;
  ak_malloc_stats_get(&a);
  std::vector<void *> v;
  for (int i = 0; i < 1000; i++) v.push_back(ak_malloc(100));  // class of 112 bytes
  void *big = ak_malloc(8 << 20);                              // above AK_SOLO_MAX: a large block
  ak_malloc_stats b;
  ak_malloc_stats_get(&b);
  EXPECT_EQ(b.version, AK_MALLOC_STATS_VERSION);
  EXPECT_EQ(b.allocated - a.allocated, 1000u * 112 + b.large_bytes - a.large_bytes);
  EXPECT_EQ(b.large_blocks, a.large_blocks + 1);
  unsigned c = _ak_size_class(100);
  EXPECT_EQ(b.class_size[c], 112u);
  EXPECT_EQ(b.class_blocks[c] - a.class_blocks[c], 1000u);
  EXPECT_GE(b.peak_allocated, b.allocated);
  EXPECT_GE(b.committed, b.allocated);
  char buf[16384] = {0};
  FILE *f = fmemopen(buf, sizeof buf, "w");
  ASSERT_EQ(ak_malloc_stats_print(f), 0);
  fclose(f);
  EXPECT_NE(std::string(buf).find("allocated"), std::string::npos);
  for (void *p : v) ak_free(p);
  ak_free(big);
}

// The peak counts large blocks and their reallocs (it read 16 B after
// 64 MiB of large realloc traffic).
TEST(Stats, PeakCountsLargeBlocksAndRealloc) {
  void *p = ak_malloc(size_t{5} << 20);
  for (size_t n = size_t{6} << 20; n <= (size_t{64} << 20); n += size_t{2} << 20) p = ak_realloc(p, n);
  ak_free(p);
  ak_malloc_stats s;
  ak_malloc_stats_get(&s);
  EXPECT_GE(s.peak_allocated, size_t{64} << 20);
}

TEST(Options, DefaultsAndSet) {
  EXPECT_EQ(ak_option_get(AK_OPTION_PURGE_DELAY),
            getenv("AK_PURGE_DELAY") ? atol(getenv("AK_PURGE_DELAY")) : 10);
  long old = ak_option_get(AK_OPTION_PURGE_DELAY);
  ak_option_set(AK_OPTION_PURGE_DELAY, 0);
  EXPECT_EQ(ak_option_get(AK_OPTION_PURGE_DELAY), 0);
  ak_option_set(AK_OPTION_PURGE_DELAY, old);
  errno = 0;
  ak_option bogus;
  int v = 99;
  std::memcpy(&bogus, &v, sizeof v);
  ak_option_set(bogus, 1);
  EXPECT_EQ(errno, EINVAL);
}

#if AK_CHECKED
TEST(MallocCheckedDeathTest, DoubleFree) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        void *p = ak_malloc(48);
        ak_free(p);
        ak_free(p);
      },
      "free\\(0x[0-9a-f]+\\): double free \\(size class [0-9]+, 48-byte blocks\\)");
}

TEST(MallocCheckedDeathTest, InvalidPointer) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  static char not_heap[64];
  EXPECT_DEATH(ak_free(not_heap + 16), "invalid pointer");
  EXPECT_DEATH(
      {
        char *p = static_cast<char *>(ak_malloc(64));
        ak_free(p + 8);
      },
      "not the start of a block\\) \\(size class [0-9]+, 64-byte blocks\\)");
}

TEST(MallocCheckedDeathTest, WriteAfterFree) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        auto *p = static_cast<char *>(ak_malloc(96));
        ak_free(p);
        p[40] = 1;  // write after free
        for (int i = 0; i < 100; i++) (void)!ak_malloc(96);
      },
      "write after free detected");
}
#endif

}  // namespace
