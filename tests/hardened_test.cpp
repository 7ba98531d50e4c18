/* SPDX-License-Identifier: MIT */
// hardened_test.cpp - the hardened build's mitigations (docs/hardening.md),
// each proven by the attack it stops: a forged free-list link, a double
// free, a linear overflow into the guard page, and predictable allocation
// order. In a normal build (AK_HARDENED == 0) the tests skip, saying so;
// scripts/test.sh runs them in its `hardened` stage.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "arenakit/arenakit.h"
#include "os/os_mem.h"

#ifndef AK_HARDENED
#define AK_HARDENED 0
#endif

namespace {

constexpr unsigned kLinks = 1, kGuards = 2, kShuffle = 4, kDoubleFree = 8;

// Skips unless the library was built with mitigation `bit`.
#define REQUIRE_MITIGATION(bit, name)                                                                  \
  do {                                                                                                 \
    if (!(AK_HARDENED & (bit))) GTEST_SKIP() << "needs a hardened build with the " name " mitigation"; \
  } while (0)

const ak_sync kModes[] = {AK_SYNC_NONE, AK_SYNC_SPINLOCK, AK_SYNC_LOCKFREE, AK_SYNC_THREADS};

ak_pool *make_pool(ak_sync sync, size_t size = 48) {
  ak_pool_options o{};
  o.object_size = size;
  o.sync = sync;
  o.name = "hardened";
  return ak_pool_create(&o);
}

TEST(Hardened, ReportsItsMitigations) {
  std::string names = ak_hardening();
  if (AK_HARDENED == 0) {
    EXPECT_EQ(names, "none");
    return;
  }
  EXPECT_EQ(names.find("links") != std::string::npos, (AK_HARDENED & kLinks) != 0);
  EXPECT_EQ(names.find("guards") != std::string::npos, (AK_HARDENED & kGuards) != 0);
  EXPECT_EQ(names.find("shuffle") != std::string::npos, (AK_HARDENED & kShuffle) != 0);
  EXPECT_EQ(names.find("double-free") != std::string::npos, (AK_HARDENED & kDoubleFree) != 0);
}

// A use-after-free write plants a plain pointer (to another slot of the
// same slab, as an attacker would) in a free slot: the next allocation
// must abort instead of handing that slot out.
TEST(HardenedDeathTest, PoolForgedLinkIsDetected) {
  REQUIRE_MITIGATION(kLinks, "links");
  for (ak_sync m : kModes) {
    SCOPED_TRACE(m);
    EXPECT_DEATH(
        {
          ak_pool *p = make_pool(m);
          void *a = ak_pool_alloc(p);
          void *b = ak_pool_alloc(p);
          void *c = ak_pool_alloc(p);
          ak_pool_free(p, b);
          ak_pool_free(p, a);            // a heads the free list, linking to b
          std::memcpy(a, &c, sizeof c);  // forged: a "links" to the live c
          void *x = ak_pool_alloc(p);    // pops a: its link is checked
          void *y = ak_pool_alloc(p);
          std::fprintf(stderr, "not detected: %p %p\n", x, y);
          std::exit(0);
        },
        "corrupted free list");
  }
}

// AK_SYNC_NONE allocates inline from the next slab's list once the current
// slab is full (ak_pool.alt): a forged link there is caught as well.
TEST(HardenedDeathTest, PoolForgedLinkInTheNextSlabIsDetected) {
  REQUIRE_MITIGATION(kLinks, "links");
  EXPECT_DEATH(
      {
        ak_pool *p = make_pool(AK_SYNC_NONE, 16);
        std::vector<void *> v;
        ak_pool_stats st;
        do {  // fill the first slab and put a few objects in a second
          v.push_back(ak_pool_alloc(p));
          ak_pool_stats_get(p, &st);
        } while (st.slabs < 2);
        for (int i = 0; i < 3; i++) v.push_back(ak_pool_alloc(p));
        ak_pool_free(p, v[0]);  // the full first slab is current again
        void *again = ak_pool_alloc(p);
        void *b1 = v[v.size() - 1];
        void *b2 = v[v.size() - 2];
        void *c = v[v.size() - 3];
        ak_pool_free(p, b1);
        ak_pool_free(p, b2);            // b2 heads the second slab's list
        std::memcpy(b2, &c, sizeof c);  // forged: b2 "links" to the live c
        void *x = ak_pool_alloc(p);     // the current slab is full: pops b2
        void *y = ak_pool_alloc(p);
        std::fprintf(stderr, "not detected: %p %p %p\n", again, x, y);
        std::exit(0);
      },
      "corrupted free list");
}

TEST(HardenedDeathTest, MallocForgedLinkIsDetected) {
  REQUIRE_MITIGATION(kLinks, "links");
  EXPECT_DEATH(
      {
        void *a = ak_malloc(48);
        void *b = ak_malloc(48);
        void *c = ak_malloc(48);
        ak_free(b);
        ak_free(a);  // a heads the free list, linking to b
        std::memcpy(a, &c, sizeof c);
        void *x = ak_malloc(48);
        void *y = ak_malloc(48);
        std::fprintf(stderr, "not detected: %p %p\n", x, y);
        std::exit(0);
      },
      "corrupted free list");
}

// a, b, a: the second free of a is not at the head of the list, so only
// the hardened search finds it.
TEST(HardenedDeathTest, PoolDoubleFreeIsDetected) {
  REQUIRE_MITIGATION(kDoubleFree, "double-free");
  for (ak_sync m : kModes) {
    SCOPED_TRACE(m);
    EXPECT_DEATH(
        {
          ak_pool *p = make_pool(m);
          void *a = ak_pool_alloc(p);
          void *b = ak_pool_alloc(p);
          void *keep = ak_pool_alloc(p);
          ak_pool_free(p, a);
          ak_pool_free(p, b);
          ak_pool_free(p, a);
          std::fprintf(stderr, "not detected %p\n", keep);
          std::exit(0);
        },
        "double free.*pool 'hardened'");
  }
}

// The double free of an object in a slab other than the current one (the
// inline free pushes onto such a slab's list when the object's first word
// does not look like a free link).
TEST(HardenedDeathTest, PoolDoubleFreeInAnotherSlabIsDetected) {
  REQUIRE_MITIGATION(kDoubleFree, "double-free");
  for (ak_sync m : kModes)
    for (int which = 0; which < 2; which++) {
      SCOPED_TRACE(m);
      SCOPED_TRACE(which);
      EXPECT_DEATH(
          {
            ak_pool *p = make_pool(m);
            std::vector<void *> v;
            ak_pool_stats st;
            do {  // fill two slabs and start a third
              v.push_back(ak_pool_alloc(p));
              ak_pool_stats_get(p, &st);
            } while (st.slabs < 3);
            const uintptr_t mask = ~uintptr_t{65535};  // the default slab size
            size_t j = 1;
            while ((reinterpret_cast<uintptr_t>(v[j]) & mask) == (reinterpret_cast<uintptr_t>(v[0]) & mask))
              j++;
            // Both full slabs gain a free slot: one becomes the current
            // slab, the other is a slab with free slots that keeps objects.
            ak_pool_free(p, v[0]);
            ak_pool_free(p, v[j]);
            size_t t = (which ? j : 0) + 1;
            ak_pool_free(p, v[t]);
            ak_pool_free(p, v[t]);
            std::fprintf(stderr, "not detected %zu\n", v.size());
            std::exit(0);
          },
          "double free.*pool 'hardened'");
    }
}

// SPINLOCK and LOCKFREE free into a per-thread magazine and spill whole
// batches to the shared structure: a second free of an object that was
// already spilled is found there.
TEST(HardenedDeathTest, PoolDoubleFreeOfASpilledObjectIsDetected) {
  REQUIRE_MITIGATION(kDoubleFree, "double-free");
  for (ak_sync m : {AK_SYNC_SPINLOCK, AK_SYNC_LOCKFREE}) {
    SCOPED_TRACE(m);
    EXPECT_DEATH(
        {
          ak_pool *p = make_pool(m);
          std::vector<void *> v;
          for (int i = 0; i < 1000; i++) v.push_back(ak_pool_alloc(p));
          for (void *o : v) ak_pool_free(p, o);  // the first ones are spilled
          ak_pool_free(p, v[0]);
          std::fprintf(stderr, "not detected %zu\n", v.size());
          std::exit(0);
        },
        "double free.*pool 'hardened'");
  }
}

TEST(HardenedDeathTest, PoolCrossThreadDoubleFreeIsDetected) {
  REQUIRE_MITIGATION(kDoubleFree, "double-free");
  EXPECT_DEATH(
      {
        ak_pool *p = make_pool(AK_SYNC_THREADS);
        void *a = ak_pool_alloc(p);
        void *b = ak_pool_alloc(p);
        void *keep = ak_pool_alloc(p);
        std::thread([&] {
          ak_pool_free(p, a);  // remote frees: onto the slab's remote list
          ak_pool_free(p, b);
          ak_pool_free(p, a);
        }).join();
        std::fprintf(stderr, "not detected %p\n", keep);
        std::exit(0);
      },
      "double free");
}

TEST(HardenedDeathTest, MallocDoubleFreeIsDetected) {
  REQUIRE_MITIGATION(kDoubleFree, "double-free");
  EXPECT_DEATH(
      {
        void *a = ak_malloc(48);
        void *b = ak_malloc(48);
        void *keep = ak_malloc(48);
        ak_free(a);
        ak_free(b);
        ak_free(a);
        std::fprintf(stderr, "not detected %p\n", keep);
        std::exit(0);
      },
      "double free");
}

TEST(HardenedDeathTest, MallocCrossThreadDoubleFreeIsDetected) {
  REQUIRE_MITIGATION(kDoubleFree, "double-free");
  EXPECT_DEATH(
      {
        void *a = ak_malloc(48);
        void *b = ak_malloc(48);
        void *keep = ak_malloc(48);
        std::thread([&] {
          ak_free(a);
          ak_free(b);
          ak_free(a);
        }).join();
        std::fprintf(stderr, "not detected %p\n", keep);
        std::exit(0);
      },
      "double free");
}

// Freeing objects untouched (their first word as the allocator left it)
// and objects holding pointers into their own slab is not a double free.
TEST(Hardened, NoFalseDoubleFrees) {
  for (ak_sync m : kModes) {
    ak_pool *p = make_pool(m);
    ASSERT_NE(p, nullptr);
    std::vector<void *> v;
    for (int i = 0; i < 5000; i++) v.push_back(ak_pool_alloc(p));
    for (size_t i = 0; i + 1 < v.size(); i += 2) std::memcpy(v[i], &v[i + 1], sizeof(void *));
    for (void *o : v) ak_pool_free(p, o);
    ak_pool_destroy(p);
  }
  std::vector<void *> v;
  for (int i = 0; i < 5000; i++) v.push_back(ak_malloc(48));
  for (size_t i = 0; i + 1 < v.size(); i += 2) std::memcpy(v[i], &v[i + 1], sizeof(void *));
  for (void *o : v) ak_free(o);
}

// The last page of a slab (pool) or span (malloc) is inaccessible: an
// overflow past the last slot faults.
TEST(HardenedDeathTest, PoolGuardPageStopsOverflow) {
  REQUIRE_MITIGATION(kGuards, "guards");
  ak_pool *p = make_pool(AK_SYNC_NONE);
  ASSERT_NE(p, nullptr);
  void *o = ak_pool_alloc(p);
  ASSERT_NE(o, nullptr);
  // Default slabs are 64 KiB and aligned to their size; the guard is the last 4 KiB.
  auto slab_end = ((uintptr_t)o | (uintptr_t)(64 * 1024 - 1)) + 1;
  volatile char *guard = (volatile char *)(slab_end - 4096);
  EXPECT_EXIT(*guard = 1, testing::KilledBySignal(SIGSEGV), "");
  ak_pool_free(p, o);
  ak_pool_destroy(p);
}

TEST(HardenedDeathTest, MallocGuardPageStopsOverflow) {
  REQUIRE_MITIGATION(kGuards, "guards");
  // Classes up to 8 KiB use one 64 KiB page aligned to 64 KiB; its last
  // 4 KiB is the guard.
  char *b = static_cast<char *>(ak_malloc(2000));
  ASSERT_NE(b, nullptr);
  volatile char *guard = (volatile char *)((((uintptr_t)b) | (uintptr_t)0xffff) + 1 - 4096);
  EXPECT_EXIT(*guard = 1, testing::KilledBySignal(SIGSEGV), "");
  ak_free(b);
}

// Systems with larger pages (16 KiB on Apple silicon and some arm64
// distributions, 64 KiB on others), shown to the library through the OS
// layer's test hook in a fresh process (the threadsafe death-test style
// re-runs the test there). The guard at the end of a malloc span is one
// system page (none above 16 KiB, a quarter of a span's 64 KiB page), and a
// pool slab's likewise (none under four system pages): every byte of every
// block stays usable, in every build.
class LargerPagesDeathTest : public testing::TestWithParam<size_t> {};

TEST_P(LargerPagesDeathTest, EveryByteOfEveryBlockIsUsable) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const size_t ps = GetParam();
  auto use_every_byte = [ps] {
    _ak_os_set_page_size(ps);
    const size_t sizes[] = {16, 2000, 8000, 30000, 60000, 100000, 300000, 1 << 20, 5 << 20};
    std::vector<void *> live;
    for (size_t n : sizes) {
      for (int i = 0; i < 8; i++) {
        void *b = ak_malloc(n);
        if (!b) _exit(2);
        memset(b, 0xa5, ak_usable_size(b));
        live.push_back(b);
      }
    }
    for (void *b : live) ak_free(b);
    ak_pool *p = make_pool(AK_SYNC_NONE);
    if (!p) _exit(3);
    std::vector<void *> objs;
    for (int i = 0; i < 5000; i++) {
      void *o = ak_pool_alloc(p);
      if (!o) _exit(4);
      memset(o, 0x5a, 48);
      objs.push_back(o);
    }
    for (void *o : objs) ak_pool_free(p, o);
    ak_pool_destroy(p);
    _exit(0);
  };
  EXPECT_EXIT(use_every_byte(), testing::ExitedWithCode(0), "");
}

