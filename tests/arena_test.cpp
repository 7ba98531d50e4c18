/* SPDX-License-Identifier: MIT */
// arena_test.cpp - behaviour of the region arena's C API (ak_arena_*).
#include <arenakit/arenakit.h>
#include <errno.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "common/track.h"
#include "os/os_mem.h"
#include "quiet_library.h"

namespace {

constexpr size_t kMiB = 1024 * 1024;

bool aligned(const void *p, size_t align) { return (reinterpret_cast<uintptr_t>(p) & (align - 1)) == 0; }

struct Arena {
  ak_arena a;
  explicit Arena(const ak_arena_options *o = nullptr) { EXPECT_EQ(ak_arena_init(&a, o), 0); }
  ~Arena() { ak_arena_destroy(&a); }
  ak_arena_stats stats() const {
    ak_arena_stats s;
    ak_arena_stats_get(&a, &s);
    return s;
  }
};

// Live blocks must never overlap: check a set of [p, p + n) ranges.
void expect_disjoint(std::vector<std::pair<uintptr_t, size_t>> v) {
  std::sort(v.begin(), v.end());
  for (size_t i = 1; i < v.size(); i++)
    ASSERT_LE(v[i - 1].first + v[i - 1].second, v[i].first)
        << "blocks " << i - 1 << " and " << i << " overlap";
}

size_t os_mapped() {
  _ak_os_counters c;
  _ak_os_get_counters(&c);
  return c.mapped_bytes;
}

TEST(ArenaInit, DefaultsAndNullOptions) {
  Arena t;
  ak_arena_stats s = t.stats();
  EXPECT_EQ(s.reserved, 0u) << "init must not map memory yet";
  EXPECT_EQ(s.chunks, 0u);
  void *p = ak_arena_alloc(&t.a, 16, 16);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(ak_arena_owns(&t.a, p));
  EXPECT_EQ(t.stats().chunks, 1u);
}

TEST(ArenaInit, ZeroFilledAndDestroyedArenasAreUsable) {
  ak_arena a;
  std::memset(&a, 0, sizeof a);
  for (int i = 0; i < 1000; i++) ASSERT_NE(ak_arena_alloc(&a, 32, 8), nullptr);
  ak_arena_stats s;
  ak_arena_stats_get(&a, &s);
  EXPECT_LE(s.chunks, 4u) << "a zero-filled arena uses the default chunk sizes";
  ak_arena_destroy(&a);
  ASSERT_NE(ak_arena_alloc(&a, 32, 8), nullptr) << "a destroyed arena can be used again";
  ak_arena_stats_get(&a, &s);
  EXPECT_EQ(s.chunks, 1u);
  ak_arena_destroy(&a);
}

TEST(ArenaInit, RejectsContradictoryOptions) {
  ak_arena a;
  ak_arena_options o{};
  o.first_chunk = 1 * kMiB;
  o.max_chunk = 64 * 1024;
  errno = 0;
  EXPECT_EQ(ak_arena_init(&a, &o), EINVAL);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_NE(std::string(ak_last_error()).find("ak_arena_init"), std::string::npos);

  char small[16];
  o = ak_arena_options{};
  o.buffer = small;
  o.buffer_size = sizeof small;
  EXPECT_EQ(ak_arena_init(&a, &o), EINVAL);
  o.buffer = nullptr;
  o.buffer_size = 4096;
  EXPECT_EQ(ak_arena_init(&a, &o), EINVAL);
  o = ak_arena_options{};
  int bogus = 3;
  std::memcpy(&o.retain, &bogus, sizeof bogus);
  EXPECT_EQ(ak_arena_init(&a, &o), EINVAL);
  EXPECT_EQ(ak_arena_init(nullptr, nullptr), EINVAL);
}

// Every power-of-two alignment from 1 to 64 KiB, within a chunk, right after
// chunk switches (small first chunk) and in dedicated chunks.
TEST(ArenaAlign, EveryAlignmentEverywhere) {
  ak_arena_options o{};
  o.first_chunk = 4096;
  o.max_chunk = 64 * 1024;  // large threshold = 16 KiB
  Arena t(&o);
  std::vector<std::pair<uintptr_t, size_t>> blocks;
  for (int round = 0; round < 4; round++) {
    for (size_t align = 1; align <= 65536; align *= 2) {
      for (size_t size : {size_t{1}, size_t{7}, size_t{24}, size_t{100}, size_t{3000}, size_t{20000}}) {
        auto *p = static_cast<unsigned char *>(ak_arena_alloc(&t.a, size, align));
        ASSERT_NE(p, nullptr) << "size " << size << " align " << align;
        ASSERT_TRUE(aligned(p, align)) << "size " << size << " align " << align;
        std::memset(p, static_cast<int>(align & 0xff), size);
        blocks.emplace_back(reinterpret_cast<uintptr_t>(p), size);
      }
    }
  }
  expect_disjoint(blocks);
  EXPECT_GT(t.stats().chunks, 3u) << "the sequence should have crossed chunk switches";
}

TEST(ArenaAlign, HugeAlignmentDedicatedChunk) {
  Arena t;
  for (size_t align = 4096; align <= 16 * kMiB; align *= 4) {
    void *p = ak_arena_alloc(&t.a, 10, align);
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(aligned(p, align)) << align;
  }
}

TEST(ArenaAlloc, SizeZeroGivesUniquePointers) {
  Arena t;
  void *a = ak_arena_alloc(&t.a, 0, 1);
  void *b = ak_arena_alloc(&t.a, 0, 1);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a, b);
}

