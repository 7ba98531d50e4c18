/* SPDX-License-Identifier: MIT */
// uaf_test.cpp - proof that a user's use after free inside an arena and
// inside a pool is reported by AddressSanitizer: a write and a read after
// ak_pool_free in every sync mode, and after ak_arena_clear.
//
// Active only in a build with ASan (the library poisons what it takes
// back); in any other build every test is skipped (GTEST_SKIP), never
// passed. Valgrind's side of the proof is tests/uaf (memcheck.sh).
//
// A freed pool slot keeps its first word readable by the pool (it holds
// the free-list link), so the pool tests touch a word past it.
#include <arenakit/arenakit.h>
#include <gtest/gtest.h>

#include <string>

#include "common/track.h"

namespace {

#define SKIP_WITHOUT_ASAN()                              \
  if (!AK_TRACK_ASAN)                                    \
  GTEST_SKIP() << "needs a build with AddressSanitizer " \
                  "(-DAK_SANITIZE=address,undefined)"

// ASan's report for memory the library poisoned.
constexpr const char *kReport = "use-after-poison";

const char *sync_name(ak_sync s) {
  switch (s) {
    case AK_SYNC_NONE: return "NONE";
    case AK_SYNC_SPINLOCK: return "SPINLOCK";
    case AK_SYNC_LOCKFREE: return "LOCKFREE";
    case AK_SYNC_THREADS: return "THREADS";
  }
  return "?";
}

class PoolUafDeathTest : public testing::TestWithParam<ak_sync> {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
  // A pool of 64-byte objects in the mode under test, with one object
  // allocated, written, and freed again: `o` is then dangling.
  static volatile long *dangling(ak_pool **out) {
    ak_pool_options opt = {};
    opt.object_size = 64;
    opt.sync = GetParam();
    opt.name = "uaf";
    ak_pool *p = ak_pool_create(&opt);
    if (!p) abort();
    auto *o = static_cast<volatile long *>(ak_pool_alloc(p));
    if (!o) abort();
    for (int i = 0; i < 8; i++) o[i] = i;
    ak_pool_free(p, const_cast<long *>(o));
    *out = p;
    return o;
  }
};

TEST_P(PoolUafDeathTest, WriteAfterFreeIsReported) {
  SKIP_WITHOUT_ASAN();
  EXPECT_DEATH(
      {
        ak_pool *p;
        volatile long *o = dangling(&p);
        o[2] = 42;  // write after ak_pool_free
        ak_pool_destroy(p);
      },
      kReport);
}

TEST_P(PoolUafDeathTest, ReadAfterFreeIsReported) {
  SKIP_WITHOUT_ASAN();
  EXPECT_DEATH(
      {
        ak_pool *p;
        volatile long *o = dangling(&p);
        long v = o[7];  // read after ak_pool_free (the object's last word)
        (void)v;
        ak_pool_destroy(p);
      },
      kReport);
}

// The control: the same steps without the bad access run to completion,
// so the death above comes from the access and nothing else.
TEST_P(PoolUafDeathTest, ControlWithoutTheBugIsClean) {
  SKIP_WITHOUT_ASAN();
  ak_pool *p;
  volatile long *o = dangling(&p);
  (void)o;
  auto *again = static_cast<volatile long *>(ak_pool_alloc(p));
  ASSERT_NE(again, nullptr);
  again[7] = 7;  // a live object is fully usable
  EXPECT_EQ(again[7], 7);
  ak_pool_free(p, const_cast<long *>(again));
  ak_pool_destroy(p);
}

INSTANTIATE_TEST_SUITE_P(AllSyncModes, PoolUafDeathTest,
                         testing::Values(AK_SYNC_NONE, AK_SYNC_SPINLOCK, AK_SYNC_LOCKFREE, AK_SYNC_THREADS),
                         [](const testing::TestParamInfo<ak_sync> &i) {
                           return std::string(sync_name(i.param));
                         });

class ArenaUafDeathTest : public testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

// A block of the arena's current chunk and one of a dedicated (large)
// chunk: after a clear the first is poisoned, the second unmapped.
TEST_F(ArenaUafDeathTest, WriteAfterClearIsReported) {
  SKIP_WITHOUT_ASAN();
  EXPECT_DEATH(
      {
        ak_arena a;
        ak_arena_init(&a, nullptr);
        auto *p = static_cast<volatile long *>(ak_arena_alloc(&a, 8 * sizeof(long), 8));
        p[0] = 1;
        ak_arena_clear(&a);
        p[5] = 2;  // write after clear
        ak_arena_destroy(&a);
      },
      kReport);
}

TEST_F(ArenaUafDeathTest, ReadAfterClearIsReported) {
  SKIP_WITHOUT_ASAN();
  EXPECT_DEATH(
      {
        ak_arena a;
        ak_arena_init(&a, nullptr);
        void *first = ak_arena_alloc(&a, 100, 8);  // the block below is not the chunk's first
        auto *p = static_cast<volatile char *>(ak_arena_alloc(&a, 24, 8));
        if (!first || !p) abort();
        p[23] = 'x';
        ak_arena_clear(&a);
        char c = p[23];  // read after clear
        (void)c;
        ak_arena_destroy(&a);
      },
      kReport);
}

TEST_F(ArenaUafDeathTest, UseAfterClearWithCallerBufferIsReported) {
  SKIP_WITHOUT_ASAN();
  EXPECT_DEATH(
      {
        alignas(16) static char buf[4096];
        ak_arena_options o = {};
        o.buffer = buf;
        o.buffer_size = sizeof buf;
        ak_arena a;
        ak_arena_init(&a, &o);
        auto *p = static_cast<volatile int *>(ak_arena_alloc(&a, 16, 4));
        ak_arena_clear(&a);
        p[1] = 3;  // the caller buffer is poisoned between clears as well
        ak_arena_destroy(&a);
      },
      kReport);
}

TEST_F(ArenaUafDeathTest, ControlWithoutTheBugIsClean) {
  SKIP_WITHOUT_ASAN();
  ak_arena a;
  ASSERT_EQ(ak_arena_init(&a, nullptr), 0);
  auto *p = static_cast<volatile long *>(ak_arena_alloc(&a, 8 * sizeof(long), 8));
  ASSERT_NE(p, nullptr);
  p[5] = 2;
  ak_arena_clear(&a);
  auto *q = static_cast<volatile long *>(ak_arena_alloc(&a, 8 * sizeof(long), 8));
  ASSERT_NE(q, nullptr);
  q[5] = 3;  // memory handed out again after the clear is usable
  EXPECT_EQ(q[5], 3);
  ak_arena_destroy(&a);
}

}  // namespace
