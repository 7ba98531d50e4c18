// SPDX-License-Identifier: MIT
// pool_foreign_test.cpp - ak_pool_free of pointers the pool did not hand
// out, and double frees. In the checked and hardened builds a stack,
// static, malloc'd, arena, interior or unmapped pointer, an object of
// another pool and a call on a destroyed pool end with one message naming
// the call, the pointer and the reason, then abort (never SIGSEGV), in
// every sync mode. In every build a double free in a row aborts (a compare
// with the free list's head) instead of handing the object out twice.
#include <gtest/gtest.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include <cstdint>
#include <string>
#include <vector>

#include "arenakit/arenakit.h"

#include "pool_sync_modes.h"

#ifndef AK_CHECKED
#define AK_CHECKED 0
#endif
#ifndef AK_HARDENED
#define AK_HARDENED 0
#endif

namespace {

// The builds that promise a message for every pointer the pool did not
// hand out.
#define REQUIRE_VALIDATION()                                                                          \
  do {                                                                                                \
    if (!AK_CHECKED && !AK_HARDENED) GTEST_SKIP() << "release build: foreign pointers are undefined"; \
  } while (0)

ak_pool *make_pool(ak_sync sync, const char *name = "victim") {
  ak_pool_options o{};
  o.object_size = 48;
  o.sync = sync;
  o.name = name;
  return ak_pool_create(&o);
}

// The start of the expected message: the call and the pointer as %p prints it.
std::string call_re(const void *ptr) {
  char buf[64];
  snprintf(buf, sizeof buf, "ak_pool_free\\(%p\\): ", ptr);
  return buf;
}

std::string not_ours_re(const void *ptr) {
  return call_re(ptr) + "pointer was not allocated by pool 'victim' \\(no slab of it contains the address\\)";
}

char g_static[256];

class PoolForeignDeathTest : public ::testing::TestWithParam<ak_sync> {
 protected:
  void SetUp() override {
    p_ = make_pool(GetParam());
    ASSERT_NE(p_, nullptr);
    // An object live, so the pool has a current slab the pointer is not in.
    live_ = ak_pool_alloc(p_);
    ASSERT_NE(live_, nullptr);
  }
  void TearDown() override {
    if (p_) {
      ak_pool_free(p_, live_);
      ak_pool_destroy(p_);
    }
  }
  ak_pool *p_ = nullptr;
  void *live_ = nullptr;
};

TEST_P(PoolForeignDeathTest, StackPointer) {
  REQUIRE_VALIDATION();
  alignas(16) char local[64];
  EXPECT_DEATH(ak_pool_free(p_, local), not_ours_re(local));
}

TEST_P(PoolForeignDeathTest, StaticPointer) {
  REQUIRE_VALIDATION();
  EXPECT_DEATH(ak_pool_free(p_, g_static + 64), not_ours_re(g_static + 64));
}

TEST_P(PoolForeignDeathTest, MallocPointer) {
  REQUIRE_VALIDATION();
  void *m = malloc(48);
  ASSERT_NE(m, nullptr);
  EXPECT_DEATH(ak_pool_free(p_, m), not_ours_re(m));
  free(m);
}

TEST_P(PoolForeignDeathTest, LargeMallocPointer) {
  REQUIRE_VALIDATION();
  void *m = malloc(1 << 20);  // its own mapping: the masked address may be unmapped
  ASSERT_NE(m, nullptr);
  EXPECT_DEATH(ak_pool_free(p_, m), not_ours_re(m));
  free(m);
}

TEST_P(PoolForeignDeathTest, ArenaPointer) {
  REQUIRE_VALIDATION();
  ak_arena a = {};
  void *m = ak_arena_alloc(&a, 48, 16);
  ASSERT_NE(m, nullptr);
  EXPECT_DEATH(ak_pool_free(p_, m), not_ours_re(m));
  ak_arena_destroy(&a);
}

TEST_P(PoolForeignDeathTest, UnmappedAddress) {
  REQUIRE_VALIDATION();
  // 1 MiB mapped and unmapped again: nothing lives in its middle now.
  void *r = mmap(nullptr, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(r, MAP_FAILED);
  ASSERT_EQ(munmap(r, 1 << 20), 0);
  void *u = (void *)(((uintptr_t)r + (1 << 19)) & ~(uintptr_t)0xffff);
  EXPECT_DEATH(ak_pool_free(p_, u), not_ours_re(u));
}

TEST_P(PoolForeignDeathTest, InteriorPointer) {
  REQUIRE_VALIDATION();
  void *o = ak_pool_alloc(p_);
  ASSERT_NE(o, nullptr);
  void *in = (char *)o + 8;
  EXPECT_DEATH(ak_pool_free(p_, in),
               call_re(in) + "pointer is inside pool 'victim' but not the start of an object");
  ak_pool_free(p_, o);
}

TEST_P(PoolForeignDeathTest, ObjectOfAnotherPool) {
  REQUIRE_VALIDATION();
  ak_pool *q = make_pool(GetParam(), "other");
  ASSERT_NE(q, nullptr);
  void *o = ak_pool_alloc(q);
  ASSERT_NE(o, nullptr);
  EXPECT_DEATH(ak_pool_free(p_, o), call_re(o) + "pointer belongs to pool 'other', not to pool 'victim'");
  ak_pool_free(q, o);
  ak_pool_destroy(q);
}

TEST_P(PoolForeignDeathTest, FreeAfterDestroy) {
  REQUIRE_VALIDATION();
  void *o = ak_pool_alloc(p_);
  ASSERT_NE(o, nullptr);
  ak_pool_free(p_, live_);
  ak_pool_destroy(p_);
  ak_pool *dead = p_;
  p_ = nullptr;
  EXPECT_DEATH(ak_pool_free(dead, o), call_re(o) + "pool 'victim' was destroyed");
}

TEST_P(PoolForeignDeathTest, AllocAfterDestroy) {
  REQUIRE_VALIDATION();
  ak_pool_free(p_, live_);
  ak_pool_destroy(p_);
  ak_pool *dead = p_;
  p_ = nullptr;
  EXPECT_DEATH((void)!ak_pool_alloc(dead), "ak_pool_alloc\\(0x[0-9a-f]+\\): pool 'victim' was destroyed");
}

// Every build: a double free in a row is one compare away (the object is
// the head of its slab's free list, or of the thread's magazine), so it
// aborts instead of putting the object on the list twice and handing it
// out twice.
TEST_P(PoolForeignDeathTest, DoubleFreeInARow) {
  void *o = ak_pool_alloc(p_);
  ASSERT_NE(o, nullptr);
  EXPECT_DEATH(
      {
        ak_pool_free(p_, o);
        ak_pool_free(p_, o);
      },
      call_re(o) + "double free");
  ak_pool_free(p_, o);
}

// The same when the object's slab is not the current one (the inline free
// into another slab's list).
TEST_P(PoolForeignDeathTest, DoubleFreeInARowInAnotherSlab) {
  // Fill three slabs and keep them; free two objects of the first (so its
  // slab has free slots and stays), then free one of them again.
  std::vector<void *> objs;
  for (int i = 0; i < 4000; i++) objs.push_back(ak_pool_alloc(p_));
  void *a = objs[1], *b = objs[2];
  EXPECT_DEATH(
      {
        ak_pool_free(p_, b);
        ak_pool_free(p_, a);
        ak_pool_free(p_, a);
      },
      call_re(a) + "double free");
  for (void *x : objs) ak_pool_free(p_, x);
}

INSTANTIATE_TEST_SUITE_P(AllModes, PoolForeignDeathTest, AK_ALL_SYNC_MODES, ak_sync_mode_name);

}  // namespace