TEST(ArenaAlloc, BadAlignmentIsEinval) {
  Arena t;
  for (size_t align : {size_t{0}, size_t{3}, size_t{6}, size_t{12}, size_t{4097}, SIZE_MAX}) {
    errno = 0;
    EXPECT_EQ(ak_arena_alloc(&t.a, 8, align), nullptr) << align;
    EXPECT_EQ(errno, EINVAL) << align;
    EXPECT_NE(std::string(ak_last_error()).find("ak_arena_alloc"), std::string::npos);
  }
}

TEST(ArenaAlloc, ImpossibleSizesAreEnomem) {
  Arena t;
  ASSERT_NE(ak_arena_alloc(&t.a, 8, 8), nullptr);
  const size_t sizes[] = {SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - 4095, SIZE_MAX / 2 + 1, SIZE_MAX - 64};
  for (size_t size : sizes) {
    for (size_t align : {size_t{1}, size_t{8}, size_t{4096}, size_t{1} << 40}) {
      errno = 0;
      EXPECT_EQ(ak_arena_alloc(&t.a, size, align), nullptr) << size << " " << align;
      EXPECT_EQ(errno, ENOMEM) << size << " " << align;
    }
  }
  // The arena keeps working after the failures.
  void *p = ak_arena_alloc(&t.a, 64, 64);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(ak_arena_owns(&t.a, p));
}

TEST(ArenaAlloc, LargeRequestKeepsCurrentChunk) {
  ak_arena_options o{};
  o.max_chunk = 64 * 1024;
  Arena t(&o);
  auto *a = static_cast<char *>(ak_arena_alloc(&t.a, 64, 8));
  void *big = ak_arena_alloc(&t.a, 1 * kMiB, 8);
  auto *b = static_cast<char *>(ak_arena_alloc(&t.a, 64, 8));
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(b, a + 64) << "a dedicated chunk must not abandon the current chunk";
}

TEST(ArenaChunks, GrowGeometricallyToTheCap) {
  ak_arena_options o{};
  o.first_chunk = 4096;
  o.max_chunk = 1 * kMiB;
  Arena t(&o);
  // 8 MiB of 64-byte allocations: doubling 4K..1M then 1M chunks.
  for (int i = 0; i < 8 * 1024 * 16; i++) ASSERT_NE(ak_arena_alloc(&t.a, 64, 8), nullptr);
  ak_arena_stats s = t.stats();
  EXPECT_LE(s.chunks, 9u + 8u) << "doubling keeps the chunk count logarithmic then linear in MiB";
  EXPECT_LT(s.reserved, 12 * kMiB);
  EXPECT_EQ(s.requested, size_t{8} * kMiB);
}

