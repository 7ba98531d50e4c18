// SPDX-License-Identifier: MIT
// arena_badptr_test.cpp - pointers and marks handed back to an arena that it
// did not hand out. The checked and hardened builds end the process with one
// message naming the call, the pointer and the reason, then abort (SIGABRT,
// never SIGSEGV); a normal build's documented behaviour is checked where it
// is defined (a readable foreign block is copied, not diagnosed).
#include <arenakit/arenakit.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <arenakit/arenakit.hpp>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "os/os_mem.h"

namespace {

// tests/CMakeLists.txt defines AK_CHECKED and AK_HARDENED as the library's.

constexpr bool kChecks = AK_CHECKED || AK_HARDENED != 0;

alignas(16) char g_static[256];

void noop(void *) {}

// An address that is not mapped: a page mapped and unmapped again.
void *unmapped_address() {
  void *p = _ak_os_alloc(1 << 16, 1);
  _ak_os_free(p, 1 << 16);
  return p;
}

struct Arena {
  ak_arena a;
  Arena() { EXPECT_EQ(ak_arena_init(&a, nullptr), 0); }
  ~Arena() { ak_arena_destroy(&a); }
};

// The death of the lambda given last (it may hold commas): SIGABRT with
// arenakit's message for `call` and `why`.
#define EXPECT_BAD_POINTER(call, why, ...)                                \
  do {                                                                    \
    auto ak_body_ = __VA_ARGS__;                                          \
    EXPECT_EXIT(ak_body_(), ::testing::KilledBySignal(SIGABRT),           \
                "arenakit: " call "\\((0x[0-9a-f]+|\\(nil\\))\\): " why); \
  } while (0)

// ak_arena_alloc(a, n, 8) for a block the test does not use.
void *take(ak_arena *a, size_t n) {
  void *p = ak_arena_alloc(a, n, 8);
  EXPECT_NE(p, nullptr);
  return p;
}

class ArenaBadPointerDeathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!kChecks) GTEST_SKIP() << "pointers are validated in the checked and hardened builds only";
    GTEST_FLAG_SET(death_test_style, "threadsafe");
  }
};

// realloc of a block from anywhere but this arena: the copy path would read
// it (and fault on an unmapped one); the check reads nothing through it.
TEST_F(ArenaBadPointerDeathTest, ReallocOfForeignPointers) {
  EXPECT_BAD_POINTER("ak_arena_realloc", "pointer not allocated by this arena", [] {
    Arena t;
    char local[64] = {0};
    ak_arena_realloc(&t.a, local, sizeof local, 128, 8);
  });
  EXPECT_BAD_POINTER("ak_arena_realloc", "pointer not allocated by this arena", [] {
    Arena t;
    (void)take(&t.a, 32);
    ak_arena_realloc(&t.a, g_static, 64, 128, 8);
  });
  EXPECT_BAD_POINTER("ak_arena_realloc", "pointer not allocated by this arena", [] {
    Arena t;
    void *m = std::malloc(64);
    ak_arena_realloc(&t.a, m, 64, 128, 8);
  });
  EXPECT_BAD_POINTER("ak_arena_realloc", "pointer not allocated by this arena", [] {
    Arena t, other;
    void *q = ak_arena_alloc(&other.a, 64, 8);
    (void)take(&t.a, 64);
    ak_arena_realloc(&t.a, q, 64, 128, 8);
  });
  EXPECT_BAD_POINTER("ak_arena_realloc", "pointer not allocated by this arena", [] {
    Arena t;
    ak_arena_realloc(&t.a, unmapped_address(), 64, 128, 8);
  });
}

// Blocks the arena took back: a clear, a restore, a dedicated chunk released.
TEST_F(ArenaBadPointerDeathTest, ReallocOfFreedBlocks) {
  EXPECT_BAD_POINTER("ak_arena_realloc", "pointer not allocated by this arena", [] {
    Arena t;
    (void)take(&t.a, 16);
    void *p = ak_arena_alloc(&t.a, 64, 8);
    (void)take(&t.a, 16);
    ak_arena_clear(&t.a);
    (void)take(&t.a, 8);
    ak_arena_realloc(&t.a, p, 64, 128, 8);
  });
  EXPECT_BAD_POINTER("ak_arena_realloc", "pointer not allocated by this arena", [] {
    Arena t;
    ak_arena_mark m = ak_arena_save(&t.a);
    void *big = ak_arena_alloc(&t.a, 128u << 20, 8);  // a dedicated chunk
    ak_arena_restore(&t.a, m);
    ak_arena_realloc(&t.a, big, 64, 128, 8);
  });
  EXPECT_BAD_POINTER("ak_arena_realloc", "the block's size runs past what the arena handed out", [] {
    Arena t;
    void *p = ak_arena_alloc(&t.a, 64, 8);
    (void)take(&t.a, 64);
    ak_arena_realloc(&t.a, p, 1 << 20, 2 << 20, 8);  // old_size past the chunk's used bytes
  });
}

TEST_F(ArenaBadPointerDeathTest, RestoreOfAnotherArenasMark) {
  EXPECT_BAD_POINTER("ak_arena_restore", "mark not taken from this arena", [] {
    Arena t, other;
    (void)take(&t.a, 64);
    (void)take(&other.a, 64);
    ak_arena_restore(&t.a, ak_arena_save(&other.a));
  });
  EXPECT_BAD_POINTER(
      "ak_arena_restore", "mark not from this arena or stale \\(its dedicated chunk is gone\\)", [] {
        Arena t, other;
        (void)take(&t.a, 64);
        ak_arena_mark m = ak_arena_save(&t.a);
        (void)take(&other.a, 64);
        m.large = ak_arena_save(&other.a).chunk;  // a chunk header, not a dedicated chunk of `t`
        ak_arena_restore(&t.a, m);
      });
}