// With 16 KiB pages the hardened guard of a one-page span is its last
// 16 KiB: the byte before it is the last usable one, the guard faults.
TEST_P(LargerPagesDeathTest, MallocGuardIsOneSystemPage) {
  REQUIRE_MITIGATION(kGuards, "guards");
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const size_t ps = GetParam();
  if (ps > 16384) GTEST_SKIP() << "no span guard with pages above 16 KiB";
  // The byte `from_end` bytes before the end of the 64 KiB page holding a
  // 2,000-byte block, written in a fresh process that sees pages of `ps`.
  auto write_before_page_end = [ps](size_t from_end) {
    _ak_os_set_page_size(ps);
    char *b = static_cast<char *>(ak_malloc(2000));
    if (!b) _exit(2);
    uintptr_t page_end = (((uintptr_t)b) | (uintptr_t)0xffff) + 1;
    *(volatile char *)(page_end - from_end) = 1;
    _exit(0);
  };
  EXPECT_EXIT(write_before_page_end(ps + 1), testing::ExitedWithCode(0), "");
  EXPECT_EXIT(write_before_page_end(ps), testing::KilledBySignal(SIGSEGV), "");
}

INSTANTIATE_TEST_SUITE_P(PageSizes, LargerPagesDeathTest, testing::Values(size_t{16384}, size_t{65536}),
                         [](const testing::TestParamInfo<size_t> &i) {
                           return std::to_string(i.param / 1024) + "KiB";
                         });