TEST(ArenaModel, RandomSequencesKeepContents) {
  std::mt19937_64 rng(12345);
  for (int iter = 0; iter < 20; iter++) {
    ak_arena_options o{};
    o.first_chunk = 4096;
    o.max_chunk = 256 * 1024;
    Arena t(&o);
    struct Block {
      unsigned char *p;
      size_t n;
      unsigned char fill;
    };
    std::vector<Block> live;
    std::vector<ak_arena_mark> marks;
    std::vector<size_t> mark_live;
    for (int op = 0; op < 3000; op++) {
      unsigned r = static_cast<unsigned>(rng() % 100);
      if (r < 85) {
        size_t n = (rng() % 4 == 0) ? rng() % 70000 : rng() % 200;
        size_t align = size_t{1} << (rng() % 13);
        auto *p = static_cast<unsigned char *>(ak_arena_alloc(&t.a, n, align));
        ASSERT_NE(p, nullptr);
        ASSERT_TRUE(aligned(p, align));
        auto fill = static_cast<unsigned char>(rng());
        std::memset(p, fill, n);
        live.push_back({p, n, fill});
      } else if (r < 92) {
        marks.push_back(ak_arena_save(&t.a));
        mark_live.push_back(live.size());
      } else if (r < 98 && !marks.empty()) {
        size_t k = rng() % marks.size();
        ak_arena_restore(&t.a, marks[k]);
        live.resize(mark_live[k]);
        marks.resize(k);
        mark_live.resize(k);
      } else if (r >= 98) {
        ak_arena_clear(&t.a);
        live.clear();
        marks.clear();
        mark_live.clear();
      }
    }
    std::vector<std::pair<uintptr_t, size_t>> ranges;
    size_t requested = 0;
    for (const Block &b : live) {
      for (size_t i = 0; i < b.n; i++) ASSERT_EQ(b.p[i], b.fill) << "contents changed";
      ranges.emplace_back(reinterpret_cast<uintptr_t>(b.p), b.n);
      requested += b.n;
      if (b.n) {
        ASSERT_TRUE(ak_arena_owns(&t.a, b.p));
      }
    }
    expect_disjoint(ranges);
    EXPECT_EQ(t.stats().requested, requested);
    EXPECT_GE(t.stats().used, requested);
  }
}

TEST(ArenaClear, ReusesMemoryWithoutNewChunks) {
  Arena t;
  for (int i = 0; i < 100000; i++) ASSERT_NE(ak_arena_alloc(&t.a, 24, 8), nullptr);
  ak_arena_stats before = t.stats();
  ak_arena_clear(&t.a);
  EXPECT_EQ(t.stats().requested, 0u);
  EXPECT_EQ(t.stats().used, 0u);
  EXPECT_EQ(t.stats().reserved, before.reserved) << "retain-used keeps every chunk the cycle used";
  for (int i = 0; i < 100000; i++) ASSERT_NE(ak_arena_alloc(&t.a, 24, 8), nullptr);
  EXPECT_EQ(t.stats().reserved, before.reserved) << "the second cycle must reuse the chunks";
  EXPECT_EQ(t.stats().chunks, before.chunks);
}

TEST(ArenaClear, CyclesOfLargeAllocationsStayBounded) {
  ak_arena_options o{};
  o.max_chunk = 16 * kMiB;  // requests above 4 MiB get dedicated chunks
  Arena t(&o);
  size_t biggest_cycle = 0;  // the most one cycle asks for
  for (int cycle = 0; cycle < 50; cycle++) {
    size_t large = (4 + static_cast<size_t>(cycle % 7)) * kMiB + 123;
    for (int i = 0; i < 8; i++) ASSERT_NE(ak_arena_alloc(&t.a, large, 64), nullptr);
    for (int i = 0; i < 1000; i++)
      ASSERT_NE(ak_arena_alloc(&t.a, 100 + static_cast<size_t>(cycle), 8), nullptr);
    biggest_cycle = std::max(biggest_cycle, t.stats().used);
    ak_arena_clear(&t.a);
  }
  EXPECT_LE(t.stats().peak_reserved, biggest_cycle + biggest_cycle / 8 + kMiB)
      << "clear must not let memory grow over cycles";
  EXPECT_LT(t.stats().reserved, 1 * kMiB) << "dedicated chunks are released by clear";
}