TEST_F(ArenaBadPointerDeathTest, RestoreOfStaleOrForgedMarks) {
  // Restored past: a newer mark after an older one was restored.
  EXPECT_BAD_POINTER("ak_arena_restore", "stale or forged mark", [] {
    Arena t;
    (void)take(&t.a, 64);
    ak_arena_mark older = ak_arena_save(&t.a);
    (void)take(&t.a, 64);
    ak_arena_mark newer = ak_arena_save(&t.a);
    ak_arena_restore(&t.a, older);
    ak_arena_restore(&t.a, newer);
  });
  // Taken before a clear, in a chunk the clear emptied.
  EXPECT_BAD_POINTER("ak_arena_restore", "stale mark \\(the arena was cleared or restored past it\\)", [] {
    Arena t;
    for (int i = 0; i < 100; i++) (void)take(&t.a, 1000);  // several chunks
    ak_arena_mark m = ak_arena_save(&t.a);
    ak_arena_clear(&t.a);
    ak_arena_restore(&t.a, m);
  });
  // Its cleanup record ran already.
  EXPECT_BAD_POINTER("ak_arena_restore", "mark not from this arena or stale \\(its cleanup record is gone\\)",
                     [] {
                       Arena t;
                       ak_arena_mark m0 = ak_arena_save(&t.a);
                       ASSERT_EQ(ak_arena_defer(&t.a, noop, nullptr), 0);
                       ak_arena_mark m1 = ak_arena_save(&t.a);
                       ak_arena_restore(&t.a, m0);
                       m1.chunk = nullptr;  // make the position check pass: only the record is stale
                       m1.ptr = 0;
                       m1.used_before = 0;
                       ak_arena_restore(&t.a, m1);
                     });
  // A position without a chunk, and a chunk pointer that is no chunk at all.
  EXPECT_BAD_POINTER("ak_arena_restore", "forged mark", [] {
    Arena t;
    ak_arena_mark m{};
    m.ptr = reinterpret_cast<uintptr_t>(g_static);
    ak_arena_restore(&t.a, m);
  });
  EXPECT_BAD_POINTER("ak_arena_restore", "mark not taken from this arena", [] {
    Arena t;
    (void)take(&t.a, 64);
    ak_arena_mark m = ak_arena_save(&t.a);
    m.chunk = static_cast<ak_arena_chunk *>(unmapped_address());
    ak_arena_restore(&t.a, m);
  });
}

TEST_F(ArenaBadPointerDeathTest, CppDeallocateOfForeignPointers) {
  EXPECT_BAD_POINTER("ak::arena_allocator::deallocate", "pointer not allocated by this arena", [] {
    ak::arena ar;
    ak::arena_allocator<int> al(ar);
    int local[4] = {0};
    al.deallocate(local, 4);
  });
  EXPECT_BAD_POINTER("ak::arena_allocator::deallocate", "pointer not allocated by this arena", [] {
    ak::arena ar, other;
    ak::arena_allocator<int> al(ar), ol(other);
    int *p = ol.allocate(4);
    (void)al.allocate(4);
    al.deallocate(p, 4);
  });
#if AK_HAS_PMR
  EXPECT_BAD_POINTER("ak::arena_resource::deallocate", "pointer not allocated by this arena", [] {
    ak::arena ar;
    ak::arena_resource r(ar);
    std::pmr::memory_resource &mr = r;
    mr.deallocate(g_static, 64, 8);
  });
#endif
}

// What stays valid in every build: blocks of the arena are accepted, and the
// containers of the C++ layer grow and die without a complaint.
TEST(ArenaHandBack, ValidBlocksAndMarksPass) {
  Arena t;
  void *a = ak_arena_alloc(&t.a, 64, 8);
  ak_arena_mark m = ak_arena_save(&t.a);
  void *b = ak_arena_alloc(&t.a, 64, 8);
  ASSERT_NE(ak_arena_realloc(&t.a, a, 64, 256, 8), nullptr);  // copied: `a` is not the newest
  ASSERT_NE(ak_arena_realloc(&t.a, b, 64, 32, 8), nullptr);
  ak_arena_restore(&t.a, m);
  ak_arena_restore(&t.a, m);  // the same mark twice is fine
  void *big = ak_arena_alloc(&t.a, 64u << 20, 8);
  ASSERT_NE(big, nullptr);
  ASSERT_NE(ak_arena_realloc(&t.a, big, 64u << 20, (64u << 20) + 8, 8), nullptr);
  ak_arena_check_block(&t.a, big, 64u << 20, "test");
  {
    ak::arena ar;
    std::vector<int, ak::arena_allocator<int>> v(ar);
    for (int i = 0; i < 10000; i++) v.push_back(i);
    ak::arena::scope s(ar);
    std::vector<long, ak::arena_allocator<long>> w(ar);
    w.assign(1000, 7);
  }
}

// A normal build does not check a foreign pointer: a readable one is copied.
TEST(ArenaHandBack, ReleaseBuildCopiesAReadableForeignBlock) {
  if (kChecks) GTEST_SKIP() << "the checked and hardened builds abort instead";
  Arena t;
  char local[16] = "fifteen bytes..";
  auto *q = static_cast<char *>(ak_arena_realloc(&t.a, local, sizeof local, 32, 8));
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(std::memcmp(q, local, sizeof local), 0);
}

}  // namespace
