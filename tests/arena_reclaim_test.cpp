// SPDX-License-Identifier: MIT
// The arena's retained chunks under the reclaim policy (arenakit/reclaim.h),
// with a fake clock: after a clear they stay mapped and committed for
// reuse; once unused for the purge delay, the next slow path decommits
// their pages (RSS falls, the chunks stay reserved and are reused).
#include <gtest/gtest.h>

#include <cstring>

#include "arenakit/arena.h"
#include "reclaim_testing.h"

namespace {

class ArenaReclaim : public ::testing::Test, public FakeClockTest {
 protected:
  void SetUp() override { use_fake_clock(); }
  void TearDown() override { restore_clock(); }
  // Fills `a` with 32 MiB of written 1 KiB blocks.
  static void fill(ak_arena *a) {
    for (int i = 0; i < 32 * 1024; i++) {
      void *p = ak_arena_alloc(a, 1024, 8);
      ASSERT_NE(p, nullptr);
      std::memset(p, 0x5a, 1024);
    }
  }
};

TEST_F(ArenaReclaim, RetainedChunksAreReusedCommittedBeforeTheDelay) {
  ak_arena a = {};
  fill(&a);
  ak_arena_stats s0;
  ak_arena_stats_get(&a, &s0);
  ak_arena_clear(&a);
  size_t base = rss_bytes();
  g_fake_ms += 50;  // below the purge delay
  fill(&a);
  ak_arena_stats s1;
  ak_arena_stats_get(&a, &s1);
  EXPECT_EQ(s1.reserved, s0.reserved) << "the retained chunks were reused";
  EXPECT_LT(rss_bytes(), base + 1024 * 1024) << "their pages were still committed: no new resident memory";
  ak_arena_destroy(&a);
}

TEST_F(ArenaReclaim, RetainedChunksAreDecommittedAfterTheDelayAndReused) {
  ak_arena a = {};
  fill(&a);
  ak_arena_stats s0;
  ak_arena_stats_get(&a, &s0);
  ak_arena_clear(&a);
  size_t kept = rss_bytes();
  g_fake_ms += 150;  // past the purge delay
  // The slow path that leaves the first chunk runs the policy.
  for (int i = 0; i < 8; i++) ASSERT_NE(ak_arena_alloc(&a, 1024, 8), nullptr);
  size_t purged = rss_bytes();
  EXPECT_LT(purged + 24u * 1024 * 1024, kept)
      << "the spares' pages went back: RSS " << kept << " -> " << purged;
  ak_arena_stats s1;
  ak_arena_stats_get(&a, &s1);
  EXPECT_EQ(s1.reserved, s0.reserved) << "the chunks stay mapped (the arena's retain contract)";
  // Reused: no new chunk, contents written fresh.
  fill(&a);
  ak_arena_stats s2;
  ak_arena_stats_get(&a, &s2);
  EXPECT_EQ(s2.reserved, s0.reserved);
  ak_arena_destroy(&a);
}

TEST_F(ArenaReclaim, RestoredChunksAgeFromTheRestore) {
  ak_arena a = {};
  ASSERT_NE(ak_arena_alloc(&a, 64, 8), nullptr);
  ak_arena_mark m = ak_arena_save(&a);
  g_fake_ms += 10000;  // the chunks are older than the delay before the restore
  fill(&a);
  ak_arena_restore(&a, m);
  size_t kept = rss_bytes();
  for (int i = 0; i < 8; i++) ASSERT_NE(ak_arena_alloc(&a, 1024, 8), nullptr);
  EXPECT_GT(rss_bytes() + 1024 * 1024, kept) << "emptied by the restore just now: kept committed";
  ak_arena_restore(&a, m);
  g_fake_ms += 150;
  for (int i = 0; i < 8; i++) ASSERT_NE(ak_arena_alloc(&a, 1024, 8), nullptr);
  EXPECT_LT(rss_bytes() + 24u * 1024 * 1024, kept) << "unused for the delay since the restore: decommitted";
  ak_arena_destroy(&a);
}

}  // namespace