// Cycles of a few MiB with random sizes (the soak's arena mix): a request
// that does not fit the kept chunks maps a new one. Its size follows the
// last cycle's use, so what the arena holds stays a small multiple of one
// cycle however many cycles run; a growth step kept across clears doubled
// with every overflow and the arena ended up holding chunks of tens of MiB.
TEST(ArenaClear, RandomCyclesDoNotGrowTheChunks) {
  Arena t;  // default options: chunks from 4 KiB up to 256 MiB
  std::mt19937_64 rng(7);
  size_t biggest_cycle = 0;
  for (int cycle = 0; cycle < 200; cycle++) {
    size_t asked = 0;
    while (asked < 3 * kMiB) {
      unsigned k = static_cast<unsigned>(rng() % 10000);
      size_t n = k < 8000 ? rng() % 256 : k < 9960 ? 257 + rng() % 16000 : 16385 + rng() % (2 * kMiB);
      ASSERT_NE(ak_arena_alloc(&t.a, n, 8), nullptr);
      asked += n;
    }
    biggest_cycle = std::max(biggest_cycle, t.stats().used);
    ak_arena_clear(&t.a);
  }
  EXPECT_LE(t.stats().peak_reserved, 3 * biggest_cycle)
      << "the chunks an arena holds must follow one cycle's use, not the number of cycles";
}

TEST(ArenaClear, RetainPolicies) {
  ak_arena_options o{};
  o.max_chunk = 256 * 1024;
  o.retain = AK_ARENA_RETAIN_NONE;
  {
    Arena t(&o);
    for (int i = 0; i < 50000; i++) ASSERT_NE(ak_arena_alloc(&t.a, 32, 8), nullptr);
    ak_arena_clear(&t.a);
    EXPECT_EQ(t.stats().reserved, 0u);
    EXPECT_EQ(t.stats().chunks, 0u);
    EXPECT_NE(ak_arena_alloc(&t.a, 32, 8), nullptr);
  }
  o.retain = AK_ARENA_RETAIN_LIMIT;
  o.retain_limit = 300 * 1024;
  {
    Arena t(&o);
    for (int i = 0; i < 100000; i++) ASSERT_NE(ak_arena_alloc(&t.a, 32, 8), nullptr);
    ASSERT_GT(t.stats().reserved, o.retain_limit);
    ak_arena_clear(&t.a);
    EXPECT_LE(t.stats().reserved, o.retain_limit);
    EXPECT_GT(t.stats().reserved, 0u);
  }
  o.retain = AK_ARENA_RETAIN_USED;
  {
    // A chunk unused for a whole cycle is released at the next clear.
    Arena t(&o);
    for (int i = 0; i < 100000; i++) ASSERT_NE(ak_arena_alloc(&t.a, 32, 8), nullptr);
    size_t big = t.stats().reserved;
    ak_arena_clear(&t.a);
    EXPECT_EQ(t.stats().reserved, big);
    ASSERT_NE(ak_arena_alloc(&t.a, 32, 8), nullptr);
    ak_arena_clear(&t.a);
    EXPECT_LT(t.stats().reserved, big / 4);
  }
}

TEST(ArenaMark, RestoreUnwindsAndReuses) {
  Arena t;
  auto *keep = static_cast<char *>(ak_arena_alloc(&t.a, 100, 8));
  std::memset(keep, 'k', 100);
  ak_arena_stats s0 = t.stats();
  ak_arena_mark m = ak_arena_save(&t.a);
  void *first = ak_arena_alloc(&t.a, 64, 8);
  for (int i = 0; i < 50000; i++) ASSERT_NE(ak_arena_alloc(&t.a, 48, 16), nullptr);
  ASSERT_NE(ak_arena_alloc(&t.a, 80 * kMiB, 8), nullptr);  // above max_chunk / 4: dedicated
  size_t chunks_at_peak = t.stats().chunks;
  ak_arena_restore(&t.a, m);
  EXPECT_EQ(t.stats().requested, s0.requested);
  EXPECT_EQ(t.stats().used, s0.used);
  EXPECT_EQ(t.stats().chunks, chunks_at_peak - 1) << "the dedicated chunk goes, regular chunks stay";
  EXPECT_EQ(ak_arena_alloc(&t.a, 64, 8), first) << "the space after the mark is reused";
  for (int i = 0; i < 100; i++) EXPECT_EQ(keep[i], 'k');
}

TEST(ArenaMark, MarkOnFreshArena) {
  Arena t;
  ak_arena_mark m = ak_arena_save(&t.a);
  for (int i = 0; i < 1000; i++) ASSERT_NE(ak_arena_alloc(&t.a, 100, 8), nullptr);
  ak_arena_restore(&t.a, m);
  EXPECT_EQ(t.stats().used, 0u);
  EXPECT_NE(ak_arena_alloc(&t.a, 8, 8), nullptr);
}