bool increasing(const std::vector<uintptr_t> &v) { return std::is_sorted(v.begin(), v.end()); }

// Fresh slots come in random order: 64 allocations from a fresh slab are
// not in address order (chance of that under a uniform shuffle: 1/64!),
// and two fresh pools give different orders.
TEST(Hardened, FreshSlabsAllocateInRandomOrder) {
  REQUIRE_MITIGATION(kShuffle, "shuffle");
  for (ak_sync m : kModes) {
    SCOPED_TRACE(m);
    std::vector<uintptr_t> order[2];
    for (auto &ord : order) {
      ak_pool *p = make_pool(m);
      ASSERT_NE(p, nullptr);
      for (int i = 0; i < 64; i++) ord.push_back((uintptr_t)ak_pool_alloc(p));
      std::vector<uintptr_t> s = ord;
      std::sort(s.begin(), s.end());
      EXPECT_EQ(std::adjacent_find(s.begin(), s.end()), s.end()) << "two allocations share a slot";
      EXPECT_FALSE(increasing(ord));
      std::vector<uintptr_t> rel;
      for (uintptr_t a : ord) rel.push_back(a - s.front());
      ord = rel;
      ak_pool_destroy(p);
    }
    EXPECT_NE(order[0], order[1]);
  }
  // Malloc: a new thread gets a fresh span for an otherwise unused class.
  std::vector<uintptr_t> v;
  std::thread([&] {
    for (int i = 0; i < 64; i++) v.push_back((uintptr_t)ak_malloc(1792));
    for (uintptr_t a : v) ak_free((void *)a);
  }).join();
  EXPECT_FALSE(increasing(v));
}

}  // namespace
