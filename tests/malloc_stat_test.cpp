/* SPDX-License-Identifier: MIT */
// malloc_stat_test.cpp - ak_malloc_stat, the named-key reader of the
// malloc's statistics: every documented name answers, an unknown one gives
// ENOENT, and the cumulative counts follow what the program does.
#include <arenakit/malloc.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace {

uint64_t stat(const char *name) {
  uint64_t v = 0;
  EXPECT_EQ(ak_malloc_stat(name, &v), 0) << name;
  return v;
}

}  // namespace

TEST(MallocStat, EveryDocumentedNameAnswers) {
  const char *names[] = {"allocated",      "peak_allocated",
                         "active",         "committed",
                         "peak_committed", "resident",
                         "mapped",         "allocations",
                         "frees",          "bytes_allocated",
                         "live_blocks",    "segments",
                         "heaps",          "abandoned_segments",
                         "large.blocks",   "large.bytes",
                         "large.cached",   "large.cached_committed",
                         "spare.segments", "spare.segments_committed",
                         "process.rss",    "process.peak_rss"};
  void *keep = ak_malloc(100);
  for (const char *n : names) {
    uint64_t v = UINT64_MAX;
    errno = 0;
    EXPECT_EQ(ak_malloc_stat(n, &v), 0) << n;
    EXPECT_NE(v, UINT64_MAX) << n;
  }
  EXPECT_GT(stat("allocated"), 0u);
  EXPECT_GE(stat("mapped"), stat("segments") * (4u << 20));
  uint64_t rss = stat("process.rss");  // first: the high-water mark read after it covers it
  EXPECT_GE(stat("process.peak_rss"), rss);
  EXPECT_GT(stat("process.rss"), 0u);
  ak_free(keep);
}

TEST(MallocStat, AnUnknownNameIsEnoent) {
  uint64_t v = 42;
  for (const char *n : {"", "stats.allocated", "Allocated", "allocated ", "large", "large.", "bogus"}) {
    errno = 0;
    EXPECT_EQ(ak_malloc_stat(n, &v), -1) << n;
    EXPECT_EQ(errno, ENOENT) << n;
  }
  errno = 0;
  EXPECT_EQ(ak_malloc_stat(nullptr, &v), -1);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_EQ(v, 42u) << "an unknown name leaves the value alone";
  errno = 0;
  EXPECT_EQ(ak_malloc_stat("allocated", nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
}

// A thread's very first block, allocated before its heap exists, counts
// in the bytes as in the blocks.
TEST(MallocStat, AThreadsFirstBlockCountsItsBytes) {
  uint64_t allocs0 = stat("allocations"), bytes0 = stat("bytes_allocated");
  std::thread([] { ak_free(ak_malloc(777)); }).join();
  EXPECT_EQ(stat("allocations") - allocs0, 1u);
  EXPECT_EQ(stat("bytes_allocated") - bytes0, 777u);
}

// 1000 blocks of 100 bytes and a large one: allocations, bytes asked for,
// live blocks and allocated bytes grow by them; after the frees, frees
// grows by them and the live figures come back.
TEST(MallocStat, CumulativeCountsFollowTheProgram) {
  std::vector<void *> blocks(1000);
  ak_free(ak_malloc(1)); /* the thread's heap exists */
  uint64_t allocs0 = stat("allocations"), frees0 = stat("frees"), bytes0 = stat("bytes_allocated");
  uint64_t live0 = stat("live_blocks"), allocated0 = stat("allocated");
  for (void *&b : blocks) b = ak_malloc(100);
  void *large = ak_malloc(8u << 20);
  ASSERT_NE(large, nullptr);
  EXPECT_GE(stat("allocations") - allocs0, 1001u);
  EXPECT_LE(stat("allocations") - allocs0, 1010u);
  EXPECT_GE(stat("bytes_allocated") - bytes0, 100000u + (8u << 20));
  EXPECT_EQ(stat("live_blocks") - live0, 1001u);
  EXPECT_EQ(stat("large.blocks"), 1u);
  EXPECT_GE(stat("allocated") - allocated0, 1000u * 100 + (8u << 20));
  EXPECT_GE(stat("active"), stat("allocated"));
  for (void *b : blocks) ak_free(b);
  ak_free(large);
  EXPECT_GE(stat("frees") - frees0, 1001u);
  EXPECT_EQ(stat("live_blocks"), live0);
  EXPECT_EQ(stat("large.blocks"), 0u);
}