std::vector<int> g_order;
void record(void *arg) { g_order.push_back(static_cast<int>(reinterpret_cast<intptr_t>(arg))); }

TEST(ArenaDefer, CleanupsRunNewestFirstAtClearRestoreDestroy) {
  g_order.clear();
  {
    Arena t;
    for (intptr_t i = 1; i <= 3; i++) ASSERT_EQ(ak_arena_defer(&t.a, record, reinterpret_cast<void *>(i)), 0);
    ak_arena_mark m = ak_arena_save(&t.a);
    for (intptr_t i = 4; i <= 5; i++) ASSERT_EQ(ak_arena_defer(&t.a, record, reinterpret_cast<void *>(i)), 0);
    ak_arena_restore(&t.a, m);
    EXPECT_EQ(g_order, (std::vector<int>{5, 4}));
    ak_arena_clear(&t.a);
    EXPECT_EQ(g_order, (std::vector<int>{5, 4, 3, 2, 1}));
    ASSERT_EQ(ak_arena_defer(&t.a, record, reinterpret_cast<void *>(6)), 0);
  }
  EXPECT_EQ(g_order, (std::vector<int>{5, 4, 3, 2, 1, 6})) << "destroy runs what is left";
  ak_arena a;
  ASSERT_EQ(ak_arena_init(&a, nullptr), 0);
  errno = 0;
  EXPECT_EQ(ak_arena_defer(&a, nullptr, nullptr), EINVAL);
  EXPECT_EQ(errno, EINVAL);
  ak_arena_destroy(&a);
}

TEST(ArenaBudget, CheckedOnEveryAllocation) {
  ak_arena_options o{};
  o.max_bytes = 1000;
  Arena t(&o);
  for (int i = 0; i < 10; i++) ASSERT_NE(ak_arena_alloc(&t.a, 96, 1), nullptr) << i;
  ASSERT_NE(ak_arena_alloc(&t.a, 33, 1), nullptr) << "33 bytes use 40: exactly the budget";
  errno = 0;
  EXPECT_EQ(ak_arena_alloc(&t.a, 1, 1), nullptr) << "the budget is exhausted within the first chunk";
  EXPECT_EQ(errno, ENOMEM);
  EXPECT_EQ(t.stats().used, 1000u);
  EXPECT_LE(t.stats().reserved, 8192u) << "a small budget maps a small chunk";
  ak_arena_clear(&t.a);
  EXPECT_NE(ak_arena_alloc(&t.a, 1000, 1), nullptr) << "clear restores the budget";
  EXPECT_EQ(ak_arena_alloc(&t.a, 1, 1), nullptr);
}

