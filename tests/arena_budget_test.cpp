// SPDX-License-Identifier: MIT
// arena_budget_test.cpp - a failing ak_arena_alloc leaves nothing mapped:
// requests the budget cannot take change neither the arena's chunks nor the
// bytes it holds from the OS, however often they are repeated.
#include <arenakit/arenakit.h>
#include <errno.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>

#include "os/os_mem.h"
#include "quiet_library.h"

namespace {

constexpr size_t kMiB = 1024 * 1024;

ak_arena_stats stats_of(const ak_arena *a) {
  ak_arena_stats s;
  ak_arena_stats_get(a, &s);
  return s;
}

size_t os_mapped() {
  _ak_os_counters c;
  _ak_os_get_counters(&c);
  return c.mapped_bytes;
}

// An arena with a 4096-byte budget of which 4,000 bytes are used.
struct NearlyFull {
  ak_arena a;
  NearlyFull() {
    ak_arena_options o{};
    o.max_bytes = 4096;
    EXPECT_EQ(ak_arena_init(&a, &o), 0);
    EXPECT_NE(ak_arena_alloc(&a, 4000, 8), nullptr);
  }
  ~NearlyFull() { ak_arena_destroy(&a); }
};

// `calls` requests of (size, align) that must all fail with ENOMEM and leave
// the arena's stats and the OS layer's mapped bytes exactly as they were.
void expect_failures_leave_nothing(size_t size, size_t align, int calls) {
  NearlyFull t;
  const ak_arena_stats before = stats_of(&t.a);
  const size_t mapped = os_mapped();
  for (int i = 0; i < calls; i++) {
    errno = 0;
    ASSERT_EQ(ak_arena_alloc(&t.a, size, align), nullptr) << "call " << i;
    ASSERT_EQ(errno, ENOMEM) << "call " << i;
  }
  const ak_arena_stats after = stats_of(&t.a);
  EXPECT_EQ(after.chunks, before.chunks) << "align " << align;
  EXPECT_EQ(after.reserved, before.reserved) << "align " << align;
  EXPECT_EQ(after.peak_reserved, before.peak_reserved) << "nothing was even mapped for a while";
  EXPECT_EQ(after.used, before.used);
  EXPECT_EQ(os_mapped(), mapped) << "align " << align;
  // The arena still works: the bytes left in the budget are usable.
  EXPECT_NE(ak_arena_alloc(&t.a, 96, 8), nullptr);
}

TEST(ArenaBudgetFailure, SmallAlignmentMapsNothing) { expect_failures_leave_nothing(8, 4096, 20000); }

TEST(ArenaBudgetFailure, MegabyteAlignmentMapsNothing) { expect_failures_leave_nothing(8, kMiB, 2000); }

TEST(ArenaBudgetFailure, OverBudgetSizesMapNothing) {
  expect_failures_leave_nothing(200, 8, 2000);
  expect_failures_leave_nothing(64 * kMiB, 8, 200);  // a dedicated chunk's size
}

// An OS layer whose mappings all start at a 1 MiB boundary: a block aligned
// to 1 MiB then needs 1 MiB - 64 bytes of padding in any fresh chunk.
struct MegabyteAlignedOs {
  static void *map(void *hint, size_t size, void *ctx) {
    const _ak_os_hooks sys = _ak_os_default_hooks();
    auto *raw = static_cast<char *>(sys.map(hint, size + kMiB, ctx));
    if (!raw) return nullptr;
    char *p =
        reinterpret_cast<char *>((reinterpret_cast<uintptr_t>(raw) + kMiB - 1) & ~(uintptr_t)(kMiB - 1));
    if (p > raw) sys.unmap(raw, static_cast<size_t>(p - raw), ctx);
    if (p + size < raw + size + kMiB) sys.unmap(p + size, static_cast<size_t>(raw + kMiB - p), ctx);
    return p;
  }
  QuietLibrary quiet;  // first in, last out: no library thread while the hooks change
  _ak_os_hooks saved;
  MegabyteAlignedOs() {
    _ak_os_hooks h = _ak_os_default_hooks();
    h.map = map;
    saved = _ak_os_set_hooks(&h);
  }
  ~MegabyteAlignedOs() {
    _ak_arena_cache_drain();  // chunks mapped through the hook go before it does
    _ak_os_set_hooks(&saved);
  }
};

// A budget that leaves room for the least padding a fresh chunk can need
// (so the request passes the check before mapping) but not for the padding
// the chunk the OS returns does need: each call maps a chunk, finds that the
// block does not fit the budget, and must give the chunk back.
TEST(ArenaBudgetFailure, FailureAfterMappingGivesTheChunkBack) {
  MegabyteAlignedOs os;
  ak_arena_options o{};
  o.max_bytes = 16 * 1024;
  ak_arena a;
  ASSERT_EQ(ak_arena_init(&a, &o), 0);
  ASSERT_NE(ak_arena_alloc(&a, 64, 8), nullptr);
  const ak_arena_stats before = stats_of(&a);
  _ak_arena_cache_drain();
  const size_t mapped = os_mapped();
  for (int i = 0; i < 500; i++) {
    errno = 0;
    ASSERT_EQ(ak_arena_alloc(&a, 8, kMiB), nullptr) << "call " << i;
    ASSERT_EQ(errno, ENOMEM);
  }
  const ak_arena_stats after = stats_of(&a);
  EXPECT_EQ(after.chunks, before.chunks);
  EXPECT_EQ(after.reserved, before.reserved);
  _ak_arena_cache_drain();  // a chunk given back waits in the cache of chunks
  EXPECT_EQ(os_mapped(), mapped);
  EXPECT_NE(ak_arena_alloc(&a, 64, 8), nullptr) << "the arena still works";
  ak_arena_destroy(&a);
}

}  // namespace