TEST(ArenaBudget, LargeAndPaddingCount) {
  ak_arena_options o{};
  o.max_bytes = 10 * kMiB;
  o.max_chunk = 1 * kMiB;
  Arena t(&o);
  ASSERT_NE(ak_arena_alloc(&t.a, 9 * kMiB, 8), nullptr);
  errno = 0;
  EXPECT_EQ(ak_arena_alloc(&t.a, 2 * kMiB, 8), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  size_t n = 0;
  while (ak_arena_alloc(&t.a, 1000, 64) != nullptr) n++;
  EXPECT_EQ(errno, ENOMEM);
  EXPECT_LE(t.stats().used, o.max_bytes);
  EXPECT_GE(t.stats().used, o.max_bytes - 2000);
  EXPECT_GT(n, 900u);
}

TEST(ArenaBuffer, CallerBufferUsedFirstNeverFreed) {
  alignas(64) static unsigned char buf[8192];
  ak_arena_options o{};
  o.buffer = buf;
  o.buffer_size = sizeof buf;
  _ak_arena_cache_drain();
  size_t mapped0 = os_mapped();
  {
    Arena t(&o);
    auto *p = static_cast<unsigned char *>(ak_arena_alloc(&t.a, 100, 8));
    ASSERT_GE(p, buf);
    ASSERT_LE(p + 100, buf + sizeof buf);
    EXPECT_EQ(t.stats().reserved, 0u);
    EXPECT_EQ(os_mapped(), mapped0);
    for (int i = 0; i < 1000; i++) ASSERT_NE(ak_arena_alloc(&t.a, 100, 8), nullptr);
    EXPECT_GT(t.stats().reserved, 0u) << "overflow goes to OS chunks";
    ak_arena_clear(&t.a);
    auto *q = static_cast<unsigned char *>(ak_arena_alloc(&t.a, 100, 8));
    EXPECT_EQ(q, p) << "after clear the buffer is used first again";
  }
  _ak_arena_cache_drain();  // the chunks wait there for another arena
  EXPECT_EQ(os_mapped(), mapped0);
  buf[0] = 1;  // still ours
}

TEST(ArenaHelpers, ZallocArraysStrings) {
  Arena t;
  auto *z = static_cast<unsigned char *>(ak_arena_zalloc(&t.a, 1000, 16));
  ASSERT_NE(z, nullptr);
  for (int i = 0; i < 1000; i++) ASSERT_EQ(z[i], 0);
  double *d = AK_ARENA_NEW(&t.a, double);
  ASSERT_NE(d, nullptr);
  EXPECT_TRUE(aligned(d, alignof(double)));
  int *arr = AK_ARENA_NEW_ZARRAY(&t.a, int, 100);
  ASSERT_NE(arr, nullptr);
  for (int i = 0; i < 100; i++) ASSERT_EQ(arr[i], 0);
  errno = 0;
  EXPECT_EQ(AK_ARENA_NEW_ARRAY(&t.a, uint64_t, SIZE_MAX / 4), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  EXPECT_NE(std::string(ak_last_error()).find("overflow"), std::string::npos);

  char *s = ak_arena_strdup(&t.a, "hello arena");
  ASSERT_NE(s, nullptr);
  EXPECT_STREQ(s, "hello arena");
  char *s2 = ak_arena_strndup(&t.a, "hello arena", 5);
  EXPECT_STREQ(s2, "hello");
  char *s3 = ak_arena_strndup(&t.a, "hi", 100);
  EXPECT_STREQ(s3, "hi");
  errno = 0;
  EXPECT_EQ(ak_arena_strdup(&t.a, nullptr), nullptr);
  EXPECT_EQ(errno, EINVAL);
}

TEST(ArenaHelpers, ReallocGrowsTopInPlace) {
  Arena t;
  auto *p = static_cast<char *>(ak_arena_alloc(&t.a, 10, 8));
  std::memcpy(p, "0123456789", 10);
  auto *q = static_cast<char *>(ak_arena_realloc(&t.a, p, 10, 100, 8));
  EXPECT_EQ(q, p) << "the top allocation grows in place";
  EXPECT_EQ(std::memcmp(q, "0123456789", 10), 0);
  EXPECT_EQ(t.stats().requested, 100u);
  void *other = ak_arena_alloc(&t.a, 8, 8);
  ASSERT_NE(other, nullptr);
  auto *r = static_cast<char *>(ak_arena_realloc(&t.a, q, 100, 200, 8));
  EXPECT_NE(r, q) << "not at the top any more: moved";
  EXPECT_EQ(std::memcmp(r, "0123456789", 10), 0);
  auto *s = static_cast<char *>(ak_arena_realloc(&t.a, r, 200, 20, 8));
  EXPECT_EQ(s, r) << "shrinking the top stays in place";
  EXPECT_EQ(ak_arena_alloc(&t.a, 1, 1), s + 24)
      << "shrinking the top gives the space back (20 -> 24: granule)";
  errno = 0;
  EXPECT_EQ(ak_arena_realloc(&t.a, s, 20, 40, 3), nullptr);
  EXPECT_EQ(errno, EINVAL);
  auto *n = static_cast<char *>(ak_arena_realloc(&t.a, nullptr, 0, 16, 16));
  EXPECT_NE(n, nullptr);
}

TEST(ArenaStats, AddUp) {
  Arena t;
  size_t req = 0;
  for (int i = 1; i <= 500; i++) {
    ASSERT_NE(ak_arena_alloc(&t.a, static_cast<size_t>(i), 1), nullptr);
    req += static_cast<size_t>(i);
  }
  ak_arena_stats s = t.stats();
  EXPECT_EQ(s.requested, req);
  EXPECT_GE(s.used, req);
  EXPECT_GE(s.reserved, s.used);
  EXPECT_GE(s.peak_reserved, s.reserved);
  EXPECT_GE(s.chunks, 1u);
}

TEST(ArenaDestroy, ReturnsEverythingToTheOs) {
  _ak_arena_cache_drain();
  size_t mapped0 = os_mapped();
  size_t mapped1 = 0;
  {
    Arena t;
    for (int i = 0; i < 200000; i++) ASSERT_NE(ak_arena_alloc(&t.a, 40, 8), nullptr);
    ASSERT_NE(ak_arena_alloc(&t.a, 20 * kMiB, 4096), nullptr);
    mapped1 = os_mapped();
    EXPECT_GT(mapped1, mapped0 + 8 * kMiB);
  }
  // The chunks wait in the cache for the next arena, which maps nothing.
  {
    Arena t;
    for (int i = 0; i < 200000; i++) ASSERT_NE(ak_arena_alloc(&t.a, 40, 8), nullptr);
    ASSERT_NE(ak_arena_alloc(&t.a, 20 * kMiB, 4096), nullptr);
    EXPECT_EQ(os_mapped(), mapped1) << "the second arena took the first one's chunks back";
  }
  _ak_arena_cache_drain();  // the reclaim policy does this after its release delay
  EXPECT_EQ(os_mapped(), mapped0);
  ak_arena a;
  ASSERT_EQ(ak_arena_init(&a, nullptr), 0);
  ak_arena_destroy(&a);
  ak_arena_destroy(&a);  // twice is harmless
}

// ---- fault injection: the OS layer refuses the Nth mapping ----------------
struct FailingOs {
  static inline int countdown = -1;
  static void *map(void *hint, size_t size, void *ctx) {
    if (countdown == 0) {
      errno = ENOMEM;
      return nullptr;
    }
    if (countdown > 0) countdown--;
    return _ak_os_default_hooks().map(hint, size, ctx);
  }
  QuietLibrary quiet;  // first in, last out: no library thread while the hooks change
  _ak_os_hooks saved;
  explicit FailingOs(int n) {
    countdown = n;
    _ak_os_hooks h = _ak_os_default_hooks();
    h.map = map;
    saved = _ak_os_set_hooks(&h);
  }
  ~FailingOs() {
    _ak_arena_cache_drain();
    _ak_os_set_hooks(&saved);
  }
};

TEST(ArenaFaults, EveryMapFailureIsEnomemAndRecoverable) {
  _ak_arena_cache_drain();
  size_t mapped0 = os_mapped();
  for (int n = 0; n < 12; n++) {
    _ak_arena_cache_drain();  // every chunk is mapped: the Nth mapping is the Nth chunk
    Arena t;
    int failures = 0;
    {
      FailingOs f(n);
      for (int i = 0; i < 4000; i++) {
        size_t size = (i % 100 == 99) ? 5 * kMiB : 512;
        errno = 0;
        void *p = ak_arena_alloc(&t.a, size, 8);
        if (!p) {
          EXPECT_EQ(errno, ENOMEM);
          failures++;
          FailingOs::countdown = -1;  // the OS recovers
        } else {
          std::memset(p, 1, std::min<size_t>(size, 4096));
        }
      }
    }
    EXPECT_EQ(failures, 1) << "exactly the injected failure surfaces, n=" << n;
    EXPECT_NE(ak_arena_alloc(&t.a, 100, 8), nullptr);
  }
  _ak_arena_cache_drain();
  EXPECT_EQ(os_mapped(), mapped0) << "nothing leaks after failures";
}

#if AK_TRACK_ASAN
TEST(ArenaAsanDeathTest, UseAfterClearIsReported) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        ak_arena a;
        ak_arena_init(&a, nullptr);
        auto *p = static_cast<volatile long *>(ak_arena_alloc(&a, sizeof(long) * 4, 8));
        p[0] = 1;
        ak_arena_clear(&a);
        long v = p[0];  // use after clear
        (void)v;
      },
      "use-after-poison");
}

TEST(ArenaAsanDeathTest, UseAfterRestoreIsReported) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        ak_arena a;
        ak_arena_init(&a, nullptr);
        ak_arena_mark m = ak_arena_save(&a);
        auto *p = static_cast<volatile long *>(ak_arena_alloc(&a, sizeof(long) * 4, 8));
        ak_arena_restore(&a, m);
        p[1] = 2;
      },
      "use-after-poison");
}

TEST(ArenaAsanDeathTest, OverflowIntoUnallocatedSpaceIsReported) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        ak_arena a;
        ak_arena_init(&a, nullptr);
        auto *p = static_cast<volatile char *>(ak_arena_alloc(&a, 16, 16));
        p[16] = 1;  // one past the last allocation
      },
      "use-after-poison");
}
#endif

}  // namespace
