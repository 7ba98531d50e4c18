/* SPDX-License-Identifier: MIT */
// pool_test.cpp - behaviour of the fixed-size object pool (ak_pool_*), in
// every sync mode: API, policies, backings, caps, stats, threads.
#include <arenakit/arenakit.h>
#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

extern "C" {
#include "common/harden.h"
#include "common/track.h"
}
#include "os/os_mem.h"
#include "sanitizers.h"

// The magazine batch of a pool of `slot`-byte slots, as src/pool/modes.h
// sets it (_ak_mag_batch_for: 16 KiB of objects, 64 to 256 of them).
constexpr size_t mag_batch_for_tests(size_t slot) {
  return std::min<size_t>(256, std::max<size_t>(64, 16384 / slot));
}
// How far a magazine's count may lag the pool's, in batches (pool.h's
// peak_live: off by less than ten batches per thread; AK_MAG_SETTLE in
// src/pool/modes/magazine/magazine.c, plus the batches in flight).
constexpr size_t kMagLagBatches = 10;

namespace {

const ak_sync kAllModes[] = {AK_SYNC_NONE, AK_SYNC_SPINLOCK, AK_SYNC_LOCKFREE, AK_SYNC_THREADS};
const ak_sync kConcurrentModes[] = {AK_SYNC_SPINLOCK, AK_SYNC_LOCKFREE, AK_SYNC_THREADS};

std::string mode_name(ak_sync m) {
  switch (m) {
    case AK_SYNC_NONE: return "none";
    case AK_SYNC_SPINLOCK: return "spinlock";
    case AK_SYNC_LOCKFREE: return "lockfree";
    default: return "threads";
  }
}

struct Pool {
  ak_pool *p;
  explicit Pool(ak_pool_options o) : p(ak_pool_create(&o)) { EXPECT_NE(p, nullptr) << ak_last_error(); }
  // `at_once`: ARAL's policy (release_empty), an empty slab goes back at once.
  Pool(size_t size, ak_sync sync, size_t max = 0, bool at_once = false) {
    ak_pool_options o{};
    o.object_size = size;
    o.sync = sync;
    o.max_objects = max;
    o.release_empty = at_once;
    o.name = "test";
    p = ak_pool_create(&o);
    EXPECT_NE(p, nullptr) << ak_last_error();
  }
  ~Pool() { ak_pool_destroy(p); }
  ak_pool_stats stats() const {
    ak_pool_stats s;
    ak_pool_stats_get(p, &s);
    return s;
  }
};

// Options of a pool of 64-byte objects in `sync` keeping exactly `spare`
// slabs, ARAL's policy (release_empty): any other empty slab goes back at once.
ak_pool_options spare_options(ak_sync sync, size_t spare) {
  ak_pool_options o{};
  o.object_size = 64;
  o.sync = sync;
  o.spare_slabs = spare;
  o.release_empty = true;
  return o;
}

// The slabs (64 KiB, aligned) that hold at least one of `objs`.
std::set<uintptr_t> slab_set(const std::vector<void *> &objs) {
  std::set<uintptr_t> slabs;
  for (void *o : objs) slabs.insert(reinterpret_cast<uintptr_t>(o) & ~uintptr_t{65535});
  return slabs;
}

size_t os_mapped() {
  _ak_os_counters c;
  _ak_os_get_counters(&c);
  return c.mapped_bytes;
}

void expect_disjoint(std::vector<uintptr_t> v, size_t size) {
  std::sort(v.begin(), v.end());
  for (size_t i = 1; i < v.size(); i++) ASSERT_LE(v[i - 1] + size, v[i]) << "objects overlap";
}

class PoolModes : public ::testing::TestWithParam<ak_sync> {};
INSTANTIATE_TEST_SUITE_P(All, PoolModes, ::testing::ValuesIn(kAllModes),
                         [](const auto &pi) { return mode_name(pi.param); });

TEST(PoolCreate, BadOptionsAreEinval) {
  errno = 0;
  EXPECT_EQ(ak_pool_create(nullptr), nullptr);
  EXPECT_EQ(errno, EINVAL);
  struct Case {
    const char *what;
    ak_pool_options o;
  };
  std::vector<Case> cases;
  ak_pool_options base{};
  base.object_size = 32;
  ak_pool_options o = base;
  o.object_size = 0;
  cases.push_back({"object_size 0", o});
  o = base;
  o.align = 3;
  cases.push_back({"align 3", o});
  o = base;
  o.align = size_t{1} << 20;
  o.slab_size = 65536;
  cases.push_back({"align larger than the slab", o});
  o = base;
  o.slab_size = 3000;
  cases.push_back({"slab size not a power of two", o});
  o = base;
  o.slab_size = 1024;
  cases.push_back({"slab size under a page", o});
  o = base;
  o.object_size = 100000;
  o.slab_size = 65536;
  cases.push_back({"object larger than the slab", o});
  o = base;
  o.backing = AK_BACKING_FILE;
  cases.push_back({"file backing without path", o});
  o = base;
  o.path = "/tmp/x";
  cases.push_back({"path without file backing", o});
  o = base;
  int bogus = 9;
  std::memcpy(&o.sync, &bogus, sizeof bogus);
  cases.push_back({"unknown sync", o});
  o = base;
  o.object_size = SIZE_MAX;
  cases.push_back({"SIZE_MAX object", o});
  for (const Case &c : cases) {
    errno = 0;
    ak_pool *p = ak_pool_create(&c.o);
    EXPECT_EQ(p, nullptr) << c.what;
    EXPECT_EQ(errno, EINVAL) << c.what;
    EXPECT_NE(std::string(ak_last_error()).find("ak_pool_create"), std::string::npos) << c.what;
    ak_pool_destroy(p);
  }
}

// A program compiled with pool headers of another layout version is refused
// (NULL, EPROTO, a message naming both versions), in every mode, so its
// inline paths never read a pool laid out differently; this build's
// version is accepted through the same entry.
TEST(PoolCreate, OtherLayoutVersionIsRefused) {
  const int encode = AK_POOL_INLINE_ABI & AK_POOL_INLINE_ENCODE_BIT;
  for (ak_sync mode : kAllModes) {
    ak_pool_options o{};
    o.object_size = 32;
    o.sync = mode;
    o.name = "layout";
    for (int version : {0, 1, AK_POOL_LAYOUT_VERSION - 1, AK_POOL_LAYOUT_VERSION + 1, 255}) {
      errno = 0;
      ak_pool *p = ak_pool_create_inline(&o, (version << 8) | encode);
      EXPECT_EQ(p, nullptr) << "version " << version;
      EXPECT_EQ(errno, EPROTO) << "version " << version;
      std::string msg = ak_last_error();
      EXPECT_NE(msg.find("ak_pool_create: pool 'layout'"), std::string::npos) << msg;
      EXPECT_NE(msg.find("layout version " + std::to_string(version) + ","), std::string::npos) << msg;
      EXPECT_NE(msg.find("version " + std::to_string(AK_POOL_LAYOUT_VERSION) + ":"), std::string::npos)
          << msg;
      ak_pool_destroy(p);
    }
    ak_pool *p = ak_pool_create_inline(&o, AK_POOL_INLINE_ABI);
    ASSERT_NE(p, nullptr) << mode_name(mode);
    void *x = ak_pool_alloc(p);
    ASSERT_NE(x, nullptr);
    ak_pool_free(p, x);
    ak_pool_destroy(p);
  }
}

TEST(PoolCreate, ZeroedOptionsAreThreadSafeDefault) {
  ak_pool_options o{};
  o.object_size = 24;
  Pool t(o);
  // AK_SYNC_THREADS keeps the unsynchronised inline paths off.
  EXPECT_EQ(t.p->cur.hot.first, nullptr);
  EXPECT_EQ(t.p->cur.mask, 0u);
  void *a = ak_pool_alloc(t.p);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(t.p->cur.hot.first, nullptr) << "the default mode must not use the unsynchronised inline path";
  EXPECT_EQ(t.p->cur.mask, 0u);
  ak_pool_free(t.p, a);
  EXPECT_STREQ(ak_pool_name(t.p), "pool");
}

TEST_P(PoolModes, AllocFreeContentsAlignmentNoOverlap) {
  for (size_t size : {size_t{1}, size_t{8}, size_t{24}, size_t{48}, size_t{100}, size_t{4000}}) {
    Pool t(size, GetParam());
    std::vector<uintptr_t> ptrs;
    std::mt19937 rng(7);
    std::vector<void *> live;
    for (int i = 0; i < 20000; i++) {
      if (!live.empty() && rng() % 3 == 0) {
        size_t k = rng() % live.size();
        auto *b = static_cast<unsigned char *>(live[k]);
        for (size_t j = 0; j < size; j++)
          ASSERT_EQ(b[j], static_cast<unsigned char>(reinterpret_cast<uintptr_t>(b)));
        ak_pool_free(t.p, b);
        live[k] = live.back();
        live.pop_back();
      } else {
        auto *b = static_cast<unsigned char *>(ak_pool_alloc(t.p));
        ASSERT_NE(b, nullptr);
        size_t natural = size & (~size + 1);
        ASSERT_EQ(reinterpret_cast<uintptr_t>(b) % std::min<size_t>(natural, 16), 0u) << size;
        ASSERT_TRUE(ak_pool_owns(t.p, b));
        std::memset(b, static_cast<unsigned char>(reinterpret_cast<uintptr_t>(b)), size);
        live.push_back(b);
      }
    }
    for (void *b : live) ptrs.push_back(reinterpret_cast<uintptr_t>(b));
    expect_disjoint(ptrs, size);
    EXPECT_EQ(t.stats().live, live.size());
    for (void *b : live) ak_pool_free(t.p, b);
    EXPECT_EQ(t.stats().live, 0u);
  }
}

// Slots start on the largest power of two that divides the slot size (up
// to a cache line), whatever alignment was asked for: a 16-byte object
// aligned to 8 must not straddle two cache lines (every fourth one did,
// after a slab header rounded to 8).
TEST_P(PoolModes, SlotsDoNotStraddleCacheLines) {
  for (size_t size : {16u, 32u, 48u, 64u, 128u}) {
    ak_pool_options o{};
    o.object_size = size;
    o.align = 8;
    o.sync = GetParam();
    Pool t(o);
    const size_t line_align = std::min<size_t>(size & (~size + 1), 64);
    std::vector<void *> v;
    for (int i = 0; i < 3000; i++) {
      v.push_back(ak_pool_alloc(t.p));
      ASSERT_NE(v.back(), nullptr);
      ASSERT_EQ(reinterpret_cast<uintptr_t>(v.back()) % line_align, 0u) << size << "-byte objects";
    }
    for (void *x : v) ak_pool_free(t.p, x);
  }
}

TEST_P(PoolModes, ExplicitAlignment) {
  for (size_t align : {size_t{16}, size_t{64}, size_t{256}, size_t{4096}}) {
    ak_pool_options o{};
    o.object_size = 40;
    o.align = align;
    o.sync = GetParam();
    Pool t(o);
    for (int i = 0; i < 300; i++) {
      void *b = ak_pool_alloc(t.p);
      ASSERT_NE(b, nullptr);
      ASSERT_EQ(reinterpret_cast<uintptr_t>(b) % align, 0u) << align;
    }
  }
}

TEST_P(PoolModes, MaxObjectsIsEnforcedOnEveryPath) {
  Pool t(64, GetParam(), 1000);
  std::vector<void *> v;
  for (int i = 0; i < 1000; i++) {
    void *b = ak_pool_alloc(t.p);
    ASSERT_NE(b, nullptr) << i;
    v.push_back(b);
  }
  for (int k = 0; k < 3; k++) {
    errno = 0;
    EXPECT_EQ(ak_pool_alloc(t.p), nullptr);
    EXPECT_EQ(errno, ENOMEM);
  }
  EXPECT_NE(std::string(ak_last_error()).find("max_objects"), std::string::npos);
  ak_pool_free(t.p, v.back());
  v.pop_back();
  void *again = ak_pool_alloc(t.p);
  EXPECT_NE(again, nullptr) << "a free makes room again";
  EXPECT_EQ(ak_pool_alloc(t.p), nullptr);
  v.push_back(again);
  for (void *b : v) ak_pool_free(t.p, b);
  EXPECT_EQ(t.stats().live, 0u);
}

TEST_P(PoolModes, EverythingFreedGivesMemoryBack) {
  if (GetParam() == AK_SYNC_LOCKFREE) GTEST_SKIP() << "lock-free slabs stay mapped until trim (tested below)";
  size_t before = os_mapped();
  Pool t(48, GetParam(), 0, true);
  std::vector<void *> v;
  for (int i = 0; i < 200000; i++) {
    v.push_back(ak_pool_alloc(t.p));
    std::memset(v.back(), 1, 48);
  }
  ak_pool_stats full = t.stats();
  EXPECT_GT(full.slabs, 100u);
  EXPECT_GE(full.bytes_resident, 200000u * 48);
  std::shuffle(v.begin(), v.end(), std::mt19937(3));
  for (void *b : v) ak_pool_free(t.p, b);
  ak_pool_stats empty = t.stats();
  EXPECT_EQ(empty.live, 0u);
  EXPECT_LE(empty.slabs, 1u) << "empty slabs go back at once";
  EXPECT_LE(os_mapped(), before + 65536);
}

TEST(PoolLockfree, TrimDecommitsWhenEmpty) {
  Pool t(48, AK_SYNC_LOCKFREE);
  std::vector<void *> v;
  for (int i = 0; i < 100000; i++) v.push_back(ak_pool_alloc(t.p));
  for (void *b : v) ak_pool_free(t.p, b);
  size_t resident = t.stats().bytes_resident;
  EXPECT_GE(resident, 100000u * 48);
  ak_pool_trim(t.p);
  EXPECT_LT(t.stats().bytes_resident, resident / 10);
  // Still works: the slabs are re-carved.
  for (int i = 0; i < 1000; i++) ASSERT_NE(ak_pool_alloc(t.p), nullptr);
}

// When the last thread using a LOCKFREE pool exits with every object free,
// the stack (in the order of the threads' frees) is taken down and the
// slabs are carved again: allocation runs in address order once more.
TEST(PoolLockfree, EmptyPoolGetsAddressOrderBack) {
  if (std::string(ak_hardening()).find("shuffle") != std::string::npos)
    GTEST_SKIP() << "fresh slots are shuffled in this build";
  Pool t(48, AK_SYNC_LOCKFREE);
  const size_t slot = t.stats().slot_size;
  auto in_order = [&](const std::vector<void *> &v) {
    size_t n = 0;
    for (size_t i = 1; i < v.size(); i++)
      n += static_cast<char *>(v[i]) == static_cast<char *>(v[i - 1]) + slot;
    return n;
  };
  for (int round = 0; round < 3; round++) {
    std::vector<std::thread> th;
    for (int k = 0; k < 4; k++)
      th.emplace_back([&, k] {
        std::vector<void *> v;
        for (int i = 0; i < 5000; i++) v.push_back(ak_pool_alloc(t.p));
        std::shuffle(v.begin(), v.end(), std::mt19937(static_cast<unsigned>(round * 4 + k)));
        for (void *o : v) ak_pool_free(t.p, o);
      });
    for (auto &x : th) x.join();
  }
  std::vector<void *> v;
  std::thread([&] {
    for (int i = 0; i < 2000; i++) v.push_back(ak_pool_alloc(t.p));
  }).join();
  EXPECT_GE(in_order(v), v.size() * 9 / 10) << "allocations after the pool emptied are not in address order";
  for (void *o : v) ak_pool_free(t.p, o);
}

// The page policies hold in AK_SYNC_NONE and (per thread heap) in
// AK_SYNC_THREADS, whose inline paths free into slabs other than the
// current one as AK_SYNC_NONE's do.
class PoolPolicy : public ::testing::TestWithParam<ak_sync> {
 protected:
  // 64-byte objects in 4 KiB slabs (63 slots minus the header), the mode
  // under test.
  ak_pool_options small_slabs() const {
    ak_pool_options o{};
    o.object_size = 64;
    o.sync = GetParam();
    o.slab_size = 4096;
    return o;
  }
};
INSTANTIATE_TEST_SUITE_P(Modes, PoolPolicy, ::testing::Values(AK_SYNC_NONE, AK_SYNC_THREADS),
                         [](const auto &pi) { return mode_name(pi.param); });

TEST_P(PoolPolicy, AllocationPacksTheFullestSlab) {
  ak_pool_options o = small_slabs();
  Pool t(o);
  size_t per = 0;
  std::vector<void *> v;
  while (t.stats().slabs < 4) v.push_back(ak_pool_alloc(t.p));
  per = (v.size() - 1) / 3;
  // Slabs 0..2 are full. Free 60% of slab 0, 10% of slab 1 and 40% of
  // slab 2: more than a slab's worth in all, so the batch is not thin.
  std::vector<void *> s0(v.begin(), v.begin() + static_cast<long>(per));
  std::vector<void *> s1(v.begin() + static_cast<long>(per), v.begin() + static_cast<long>(2 * per));
  std::vector<void *> s2(v.begin() + static_cast<long>(2 * per), v.begin() + static_cast<long>(3 * per));
  for (size_t i = 0; i < per * 6 / 10; i++) ak_pool_free(t.p, s0[i]);
  for (size_t i = 0; i < per / 10; i++) ak_pool_free(t.p, s1[i]);
  for (size_t i = 0; i < per * 4 / 10; i++) ak_pool_free(t.p, s2[i]);
  // The current slab (slab 3, one object) serves until it is full: the
  // slabs the frees took off the full list wait for the next batch.
  uintptr_t mask = ~uintptr_t{4095};
  const uintptr_t s3 = reinterpret_cast<uintptr_t>(v.back()) & mask;
  for (size_t i = 1; i < per; i++)
    ASSERT_EQ(reinterpret_cast<uintptr_t>(ak_pool_alloc(t.p)) & mask, s3) << "allocation " << i;
  // Then the batch, fullest first: slab 1, then slab 2, then slab 0.
  std::vector<uintptr_t> order;
  for (size_t i = 0; i < per / 10 + per * 4 / 10 + 1; i++)
    order.push_back(reinterpret_cast<uintptr_t>(ak_pool_alloc(t.p)) & mask);
  EXPECT_EQ(order.front(), reinterpret_cast<uintptr_t>(s1[0]) & mask);
  EXPECT_EQ(order[per / 10], reinterpret_cast<uintptr_t>(s2[0]) & mask);
  EXPECT_EQ(order.back(), reinterpret_cast<uintptr_t>(s0[0]) & mask);
  EXPECT_EQ(t.stats().slabs, 4u) << "a slab was taken while three had a slab's worth of free slots";
}

// Fills `slabs` slabs of `t` (4 KiB slabs of 64-byte objects), frees three
// objects, then frees a random object and allocates one `steps` times: the
// live count holds at slabs * per - 3. Returns the live objects.
static std::vector<void *> churn_steady(Pool &t, size_t slabs, int steps) {
  std::vector<void *> v;
  while (t.stats().slabs < slabs) v.push_back(ak_pool_alloc(t.p));
  const size_t per = (v.size() - 1) / (slabs - 1);
  while (v.size() < slabs * per) v.push_back(ak_pool_alloc(t.p));
  EXPECT_EQ(t.stats().slabs, slabs);  // all full
  for (int i = 0; i < 3; i++) {
    ak_pool_free(t.p, v.back());
    v.pop_back();
  }
  std::mt19937 rng(7);
  for (int step = 0; step < steps; step++) {
    size_t i = rng() % v.size();
    ak_pool_free(t.p, v[i]);
    v[i] = ak_pool_alloc(t.p);
    EXPECT_NE(v[i], nullptr);
  }
  EXPECT_EQ(t.stats().live, slabs * per - 3);
  return v;
}

// A live count that holds steady keeps the number of free slots: with a
// few of them spread over many slabs, every allocation would fill a slab
// and every free take one off the full list (both slow paths, on every
// step). A batch with less than a slab's worth of free slots gets one
// empty slab of slack at its back, once.
TEST_P(PoolPolicy, AThinBatchTakesOneSlabOfSlack) {
  ak_pool_options o = small_slabs();
  Pool t(o);
  std::vector<void *> v = churn_steady(t, 9, 20000);
  EXPECT_EQ(t.stats().slabs, 10u) << "no slab of slack, or more than one, for a live count that holds";
  for (void *q : v) ak_pool_free(t.p, q);
}

// release_empty asks for the lowest memory: no slab of slack.
TEST_P(PoolPolicy, ReleaseEmptyTakesNoSlack) {
  ak_pool_options o = small_slabs();
  o.release_empty = true;
  Pool t(o);
  std::vector<void *> v = churn_steady(t, 5, 5000);
  EXPECT_EQ(t.stats().slabs, 5u);
  for (void *q : v) ak_pool_free(t.p, q);
}

TEST_P(PoolPolicy, DefragmentKeepsStrictOrder) {
  ak_pool_options o = small_slabs();
  Pool t(o);
  ak_pool_set_defragment(t.p, true);
  std::vector<void *> v;
  while (t.stats().slabs < 7) v.push_back(ak_pool_alloc(t.p));
  size_t per = (v.size() - 1) / 6;
  uintptr_t mask = ~uintptr_t{4095};
  // Free k objects from slab k (k = 1..6): slab 1 ends fullest.
  for (size_t k = 1; k <= 6; k++)
    for (size_t i = 0; i < k * 2; i++) ak_pool_free(t.p, v[(k - 1) * per + i]);
  // Allocations fill slab 1 first, then slab 2, ... (strictly by fullness).
  std::vector<uintptr_t> order;
  for (size_t i = 0; i < 2 + 4 + 6; i++)
    order.push_back(reinterpret_cast<uintptr_t>(ak_pool_alloc(t.p)) & mask);
  EXPECT_EQ(order[0], reinterpret_cast<uintptr_t>(v[0]) & mask);
  EXPECT_EQ(order[2], reinterpret_cast<uintptr_t>(v[per]) & mask);
  EXPECT_EQ(order[6], reinterpret_cast<uintptr_t>(v[2 * per]) & mask);
}

TEST_P(PoolPolicy, SpareSlabsAreKept) {
  Pool t(spare_options(GetParam(), 3));
  std::vector<void *> v;
  for (int i = 0; i < 20000; i++) v.push_back(ak_pool_alloc(t.p));
  size_t slabs = t.stats().slabs;
  for (void *b : v) ak_pool_free(t.p, b);
  EXPECT_EQ(t.stats().slabs, 4u) << "the current slab and three spares";
  size_t allocs = t.stats().slab_allocs;
  for (int i = 0; i < 1000; i++) v[static_cast<size_t>(i)] = ak_pool_alloc(t.p);
  EXPECT_EQ(t.stats().slab_allocs, allocs) << "spares are reused before mapping";
  ak_pool_trim(t.p);
  EXPECT_LT(t.stats().slabs, slabs);
}

// GCC defines __SANITIZE_*__; clang answers __has_feature.
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define AK_TEST_CLANG_SANITIZER 1
#endif
#endif
#ifndef AK_TEST_CLANG_SANITIZER
#define AK_TEST_CLANG_SANITIZER 0
#endif

struct CountingOs {
  static inline size_t maps = 0, unmaps = 0;
  static void *map(void *hint, size_t size, void *ctx) {
    maps++;
    return _ak_os_default_hooks().map(hint, size, ctx);
  }
  static int unmap(void *p, size_t size, void *ctx) {
    unmaps++;
    return _ak_os_default_hooks().unmap(p, size, ctx);
  }
  _ak_os_hooks saved;
  CountingOs() {
    maps = unmaps = 0;
    _ak_os_hooks h = _ak_os_default_hooks();
    h.map = map;
    h.unmap = unmap;
    saved = _ak_os_set_hooks(&h);
  }
  ~CountingOs() { _ak_os_set_hooks(&saved); }
};

// Slabs are aligned mappings: the OS layer asks for each at a hint from a
// region of its own, where it comes out aligned, so a growing pool maps
// each slab with one call and trims (unmaps) almost never; an unmap in a
// multi-threaded process interrupts every core that runs it.
TEST(PoolSlabs, AlignedMappingsNeedNoTrim) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || AK_TEST_CLANG_SANITIZER
  GTEST_SKIP() << "ASan and TSan keep the region of aligned hints for themselves (every slab is over-mapped)";
#endif
  Pool t(64, AK_SYNC_NONE);
  std::vector<void *> v;
  size_t allocs, maps, unmaps;
  {
    CountingOs os;
    for (int i = 0; i < 64 * 1000; i++) v.push_back(ak_pool_alloc(t.p));  // about 64 slabs
    allocs = t.stats().slab_allocs;
    maps = CountingOs::maps;
    unmaps = CountingOs::unmaps;
  }
  EXPECT_GE(allocs, 60u);
  EXPECT_LE(maps, allocs + allocs / 4) << "one map per slab, a few retries";
  EXPECT_LE(unmaps, allocs / 4) << "over-map and trim only when a mapping was not aligned";
  for (void *x : v) {
    ASSERT_EQ(reinterpret_cast<uintptr_t>(x) % 16, 0u);
    ak_pool_free(t.p, x);
  }
}

// A mapping with no hint (here: larger than the region hands out) goes
// straight to the over-map: one map and the two trims, not a plain map
// first that is then thrown away for being unaligned.
TEST(PoolSlabs, UnhintedAlignedMappingMapsOnce) {
  const size_t size = (size_t{1} << 30) + (size_t{64} << 10), align = size_t{2} << 20;
  void *p;
  size_t maps, unmaps;
  {
    CountingOs os;
    p = _ak_os_alloc(size, align);
    maps = CountingOs::maps;
    unmaps = CountingOs::unmaps;
  }
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % align, 0u);
  EXPECT_EQ(maps, 1u);
  EXPECT_LE(unmaps, 2u);
  _ak_os_free(p, size);
}

// AK_SYNC_NONE: once the current slab is full, the inline allocation pops
// the next slab's list and the current slab stays current. A working set
// that straddles two slabs (a free into the other slab, then an allocation)
// then takes no slow path, where it used to switch the current slab to the
// other one and back (two calls into the library per such free).
TEST(PoolNoneInline, FullCurrentSlabAllocatesFromTheNext) {
  Pool t(16, AK_SYNC_NONE, 0, true);
  if (t.p->cur.mask == 0) GTEST_SKIP() << "the inline paths are off in this build (checked or tracked)";
  const uintptr_t mask = t.p->cur.mask;
  auto slab = [&](const void *o) { return reinterpret_cast<uintptr_t>(o) & mask; };
  std::vector<void *> v;
  while (t.stats().slabs < 3) v.push_back(ak_pool_alloc(t.p));
  const uintptr_t a = slab(v[0]), c = slab(v.back());
  size_t per = (v.size() - 1) / 2;  // slabs a and b are full
  const uintptr_t b = slab(v[per]);
  ASSERT_NE(a, b);
  ASSERT_NE(b, c);
  // Frees into the full slabs a (two) and b (three) put them on the
  // pending list; the current slab c serves until it is full.
  std::vector<void *> freed_a(v.begin(), v.begin() + 2);
  std::vector<void *> freed_b(v.begin() + static_cast<long>(per), v.begin() + static_cast<long>(per + 3));
  for (void *o : freed_a) ak_pool_free(t.p, o);
  for (void *o : freed_b) ak_pool_free(t.p, o);
  v.erase(v.begin() + static_cast<long>(per), v.begin() + static_cast<long>(per + 3));
  v.erase(v.begin(), v.begin() + 2);
  auto in = [](const std::vector<void *> &set, void *o) {
    return std::find(set.begin(), set.end(), o) != set.end();
  };
  void *o;
  while (slab(o = ak_pool_alloc(t.p)) == c) v.push_back(o);
  // c is full: the batch is placed fullest first, a is current and the
  // allocations take its two free slots.
  ASSERT_TRUE(in(freed_a, o));
  v.push_back(o);
  ASSERT_EQ(t.p->cur.hot_slab, a);
  v.push_back(o = ak_pool_alloc(t.p));
  ASSERT_TRUE(in(freed_a, o));
  // The full current slab a allocates from the next slab b (`alt`),
  // inline: b's freed slots come back while a stays current.
  v.push_back(o = ak_pool_alloc(t.p));
  EXPECT_TRUE(in(freed_b, o));
  EXPECT_EQ(t.p->cur.hot_slab, a) << "the current slab switched for one allocation";
  EXPECT_EQ(t.stats().live, v.size()) << "the second slab did not count its inline allocation";
  // Frees into the current slab come back first, as before.
  ak_pool_free(t.p, v[5]);
  EXPECT_EQ(ak_pool_alloc(t.p), v[5]);
  // Then allocation goes on through the
  // library: all distinct, counts exact, every slab back at the end.
  for (int i = 0; i < 5000; i++) v.push_back(ak_pool_alloc(t.p));
  std::vector<uintptr_t> addrs;
  for (void *q : v) addrs.push_back(reinterpret_cast<uintptr_t>(q));
  expect_disjoint(addrs, 16);
  EXPECT_EQ(t.stats().live, v.size());
  for (void *q : v) ak_pool_free(t.p, q);
  EXPECT_EQ(t.stats().live, 0u);
  EXPECT_LE(t.stats().slabs, 1u);
}

TEST_P(PoolModes, ReserveAvoidsLaterSlabAllocations) {
  Pool t(48, GetParam());
  ASSERT_EQ(ak_pool_reserve(t.p, 50000), 0);
  size_t allocs = t.stats().slab_allocs;
  EXPECT_GE(t.stats().slabs * 65536, 50000u * 48);
  std::vector<void *> v;
  for (int i = 0; i < 50000; i++) v.push_back(ak_pool_alloc(t.p));
  EXPECT_EQ(t.stats().slab_allocs, allocs);
  for (void *b : v) ak_pool_free(t.p, b);
}

TEST_P(PoolModes, OwnsIsPreciseAndNeverFaults) {
  Pool a(48, GetParam()), b(48, GetParam());
  void *x = ak_pool_alloc(a.p);
  void *y = ak_pool_alloc(b.p);
  int local = 0;
  void *heap = std::malloc(48);
  EXPECT_TRUE(ak_pool_owns(a.p, x));
  EXPECT_FALSE(ak_pool_owns(a.p, y));
  EXPECT_FALSE(ak_pool_owns(b.p, x));
  EXPECT_FALSE(ak_pool_owns(a.p, static_cast<char *>(x) + 8)) << "inside an object is not an object";
  EXPECT_FALSE(ak_pool_owns(a.p, &local));
  EXPECT_FALSE(ak_pool_owns(a.p, heap));
  EXPECT_FALSE(ak_pool_owns(a.p, nullptr));
  EXPECT_FALSE(ak_pool_owns(a.p, reinterpret_cast<void *>(uintptr_t{0x10})));
  std::free(heap);
  ak_pool_free(a.p, x);
  ak_pool_free(b.p, y);
}

// Hundreds of slabs spread over every shard of the slab table: each is
// found by ak_pool_owns, and the counts add up; growth without frees keeps
// the high-water mark exact, and it stays after everything is freed.
TEST_P(PoolModes, SlabTableKnowsEverySlab) {
  ak_pool_options o{};
  o.object_size = 64;
  o.slab_size = 4096;
  o.sync = GetParam();
  o.name = "table";
  Pool t(o);
  std::vector<void *> v;
  for (int i = 0; i < 20000; i++) v.push_back(ak_pool_alloc(t.p));
  ak_pool_stats s = t.stats();
  ASSERT_GE(s.slabs, 300u) << "the test needs slabs in every shard";
  EXPECT_EQ(s.peak_slabs, s.slabs);
  EXPECT_EQ(s.slab_allocs - s.slab_releases, s.slabs);
  for (void *x : v) ASSERT_TRUE(ak_pool_owns(t.p, x)) << x;
  int outside = 0;
  for (void *x : v) outside += ak_pool_owns(t.p, static_cast<char *>(x) + 0x100000) ? 0 : 1;
  EXPECT_GT(outside, 0) << "addresses 1 MiB away are not all in the pool's slabs";
  for (void *x : v) ak_pool_free(t.p, x);
  ak_pool_trim(t.p);
  ak_pool_stats e = t.stats();
  EXPECT_EQ(e.peak_slabs, s.slabs);
  if (GetParam() == AK_SYNC_LOCKFREE) {
    /* Its slabs stay mapped (a popper may still read a link); trim
     * decommits all but their header page (one page here). */
    EXPECT_EQ(e.slabs, s.slabs);
    EXPECT_TRUE(ak_pool_owns(t.p, v[0]));
    return;
  }
  EXPECT_EQ(e.slabs, 0u);
  EXPECT_EQ(e.slab_releases, e.slab_allocs);
  EXPECT_FALSE(ak_pool_owns(t.p, v[0]));
}

TEST_P(PoolModes, StatsAddUp) {
  Pool t(100, GetParam());
  std::vector<void *> v;
  for (int i = 0; i < 5000; i++) v.push_back(ak_pool_alloc(t.p));
  for (int i = 0; i < 2000; i++) ak_pool_free(t.p, v[static_cast<size_t>(i)]);
  ak_pool_stats s = t.stats();
  EXPECT_EQ(s.version, AK_POOL_STATS_VERSION);
  EXPECT_EQ(s.object_size, 100u);
  EXPECT_GE(s.slot_size, 100u);
  EXPECT_EQ(s.live, 3000u);
  // The peak is sampled (pool.h): within one slab in NONE, ten batches in
  // the magazine modes, eight slabs in THREADS (one heap, past its own
  // high; it samples far closer).
  const size_t lag = GetParam() == AK_SYNC_SPINLOCK || GetParam() == AK_SYNC_LOCKFREE
                         ? kMagLagBatches * mag_batch_for_tests(s.slot_size)
                         : 1000;
  EXPECT_GE(s.peak_live + lag, 5000u);
  EXPECT_LE(s.peak_live, 5000u);
  EXPECT_EQ(s.bytes_reserved, s.slabs * 65536);
  EXPECT_LE(s.bytes_resident, s.bytes_reserved);
  EXPECT_EQ(s.slab_allocs - s.slab_releases, s.slabs);
  EXPECT_GE(s.peak_slabs, s.slabs);
  char buf[1024] = {0};
  FILE *f = fmemopen(buf, sizeof buf, "w");
  ASSERT_EQ(ak_pool_stats_print(t.p, f), 0);
  fclose(f);
  EXPECT_NE(std::string(buf).find("live objects  3000"), std::string::npos) << buf;
  for (size_t i = 2000; i < v.size(); i++) ak_pool_free(t.p, v[i]);
}

TEST_P(PoolModes, DestroyWithLiveObjectsReleasesEverything) {
  size_t before = os_mapped();
  {
    Pool t(256, GetParam());
    for (int i = 0; i < 30000; i++) ASSERT_NE(ak_pool_alloc(t.p), nullptr);
    EXPECT_GT(os_mapped(), before + 30000u * 256);
  }
  EXPECT_EQ(os_mapped(), before);
}

TEST(PoolBacking, HeapBacking) {
  ak_pool_options o{};
  o.object_size = 32;
  o.backing = AK_BACKING_HEAP;
  o.sync = AK_SYNC_NONE;
  o.release_empty = true; /* empty slabs go back to the C heap at once */
  Pool t(o);
  std::vector<void *> v;
  for (int i = 0; i < 10000; i++) {
    void *b = ak_pool_alloc(t.p);
    ASSERT_NE(b, nullptr);
    std::memset(b, 0x5a, 32);
    v.push_back(b);
  }
  EXPECT_TRUE(ak_pool_owns(t.p, v[1234]));
  for (void *b : v) ak_pool_free(t.p, b);
  EXPECT_LE(t.stats().slabs, 1u);
}

std::string temp_path(const char *name) {
  return std::string(::testing::TempDir()) + "ak_pool_" + name + "_" + std::to_string(getpid());
}

TEST(PoolBacking, FileGrowsAndShrinks) {
  std::string path = temp_path("file");
  for (ak_sync mode : kAllModes) {
    ak_pool_options o{};
    o.object_size = 64;
    o.backing = AK_BACKING_FILE;
    o.path = path.c_str();
    o.sync = mode;
    o.name = "filepool";
    o.release_empty = true; /* released slabs are punched out at once */
    {
      Pool t(o);
      std::vector<void *> v;
      for (int i = 0; i < 5000; i++) {
        auto *b = static_cast<uint64_t *>(ak_pool_alloc(t.p));
        ASSERT_NE(b, nullptr);
        *b = static_cast<uint64_t>(i);
        v.push_back(b);
      }
      struct stat st;
      ASSERT_EQ(stat(path.c_str(), &st), 0);
      EXPECT_GE(static_cast<size_t>(st.st_size), 5000u * 64) << "the file grows with the pool";
      for (size_t i = 0; i < v.size(); i++) ASSERT_EQ(*static_cast<uint64_t *>(v[i]), i);
      if (mode != AK_SYNC_LOCKFREE) {
        std::shuffle(v.begin(), v.end(), std::mt19937(1));
        for (void *b : v) ak_pool_free(t.p, b);
        ASSERT_EQ(stat(path.c_str(), &st), 0);
        EXPECT_LE(static_cast<size_t>(st.st_blocks) * 512, 65536u + 4096u)
            << mode_name(mode) << ": released slabs are punched out of the file";
        // Allocating again reuses the file: contents are readable and writable.
        for (int i = 0; i < 5000; i++) {
          auto *b = static_cast<uint64_t *>(ak_pool_alloc(t.p));
          ASSERT_NE(b, nullptr);
          *b = 7;
        }
      }
    }
    unlink(path.c_str());
  }
}

TEST(PoolBacking, FileThatCannotBeCreated) {
  ak_pool_options o{};
  o.object_size = 64;
  o.backing = AK_BACKING_FILE;
  o.path = "/nonexistent-dir-ak/pool.dat";
  errno = 0;
  EXPECT_EQ(ak_pool_create(&o), nullptr);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_NE(std::string(ak_last_error()).find("/nonexistent-dir-ak/pool.dat"), std::string::npos);
  o.path = "/tmp";  // a directory
  errno = 0;
  EXPECT_EQ(ak_pool_create(&o), nullptr);
  EXPECT_EQ(errno, EISDIR);
  EXPECT_NE(std::string(ak_last_error()).find("'/tmp'"), std::string::npos);
}

TEST(PoolBacking, FileThatCannotGrow) {
  std::string path = temp_path("nogrow");
  ak_pool_options o{};
  o.object_size = 64;
  o.backing = AK_BACKING_FILE;
  o.path = path.c_str();
  o.sync = AK_SYNC_NONE;
  Pool t(o);
  std::vector<void *> v;
  for (int i = 0; i < 100; i++) v.push_back(ak_pool_alloc(t.p));
  _ak_os_fail_file_op(1, ENOSPC);
  errno = 0;
  void *b = nullptr;
  for (int i = 0; i < 5000 && (b = ak_pool_alloc(t.p)) != nullptr; i++) v.push_back(b);
  EXPECT_EQ(b, nullptr);
  EXPECT_EQ(errno, ENOSPC);
  EXPECT_NE(std::string(ak_last_error()).find(path), std::string::npos);
  _ak_os_fail_file_op(0, 0);
  EXPECT_NE(ak_pool_alloc(t.p), nullptr) << "the pool works again once the file can grow";
  unlink(path.c_str());
}

// ---- threads -----------------------------------------------------------------

class PoolConcurrent : public ::testing::TestWithParam<ak_sync> {};
INSTANTIATE_TEST_SUITE_P(All, PoolConcurrent, ::testing::ValuesIn(kConcurrentModes),
                         [](const auto &pi) { return mode_name(pi.param); });

// Many threads allocate, write their id, and free - some of their own
// objects and some handed over by other threads.
TEST_P(PoolConcurrent, StressWithCrossThreadFrees) {
  Pool t(48, GetParam());
  constexpr int kThreads = 8, kOps = 60000;
  std::vector<std::atomic<void *>> mailbox(1024);
  for (auto &m : mailbox) m.store(nullptr);
  std::atomic<bool> bad{false};
  std::vector<std::thread> th;
  for (int id = 0; id < kThreads; id++) {
    th.emplace_back([&, id] {
      std::mt19937 rng(static_cast<unsigned>(id));
      std::vector<uint64_t *> mine;
      for (int i = 0; i < kOps; i++) {
        unsigned r = rng() % 4;
        if (r < 2 || mine.empty()) {
          auto *o = static_cast<uint64_t *>(ak_pool_alloc(t.p));
          if (!o) {
            bad = true;
            return;
          }
          o[0] = static_cast<uint64_t>(id);
          o[5] = ~static_cast<uint64_t>(id);
          mine.push_back(o);
        } else if (r == 2) {
          uint64_t *o = mine.back();
          mine.pop_back();
          if (o[0] != static_cast<uint64_t>(id) || o[5] != ~static_cast<uint64_t>(id)) bad = true;
          ak_pool_free(t.p, o);
        } else {
          // Hand one over: whatever was in the mailbox slot is freed here.
          uint64_t *o = mine.back();
          mine.pop_back();
          o[0] = o[5] = 0xfeed;
          void *prev = mailbox[rng() % mailbox.size()].exchange(o);
          if (prev) {
            auto *q = static_cast<uint64_t *>(prev);
            if (q[0] != 0xfeed || q[5] != 0xfeed) bad = true;
            ak_pool_free(t.p, prev);
          }
        }
      }
      for (uint64_t *o : mine) ak_pool_free(t.p, o);
    });
  }
  for (auto &x : th) x.join();
  EXPECT_FALSE(bad.load()) << "an object changed under its owner or an allocation failed";
  for (auto &m : mailbox)
    if (void *o = m.load()) ak_pool_free(t.p, o);
  EXPECT_EQ(t.stats().live, 0u);
}

TEST_P(PoolConcurrent, CapHoldsUnderContention) {
  Pool t(32, GetParam(), 5000);
  std::atomic<size_t> got{0};
  std::vector<std::thread> th;
  std::vector<std::vector<void *>> held(6);
  for (int id = 0; id < 6; id++) {
    th.emplace_back([&, id] {
      for (int i = 0; i < 2000; i++) {
        void *o = ak_pool_alloc(t.p);
        if (o) {
          held[static_cast<size_t>(id)].push_back(o);
          got++;
        }
      }
    });
  }
  for (auto &x : th) x.join();
  EXPECT_EQ(got.load(), 5000u) << "exactly max_objects allocations succeed";
  for (auto &h : held)
    for (void *o : h) ak_pool_free(t.p, o);
}

// ---- SPINLOCK and LOCKFREE: per-thread magazines ---------------------------

class PoolMagazine : public ::testing::TestWithParam<ak_sync> {
 protected:
  // Everything went back: SPINLOCK releases every slab at trim, LOCKFREE
  // decommits them (which it only does when no slot is outside its stack).
  static void expect_all_back(Pool &t, size_t resident_full) {
    ak_pool_trim(t.p);
    ak_pool_stats s = t.stats();
    EXPECT_EQ(s.live, 0u);
    if (GetParam() == AK_SYNC_SPINLOCK)
      EXPECT_EQ(s.slabs, 0u) << "a slot stayed cached somewhere";
    else
      EXPECT_LT(s.bytes_resident, resident_full / 10) << "a slot stayed outside the stack";
  }
};
INSTANTIATE_TEST_SUITE_P(All, PoolMagazine, ::testing::Values(AK_SYNC_SPINLOCK, AK_SYNC_LOCKFREE),
                         [](const auto &pi) { return mode_name(pi.param); });

// Objects a thread freed go back to that thread first: its spilled batches
// wait in its stash, so another thread that allocates meanwhile gets new
// memory rather than them (while the pool can grow), and the first thread
// gets its own objects back.
TEST_P(PoolMagazine, ObjectsFreedByAThreadGoBackToIt) {
  if (ak_harden_double_free) GTEST_SKIP() << "no stash in the hardened double-free build";
  Pool t(48, GetParam());
  const size_t batch = mag_batch_for_tests(t.stats().slot_size);
  // Live objects of this thread, counted in the pool's total (a magazine
  // adds its count once it lags by more than kMagLagBatches), so that no
  // free of the other threads looks like the pool's last.
  std::vector<void *> sentinels;
  for (size_t i = 0; i < kMagLagBatches * batch + 1; i++) sentinels.push_back(ak_pool_alloc(t.p));
  const size_t n = 20000;
  std::vector<void *> a1, a2, b;
  std::mutex mu;
  std::condition_variable cv;
  int step = 0;
  auto wait_for = [&](int s) {
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [&] { return step >= s; });
  };
  auto go = [&](int s) {
    std::lock_guard<std::mutex> l(mu);
    step = s;
    cv.notify_all();
  };
  std::thread ta([&] {
    for (size_t i = 0; i < n; i++) a1.push_back(ak_pool_alloc(t.p));
    for (void *o : a1) ak_pool_free(t.p, o);
    go(1);
    wait_for(2);
    for (size_t i = 0; i < n; i++) a2.push_back(ak_pool_alloc(t.p));
  });
  std::thread tb([&] {
    wait_for(1);
    for (size_t i = 0; i < n; i++) b.push_back(ak_pool_alloc(t.p));
    go(2);
  });
  ta.join();
  tb.join();
  std::set<void *> first(a1.begin(), a1.end());
  size_t b_got = 0, a_got = 0;
  for (void *o : b) b_got += first.count(o);
  for (void *o : a2) a_got += first.count(o);
  EXPECT_LE(b_got, 2 * batch) << "the other thread took the objects the first one freed";
  EXPECT_GE(a_got, n - 2 * batch) << "the first thread did not get its own objects back";
  for (void *o : a2) ak_pool_free(t.p, o);
  for (void *o : b) ak_pool_free(t.p, o);
  for (void *o : sentinels) ak_pool_free(t.p, o);
  EXPECT_EQ(t.stats().live, 0u);
}

// When the pool cannot grow, a thread that ran out takes batches from
// another thread's stash: free objects one thread keeps are never lost to
// the others. The address space is capped in a forked child (no new
// mapping can be had there), where the other thread's magazine is still
// listed with its stash.
TEST_P(PoolMagazine, AThreadTakesAnotherThreadsStashWhenThePoolCannotGrow) {
  if (ak_harden_double_free) GTEST_SKIP() << "no stash in the hardened double-free build";
  if (AK_TEST_SANITIZED) GTEST_SKIP() << "a sanitizer's shadow memory needs address space of its own";
  Pool t(48, GetParam());
  const size_t batch = mag_batch_for_tests(t.stats().slot_size);
  std::vector<void *> sentinels;  // no free of the other thread looks like the pool's last
  for (size_t i = 0; i < 2 * batch + 1; i++) sentinels.push_back(ak_pool_alloc(t.p));
  const size_t n = 20000;
  std::mutex mu;
  std::condition_variable cv;
  int step = 0;
  std::thread ta([&] {
    std::vector<void *> v;
    for (size_t i = 0; i < n; i++) v.push_back(ak_pool_alloc(t.p));
    for (void *o : v) ak_pool_free(t.p, o);
    std::unique_lock<std::mutex> l(mu);
    step = 1;
    cv.notify_all();
    cv.wait(l, [&] { return step == 2; });  // alive, its stash kept, until the child ran
  });
  {
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [&] { return step == 1; });
  }
  std::vector<void *> got;
  got.reserve(n);
  pid_t pid = fork();
  if (pid == 0) {
    // Every mapping of the child is counted: the cap is what it has now.
    long pages = 0;
    FILE *f = std::fopen("/proc/self/statm", "r");
    if (!f || std::fscanf(f, "%ld", &pages) != 1) _exit(3);
    std::fclose(f);
    struct rlimit r = {(rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE), RLIM_INFINITY};
    if (setrlimit(RLIMIT_AS, &r) != 0) _exit(4);
    for (size_t i = 0; i < n / 2; i++) {
      void *o = ak_pool_alloc(t.p);
      if (!o) _exit(1);
      got.push_back(o);
    }
    _exit(0);
  }
  ASSERT_GT(pid, 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the child could not allocate what another thread's stash held (status " << status << ")";
  {
    std::lock_guard<std::mutex> l(mu);
    step = 2;
    cv.notify_all();
  }
  ta.join();
  for (void *o : sentinels) ak_pool_free(t.p, o);
  EXPECT_EQ(t.stats().live, 0u);
}

// A thread that exits hands its magazine back: trim (which only reaches the
// magazines of live threads) then finds every slot.
TEST_P(PoolMagazine, ThreadExitHandsMagazineBack) {
  Pool t(48, GetParam());
  void *survivor = nullptr;
  size_t resident_full = 0;
  std::thread([&] {
    std::vector<void *> v;
    for (int i = 0; i < 20000; i++) v.push_back(ak_pool_alloc(t.p));
    resident_full = t.stats().bytes_resident;
    survivor = v[10000];  // keeps the pool from looking empty to this thread
    for (size_t i = 0; i < v.size(); i++)
      if (v[i] != survivor) ak_pool_free(t.p, v[i]);
    EXPECT_EQ(t.stats().live, 1u);
  }).join();
  EXPECT_EQ(t.stats().live, 1u);
  ak_pool_free(t.p, survivor);
  expect_all_back(t, resident_full);
  // The pool works on after that.
  std::vector<void *> v;
  for (int i = 0; i < 1000; i++) v.push_back(ak_pool_alloc(t.p));
  for (void *o : v) ASSERT_NE(o, nullptr);
  for (void *o : v) ak_pool_free(t.p, o);
}

// The magazine's hit paths are inline (arenakit/detail/pool.h) where the
// library's would check nothing more: a release pool gets a magazine key,
// and its first call puts the thread's magazine in the thread cache, where
// the inline paths find it; a pool whose every call is counted (max_objects,
// checked and tracked builds) or whose links are encoded has none. Calls
// through the inline paths keep the counts exact, and destroying the pool
// takes its entry out of the cache.
TEST_P(PoolMagazine, InlinePathsServeTheThreadsMagazine) {
  /* A pool created while the heap profiler samples takes the library's path (arenakit/prof.h). */
  const bool inline_on = !AK_CHECKED && !_ak_track_mode() && !AK_POOL_INLINE_ENCODE && !ak_prof_active();
  Pool capped(48, GetParam(), 100000);
  EXPECT_EQ(capped.p->mkey, 0u) << "max_objects counts every call in the library";
  auto *t = new Pool(48, GetParam());
  ASSERT_EQ(t->p->mkey != 0, inline_on);
  const uint64_t key = t->p->mkey;
  const _ak_pool_tentry *e = _ak_pool_tentry_of(key);
  std::vector<void *> v;
  for (int round = 0; round < 50; round++) {
    for (int i = 0; i < 300; i++) v.push_back(ak_pool_alloc(t->p));  // past a magazine: refills
    if (inline_on) {
      ASSERT_EQ(e->key, key) << "the thread's magazine is in the thread cache";
      EXPECT_LE(e->state.mag->n, mag_batch_for_tests(48)) << "the chain holds at most one batch";
    }
    ASSERT_EQ(t->stats().live, v.size());
    for (int i = 0; i < 200; i++) {  // pairs: the magazine alone
      void *o = ak_pool_alloc(t->p);
      ASSERT_NE(o, nullptr);
      std::memset(o, 0x5a, 48);
      ak_pool_free(t->p, o);
    }
    for (int i = 0; i < 250; i++) {  // back through the magazine, spilling
      ak_pool_free(t->p, v.back());
      v.pop_back();
    }
    ASSERT_EQ(t->stats().live, v.size());
  }
  std::set<void *> distinct(v.begin(), v.end());
  EXPECT_EQ(distinct.size(), v.size()) << "an object handed out twice";
  for (void *o : v) ak_pool_free(t->p, o);
  EXPECT_EQ(t->stats().live, 0u);
  delete t;
  if (inline_on) {
    EXPECT_NE(e->key, key) << "a destroyed pool's entry stays in the cache";
  }
}

// A batch is about 16 KiB of objects: a pool of small objects moves 256
// at a time, one of large objects 64 (no more bytes per batch than 64
// objects of 256 bytes). The thread's chain, seen through the thread cache
// where the inline paths are on, never holds more than one batch, and it
// holds more than 64 objects only where the objects are small.
TEST_P(PoolMagazine, ABatchIsSizedByTheObjectSize) {
  const bool inline_on = !AK_CHECKED && !_ak_track_mode() && !AK_POOL_INLINE_ENCODE && !ak_prof_active();
  if (!inline_on) GTEST_SKIP() << "the chain is seen through the inline paths' thread cache";
  for (size_t size : {48u, 128u, 1024u}) {
    Pool t(size, GetParam());
    const size_t batch = mag_batch_for_tests(t.stats().slot_size);
    const _ak_pool_tentry *e = _ak_pool_tentry_of(t.p->mkey);
    std::vector<void *> v;
    size_t most = 0;
    for (int i = 0; i < 1000; i++) {
      v.push_back(ak_pool_alloc(t.p));
      ASSERT_EQ(e->key, t.p->mkey) << "the thread's magazine is in the thread cache";
      most = std::max<size_t>(most, e->state.mag->n);
    }
    for (void *o : v) {
      ak_pool_free(t.p, o);
      most = std::max<size_t>(most, e->state.mag->n);
    }
    EXPECT_LE(most, batch) << size << "-byte objects: the chain holds at most one batch";
    EXPECT_GE(most, batch - 1) << size << "-byte objects: a refill brings a whole batch";
    if (size <= 64) {
      EXPECT_GT(most, 64u) << "small objects move in batches larger than 64";
    }
    if (size >= 256) {
      EXPECT_EQ(batch, 64u) << "large objects move in batches of 64";
    }
  }
}

// A thread that alternates between two pools (each call switches the
// magazine it uses last) gets every object from the pool it asked and
// gives it back there: the counts stay exact, each pool owns exactly its
// objects, and both give everything back. A pool made after another was
// destroyed (often at the same address) starts with a magazine of its own.
TEST_P(PoolMagazine, AlternatingPoolsKeepTheirObjectsApart) {
  std::vector<void *> va, vb;
  {
    Pool a(48, GetParam()), b(48, GetParam());
    size_t resident_a = 0, resident_b = 0;
    for (int i = 0; i < 3000; i++) {
      va.push_back(ak_pool_alloc(a.p));
      vb.push_back(ak_pool_alloc(b.p));
      ASSERT_NE(va.back(), nullptr);
      ASSERT_NE(vb.back(), nullptr);
      if (i % 3 == 2) {  // free one of each now and then, alternating too
        ak_pool_free(a.p, va[i / 2]);
        ak_pool_free(b.p, vb[i / 2]);
        va[i / 2] = vb[i / 2] = nullptr;
      }
    }
    size_t live_a = 0, live_b = 0;
    for (size_t i = 0; i < va.size(); i++) {
      if (va[i]) {
        live_a++;
        EXPECT_TRUE(ak_pool_owns(a.p, va[i]) && !ak_pool_owns(b.p, va[i])) << "object " << i << " of a";
      }
      if (vb[i]) {
        live_b++;
        EXPECT_TRUE(ak_pool_owns(b.p, vb[i]) && !ak_pool_owns(a.p, vb[i])) << "object " << i << " of b";
      }
    }
    EXPECT_EQ(a.stats().live, live_a);
    EXPECT_EQ(b.stats().live, live_b);
    resident_a = a.stats().bytes_resident;
    resident_b = b.stats().bytes_resident;
    for (size_t i = 0; i < va.size(); i++) {
      if (va[i]) ak_pool_free(a.p, va[i]);
      if (vb[i]) ak_pool_free(b.p, vb[i]);
    }
    expect_all_back(a, resident_a);
    expect_all_back(b, resident_b);
  }
  // The pools are gone; new ones start empty and hand out their own slots.
  Pool c(48, GetParam());
  void *o = ak_pool_alloc(c.p);
  ASSERT_NE(o, nullptr);
  EXPECT_TRUE(ak_pool_owns(c.p, o));
  EXPECT_EQ(c.stats().live, 1u);
  ak_pool_free(c.p, o);
  EXPECT_EQ(c.stats().live, 0u);
}

// ak_pool_trim takes the magazines of threads that are still running (and
// that keep using the pool afterwards).
TEST_P(PoolMagazine, TrimEmptiesOtherThreadsMagazines) {
  Pool t(48, GetParam());
  std::atomic<int> phase{0};
  void *survivor = nullptr;
  size_t resident_full = 0;
  std::thread worker([&] {
    std::vector<void *> v;
    for (int i = 0; i < 20000; i++) v.push_back(ak_pool_alloc(t.p));
    resident_full = t.stats().bytes_resident;
    survivor = v[0];
    for (size_t i = 1; i < v.size(); i++) ak_pool_free(t.p, v[i]);
    phase = 1;
    while (phase.load() != 2) std::this_thread::yield();
    // Robbed of its magazine, it goes on allocating and freeing.
    v.clear();
    for (int i = 0; i < 5000; i++) v.push_back(ak_pool_alloc(t.p));
    for (void *o : v) ak_pool_free(t.p, o);
  });
  while (phase.load() != 1) std::this_thread::yield();
  ak_pool_free(t.p, survivor);
  expect_all_back(t, resident_full);
  phase = 2;
  worker.join();
  EXPECT_EQ(t.stats().live, 0u);
  expect_all_back(t, resident_full);
}

// A trim takes the magazines while their owners allocate and free (the
// owner and the thief each claim a chain with one exchange,
// src/pool/modes/magazine/magazine.c): no object is ever held by two at once. Each
// owner stamps all of its objects' words and finds them intact before it
// frees them.
TEST_P(PoolMagazine, TrimWhileOwnersRunHandsNoObjectOutTwice) {
  Pool t(64, GetParam());
  std::atomic<bool> stop{false};
  std::atomic<long> bad{0}, rounds{0};
  auto owner = [&](uint64_t id) {
    std::vector<uint64_t *> v;
    for (uint64_t seq = 1; !stop.load(std::memory_order_relaxed); rounds++) {
      for (size_t i = 0, k = 1 + seq % 150; i < k; i++, seq++) {
        auto *o = static_cast<uint64_t *>(ak_pool_alloc(t.p));
        if (!o) {
          bad++;
          break;
        }
        for (int w = 0; w < 8; w++) o[w] = id << 56 | seq;
        v.push_back(o);
      }
      for (uint64_t *o : v)
        for (int w = 0; w < 8; w++)
          if (o[w] >> 56 != id || o[w] != o[0]) bad++;
      for (uint64_t *o : v) ak_pool_free(t.p, o);
      v.clear();
    }
  };
  std::thread a(owner, 1), b(owner, 2);
  long trims = 0;
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  while (std::chrono::steady_clock::now() < until || trims < 50 || rounds.load() < 50) {
    ak_pool_trim(t.p);
    trims++;
  }
  stop = true;
  a.join();
  b.join();
  EXPECT_EQ(bad.load(), 0) << "objects held by two owners at once";
  EXPECT_EQ(t.stats().live, 0u);
}

// The cap counts exactly, whatever the magazines cache: with 4 threads
// allocating until refused, exactly max_objects succeed; frees by other
// threads make exactly that much room again; live and peak are exact.
TEST_P(PoolMagazine, MaxObjectsExactUnderThreads) {
  constexpr size_t kCap = 3000;
  Pool t(40, GetParam(), kCap);
  std::vector<std::vector<void *>> held(4);
  auto grab = [&](size_t id) {
    for (;;) {
      void *o = ak_pool_alloc(t.p);
      if (!o) break;
      held[id].push_back(o);
    }
  };
  std::vector<std::thread> th;
  for (size_t id = 0; id < 4; id++) th.emplace_back(grab, id);
  for (auto &x : th) x.join();
  size_t got = 0;
  for (auto &h : held) got += h.size();
  EXPECT_EQ(got, kCap);
  EXPECT_EQ(t.stats().live, kCap);
  EXPECT_EQ(t.stats().peak_live, kCap);
  // Thread k frees what thread k+1 allocated (cross-thread frees), 500 each.
  th.clear();
  std::vector<std::vector<void *>> freed(4);
  for (size_t id = 0; id < 4; id++)
    th.emplace_back([&, id] {
      auto &h = held[(id + 1) % 4];
      for (size_t i = 0; i < 500 && !h.empty(); i++) {
        ak_pool_free(t.p, h.back());
        h.pop_back();
      }
    });
  for (auto &x : th) x.join();
  size_t left = 0;
  for (auto &h : held) left += h.size();
  EXPECT_EQ(t.stats().live, left);
  th.clear();
  std::vector<std::vector<void *>> again(4);
  std::atomic<size_t> regained{0};
  for (size_t id = 0; id < 4; id++)
    th.emplace_back([&, id] {
      for (void *o; (o = ak_pool_alloc(t.p)) != nullptr;) again[id].push_back(o);
      regained += again[id].size();
    });
  for (auto &x : th) x.join();
  EXPECT_EQ(regained.load(), kCap - left) << "exactly the freed room is allocated again";
  EXPECT_EQ(t.stats().live, kCap);
  for (auto *v : {&held, &again})
    for (auto &h : *v)
      for (void *o : h) ak_pool_free(t.p, o);
  EXPECT_EQ(t.stats().live, 0u);
  EXPECT_EQ(t.stats().peak_live, kCap);
}

// Stats add up with objects allocated by one thread and freed by another,
// while those threads are parked (quiescent: live is exact) and after they
// exit; the sampled peak lies between the true peak less the magazines'
// unflushed counts and the true peak.
TEST_P(PoolMagazine, StatsAddUpAcrossThreads) {
  Pool t(64, GetParam());
  const size_t batch = mag_batch_for_tests(t.stats().slot_size);
  constexpr int kT = 4, kEach = 5000;
  std::vector<std::vector<void *>> v(kT);
  std::atomic<int> done{0}, go_free{0};
  std::vector<std::thread> th;
  for (int id = 0; id < kT; id++)
    th.emplace_back([&, id] {
      for (int i = 0; i < kEach; i++) v[static_cast<size_t>(id)].push_back(ak_pool_alloc(t.p));
      done++;
      while (go_free.load() == 0) std::this_thread::yield();
      // Free half of the next thread's objects.
      auto &h = v[static_cast<size_t>((id + 1) % kT)];
      for (size_t i = 0; i < h.size(); i += 2) ak_pool_free(t.p, h[i]);
      done++;
      while (go_free.load() == 1) std::this_thread::yield();
    });
  while (done.load() != kT) std::this_thread::yield();
  ak_pool_stats s = t.stats();
  EXPECT_EQ(s.live, static_cast<size_t>(kT * kEach)) << "parked threads: exact";
  EXPECT_LE(s.peak_live, static_cast<size_t>(kT * kEach));
  EXPECT_GE(s.peak_live + kT * kMagLagBatches * batch, static_cast<size_t>(kT * kEach));
  go_free = 1;
  while (done.load() != 2 * kT) std::this_thread::yield();
  EXPECT_EQ(t.stats().live, static_cast<size_t>(kT * kEach / 2));
  go_free = 2;
  for (auto &x : th) x.join();
  EXPECT_EQ(t.stats().live, static_cast<size_t>(kT * kEach / 2)) << "after the threads exited";
  for (auto &h : v)
    for (size_t i = 1; i < h.size(); i += 2) ak_pool_free(t.p, h[i]);
  EXPECT_EQ(t.stats().live, 0u);
  ak_pool_stats e = t.stats();
  EXPECT_EQ(e.slab_allocs - e.slab_releases, e.slabs);
  EXPECT_EQ(e.bytes_reserved, e.slabs * 65536);
}

// Stats read while owners allocate and free: each magazine's count and the
// pool's are read as of one instant, so `live` never exceeds what the
// threads hold. Each thread holds kEach objects, frees kSwing and takes
// them again: batches come and go (and trims steal chains, whose stale
// lengths the owners then drop) while the stats read the counts.
TEST_P(PoolMagazine, StatsWhileOwnersRunCountNoMoreThanTheyHold) {
  Pool t(24, GetParam());
  constexpr size_t kEach = 3000, kSwing = 150;
  constexpr int kT = 3;
  std::atomic<bool> stop{false};
  std::vector<std::thread> th;
  for (int id = 0; id < kT; id++)
    th.emplace_back([&] {
      std::vector<void *> mine;
      mine.reserve(kEach);
      while (!stop.load(std::memory_order_relaxed)) {
        while (mine.size() < kEach) mine.push_back(ak_pool_alloc(t.p));
        for (size_t i = 0; i < kSwing; i++) {
          ak_pool_free(t.p, mine.back());
          mine.pop_back();
        }
      }
      for (void *o : mine) ak_pool_free(t.p, o);
    });
  size_t worst = 0;
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(800);
  size_t reads = 0;
  while (std::chrono::steady_clock::now() < until) {
    if (reads++ % 2) ak_pool_trim(t.p);  // steals chains: stale lengths the owners drop
    worst = std::max(worst, t.stats().live);
  }
  stop = true;
  for (auto &x : th) x.join();
  EXPECT_LE(worst, kT * kEach) << "a stats read counted a batch or a flush twice (" << reads << " reads)";
  EXPECT_EQ(t.stats().live, 0u);
}

// Trim racing with threads that allocate and free (TSan's target: a
// magazine is taken by one exchange while its owner works on it).
TEST_P(PoolMagazine, TrimRacesWithOwners) {
  Pool t(24, GetParam());
  std::atomic<bool> stop{false}, bad{false};
  std::vector<std::thread> th;
  for (int id = 0; id < 3; id++)
    th.emplace_back([&, id] {
      std::mt19937 rng(static_cast<unsigned>(id));
      std::vector<uint64_t *> mine;
      while (!stop.load()) {
        if (mine.size() < 200 && (rng() & 1)) {
          auto *o = static_cast<uint64_t *>(ak_pool_alloc(t.p));
          if (!o) {
            bad = true;
            return;
          }
          o[0] = o[2] = static_cast<uint64_t>(id) * 77 + mine.size();
          mine.push_back(o);
        } else if (!mine.empty()) {
          uint64_t *o = mine.back();
          mine.pop_back();
          if (o[0] != o[2] || o[0] != static_cast<uint64_t>(id) * 77 + mine.size()) bad = true;
          ak_pool_free(t.p, o);
        }
      }
      for (uint64_t *o : mine) ak_pool_free(t.p, o);
    });
  for (int i = 0; i < 300; i++) {
    ak_pool_trim(t.p);
    ak_pool_stats s = t.stats();
    EXPECT_LE(s.live, 3u * 200u);
    std::this_thread::yield();
  }
  stop = true;
  for (auto &x : th) x.join();
  EXPECT_FALSE(bad.load()) << "an object changed under its owner or an allocation failed";
  EXPECT_EQ(t.stats().live, 0u);
}

TEST(PoolThreads, ThreadExitHandsSlabsBack) {
  Pool t(64, AK_SYNC_THREADS, 0, true);
  std::vector<void *> survivors;
  std::thread([&] {
    std::vector<void *> v;
    for (int i = 0; i < 50000; i++) v.push_back(ak_pool_alloc(t.p));
    // Keep 1 in 100 alive past the thread's exit, free the rest.
    for (size_t i = 0; i < v.size(); i++) {
      if (i % 100 == 0)
        survivors.push_back(v[i]);
      else
        ak_pool_free(t.p, v[i]);
    }
  }).join();
  EXPECT_EQ(t.stats().live, survivors.size());
  size_t slabs_after_exit = t.stats().slabs;
  EXPECT_GT(slabs_after_exit, 0u);
  // Another thread frees the survivors: the abandoned slabs empty out and
  // go back to the OS.
  std::thread([&] {
    for (void *o : survivors) ak_pool_free(t.p, o);
  }).join();
  EXPECT_EQ(t.stats().live, 0u);
  EXPECT_EQ(t.stats().slabs, 0u) << "nothing stranded after the owner exited";
}

TEST(PoolThreads, AbandonedSlabsAreAdopted) {
  Pool t(64, AK_SYNC_THREADS);
  std::vector<void *> keep;
  std::thread([&] {
    for (int i = 0; i < 5000; i++) keep.push_back(ak_pool_alloc(t.p));
    for (size_t i = 0; i < keep.size(); i += 2) ak_pool_free(t.p, keep[i]);
  }).join();
  size_t allocs = t.stats().slab_allocs;
  // This thread reuses the freed halves of the abandoned slabs.
  std::vector<void *> mine;
  for (int i = 0; i < 2000; i++) mine.push_back(ak_pool_alloc(t.p));
  EXPECT_EQ(t.stats().slab_allocs, allocs) << "abandoned slabs are adopted before new ones are mapped";
  for (void *o : mine) ak_pool_free(t.p, o);
  for (size_t i = 1; i < keep.size(); i += 2) ak_pool_free(t.p, keep[i]);
  EXPECT_EQ(t.stats().live, 0u);
}

// The peak's documented precision in THREADS (pool.h): a heap that grows
// past its own high is sampled within 8 slabs, any other within 64. Two
// heaps each reach their highs alone, then hold them together: the pool's
// count doubles with neither heap past its own high.
TEST(PoolThreads, PeakOfHeapsBelowTheirOwnHighsIsWithinTheBound) {
  Pool t(100, AK_SYNC_THREADS);
  constexpr size_t kN = 100000;
  std::atomic<int> phase{0};
  std::atomic<size_t> failed{0};
  auto fill = [&](std::vector<void *> &v) {
    for (size_t i = 0; i < kN; i++) {
      void *o = ak_pool_alloc(t.p);
      if (!o) failed++;
      v.push_back(o);
    }
  };
  auto worker = [&](int me) {
    std::vector<void *> v;
    auto wait_for = [&](int ph) {
      while (phase.load(std::memory_order_acquire) != ph) std::this_thread::yield();
    };
    wait_for(me); /* alone: up to its own high and back to nothing */
    fill(v);
    for (void *o : v) ak_pool_free(t.p, o);
    v.clear();
    phase.fetch_add(1, std::memory_order_acq_rel);
    wait_for(me + 2); /* together: both hold kN */
    fill(v);
    phase.fetch_add(1, std::memory_order_acq_rel);
    wait_for(4); /* both hold kN: then back to nothing, so that the stats call sees only samples */
    for (void *o : v) ak_pool_free(t.p, o);
  };
  std::thread a(worker, 0), b(worker, 1);
  a.join();
  b.join();
  ASSERT_EQ(failed.load(), 0u) << ak_last_error();
  ak_pool_stats s = t.stats();
  EXPECT_EQ(s.live, 0u);
  const size_t per_slab = 65536 / s.slot_size;
  EXPECT_LE(s.peak_live, 2 * kN);
  EXPECT_GE(s.peak_live + 2 * 64 * per_slab, 2 * kN) << "a miss of 64 slabs per heap at most";
}

TEST(PoolThreads, ProducerConsumer) {
  Pool t(128, AK_SYNC_THREADS);
  constexpr int kN = 200000;
  std::vector<std::atomic<void *>> ring(256);
  for (auto &r : ring) r.store(nullptr);
  std::thread producer([&] {
    for (int i = 0; i < kN; i++) {
      auto *o = static_cast<int *>(ak_pool_alloc(t.p));
      *o = i;
      auto &slot = ring[static_cast<size_t>(i) % ring.size()];
      while (slot.load(std::memory_order_acquire) != nullptr) std::this_thread::yield();
      slot.store(o, std::memory_order_release);
    }
  });
  long sum = 0;
  for (int i = 0; i < kN; i++) {
    auto &slot = ring[static_cast<size_t>(i) % ring.size()];
    void *o;
    while ((o = slot.load(std::memory_order_acquire)) == nullptr) std::this_thread::yield();
    slot.store(nullptr, std::memory_order_release);
    sum += *static_cast<int *>(o);
    ak_pool_free(t.p, o);
  }
  producer.join();
  EXPECT_EQ(sum, static_cast<long>(kN) * (kN - 1) / 2);
  EXPECT_EQ(t.stats().live, 0u);
  ak_pool_trim(t.p);
  EXPECT_LE(t.stats().slabs, 2u);
}

// Slots that another thread frees into slabs on the owner's full list are
// found again (the full list is walked when a remote free reached one), so
// the owner reuses them instead of taking new slabs.
TEST(PoolThreads, RemoteFreesIntoFullSlabsAreReused) {
  Pool t(64, AK_SYNC_THREADS);
  std::vector<void *> v;
  for (int i = 0; i < 20000; i++) v.push_back(ak_pool_alloc(t.p));  // about 20 slabs, full
  const size_t allocs = t.stats().slab_allocs;
  for (int round = 0; round < 3; round++) {
    std::thread([&] {
      for (void *o : v) ak_pool_free(t.p, o);
    }).join();
    for (auto &o : v) {
      o = ak_pool_alloc(t.p);
      ASSERT_NE(o, nullptr);
    }
    EXPECT_EQ(t.stats().slab_allocs, allocs)
        << "round " << round << ": new slabs although the full ones had room";
  }
  for (void *o : v) ak_pool_free(t.p, o);
  EXPECT_EQ(t.stats().live, 0u);
}

// Each thread keeps up to spare_slabs of the slabs it emptied, for itself:
// it gets exactly those back (no new slab, no other thread's), never keeps
// more, hands them to the pool when it exits, and ak_pool_trim gives them
// back (the caller's at once, another thread's at its next slow path).
TEST(PoolThreads, EachThreadReusesTheSlabsItEmptied) {
  const ak_pool_options o = spare_options(AK_SYNC_THREADS, 8);
  Pool t(o);
  constexpr int kN = 6000;  // about 6 slabs of 64 KiB
  auto fill = [&](std::vector<void *> &v) {
    v.clear();
    for (int i = 0; i < kN; i++) v.push_back(ak_pool_alloc(t.p));
  };
  std::vector<void *> a, b;
  std::set<uintptr_t> a_slabs, b_slabs;
  std::atomic<int> step{0};
  auto wait_for = [&](int k) {
    while (step.load() < k) std::this_thread::yield();
  };
  // Two threads fill and empty their slabs in turn: their spares interleave
  // in time, and each must get its own back.
  std::thread ta([&] {
    fill(a);
    a_slabs = slab_set(a);
    for (void *x : a) ak_pool_free(t.p, x);
    step = 1;
    wait_for(2);
    fill(a);
    EXPECT_EQ(slab_set(a), a_slabs) << "thread A got back the slabs it emptied";
    for (void *x : a) ak_pool_free(t.p, x);
    step = 3;
    wait_for(4);
    // B's trim asked A to trim at its next slow path: its spares go back
    // before it takes a slab again.
    size_t releases = t.stats().slab_releases;
    fill(a);
    EXPECT_GE(t.stats().slab_releases, releases + a_slabs.size() - 1)
        << "A's spares went back at its next slow path";
    for (void *x : a) ak_pool_free(t.p, x);
  });
  std::thread tb([&] {
    wait_for(1);
    fill(b);
    b_slabs = slab_set(b);
    for (void *x : b) ak_pool_free(t.p, x);
    step = 2;
    wait_for(3);
    size_t allocs = t.stats().slab_allocs;
    fill(b);
    EXPECT_EQ(slab_set(b), b_slabs) << "thread B got back the slabs it emptied";
    EXPECT_EQ(t.stats().slab_allocs, allocs) << "no new slab while the thread had spares";
    for (void *x : b) ak_pool_free(t.p, x);
    // A keeps its spares while it waits: ask for a trim; B's go at once.
    size_t before = t.stats().slabs;
    ak_pool_trim(t.p);
    EXPECT_LE(t.stats().slabs + b_slabs.size() - 1, before) << "the caller's spares went back at once";
    step = 4;
  });
  ta.join();
  tb.join();
  for (uintptr_t s : a_slabs) EXPECT_EQ(b_slabs.count(s), 0u) << "the threads' slabs are distinct";
  EXPECT_EQ(t.stats().live, 0u);
  // The exited threads' spares went to the pool (at most spare_slabs);
  // a trim gives them back.
  EXPECT_LE(t.stats().slabs, o.spare_slabs);
  ak_pool_trim(t.p);
  EXPECT_EQ(t.stats().slabs, 0u);
}

// A thread keeps at most spare_slabs of its emptied slabs.
TEST(PoolThreads, ThreadSparesAreBounded) {
  const ak_pool_options o = spare_options(AK_SYNC_THREADS, 2);
  Pool t(o);
  std::vector<void *> v;
  for (int i = 0; i < 20000; i++) v.push_back(ak_pool_alloc(t.p));  // about 20 slabs
  size_t releases = t.stats().slab_releases;
  for (void *x : v) ak_pool_free(t.p, x);
  EXPECT_EQ(t.stats().slabs, 1u + o.spare_slabs) << "the current slab and two spares";
  EXPECT_GT(t.stats().slab_releases, releases) << "the rest went back to the OS";
}

TEST(PoolThreads, ManyShortLivedThreads) {
  Pool t(40, AK_SYNC_THREADS, 0, true);
  for (int round = 0; round < 50; round++) {
    std::vector<std::thread> th;
    for (int k = 0; k < 4; k++)
      th.emplace_back([&] {
        std::vector<void *> v;
        for (int i = 0; i < 500; i++) v.push_back(ak_pool_alloc(t.p));
        for (void *o : v) ak_pool_free(t.p, o);
      });
    for (auto &x : th) x.join();
  }
  EXPECT_EQ(t.stats().live, 0u);
  EXPECT_LE(t.stats().slabs, 1u);
}

// ---- per-thread state of the concurrent modes (src/pool/pool_tls.c) ---------
// THREADS heaps and SPINLOCK/LOCKFREE magazines share one registry of pools,
// one table per thread and one thread-exit walk.

// Slabs (64 KiB, aligned) that hold at least one of `objs`.
size_t slabs_holding(const std::vector<void *> &objs) { return slab_set(objs).size(); }

// A thread that used a pool of every concurrent mode exits: each pool gets
// its state back from the one walk (THREADS: the heap's slabs are abandoned,
// empty ones released at once; SPINLOCK: the magazine's objects go back, so
// the slabs it kept empty are released without a trim), the counts stay
// exact, and the survivors freed by another thread leave nothing behind.
TEST(PoolThreadExit, ThreadThatUsedEveryModeExits) {
  Pool th(64, AK_SYNC_THREADS, 0, true), sp(48, AK_SYNC_SPINLOCK, 0, true), lf(48, AK_SYNC_LOCKFREE, 0, true);
  Pool *pools[3] = {&th, &sp, &lf};
  std::vector<void *> survivors[3];
  std::thread([&] {
    for (int k = 0; k < 3; k++) {
      std::vector<void *> v;
      for (int i = 0; i < 5000; i++) v.push_back(ak_pool_alloc(pools[k]->p));
      for (size_t i = 0; i < v.size(); i++) {
        if (i % 1000 == 0)
          survivors[k].push_back(v[i]);
        else
          ak_pool_free(pools[k]->p, v[i]);
      }
    }
  }).join();
  for (int k = 0; k < 3; k++) EXPECT_EQ(pools[k]->stats().live, survivors[k].size()) << k;
  EXPECT_EQ(th.stats().slabs, slabs_holding(survivors[0])) << "THREADS: the exited heap kept empty slabs";
  EXPECT_EQ(sp.stats().slabs, slabs_holding(survivors[1])) << "SPINLOCK: the exited magazine kept slots";
  std::thread([&] {
    for (int k = 0; k < 3; k++)
      for (void *o : survivors[k]) ak_pool_free(pools[k]->p, o);
  }).join();
  for (int k = 0; k < 3; k++) {
    ak_pool_trim(pools[k]->p);
    EXPECT_EQ(pools[k]->stats().live, 0u) << k;
  }
  EXPECT_EQ(th.stats().slabs, 0u);
  EXPECT_EQ(sp.stats().slabs, 0u);
  // The slots handed back are reused: a new thread allocates from them.
  for (Pool *t : pools) {
    std::thread([&] {
      std::vector<void *> v;
      for (int i = 0; i < 3000; i++) v.push_back(ak_pool_alloc(t->p));
      for (void *o : v) ASSERT_TRUE(o != nullptr && ak_pool_owns(t->p, o));
      expect_disjoint(std::vector<uintptr_t>(reinterpret_cast<uintptr_t *>(v.data()),
                                             reinterpret_cast<uintptr_t *>(v.data() + v.size())),
                      48);
      for (void *o : v) ak_pool_free(t->p, o);
    }).join();
    EXPECT_EQ(t->stats().live, 0u);
  }
}

// A pool used from a thread-specific destructor that runs after the
// library's thread-exit walk (glibc repeats the destructor passes while a
// key is set again): the walk left none of the thread's inline cache
// entries behind (they pointed to the heap and magazine it freed), so the
// late calls take the library's path, get a new heap and magazine, count
// exactly, and their state goes back at the next walk.
struct LateUse {
  ak_pool *pools[2];
  int calls = 0;
  size_t stale_entries = 0;
  size_t live[2] = {0, 0};
  bool owned = false;
};
pthread_key_t late_key;

void late_use(void *arg) {
  auto *u = static_cast<LateUse *>(arg);
  if (++u->calls == 1) { /* maybe before the library's walk: once more */
    pthread_setspecific(late_key, u);
    return;
  }
  for (const _ak_pool_tentry &e : _ak_pool_tcache) u->stale_entries += e.key != 0;
  void *o[2];
  u->owned = true;
  for (int k = 0; k < 2; k++) {
    o[k] = ak_pool_alloc(u->pools[k]);
    u->owned = u->owned && o[k] != nullptr && ak_pool_owns(u->pools[k], o[k]);
    ak_pool_stats st;
    ak_pool_stats_get(u->pools[k], &st);
    u->live[k] = st.live;
  }
  for (int k = 0; k < 2; k++) ak_pool_free(u->pools[k], o[k]);
}

TEST(PoolThreadExit, PoolUsedByALaterDestructorStartsAfresh) {
  Pool th(64, AK_SYNC_THREADS), sp(48, AK_SYNC_SPINLOCK);
  ASSERT_EQ(pthread_key_create(&late_key, late_use), 0);
  LateUse u;
  u.pools[0] = th.p;
  u.pools[1] = sp.p;
  std::thread([&] {
    pthread_setspecific(late_key, &u);
    for (int k = 0; k < 2; k++) { /* fills the inline cache */
      std::vector<void *> v;
      for (int i = 0; i < 100; i++) v.push_back(ak_pool_alloc(u.pools[k]));
      for (void *o : v) ak_pool_free(u.pools[k], o);
    }
  }).join();
  pthread_key_delete(late_key);
  EXPECT_EQ(u.calls, 2);
  EXPECT_EQ(u.stale_entries, 0u) << "the thread-exit walk left inline cache entries";
  EXPECT_TRUE(u.owned);
  EXPECT_EQ(u.live[0], 1u);
  EXPECT_EQ(u.live[1], 1u);
  EXPECT_EQ(th.stats().live, 0u);
  EXPECT_EQ(sp.stats().live, 0u);
}

// Pools destroyed (with live objects) while the threads that used them run
// on; new pools are made at once (likely at the old addresses) and used by
// the same threads, which then exit. Thread exit must skip the states of
// the destroyed pools (freed by destroy: ASan sees any touch) and never
// take them for the new pools' (ids differ), and must hand the new pools'
// states back exactly.
TEST(PoolThreadExit, PoolsDestroyedWhileTheirThreadsRun) {
  const ak_sync modes[3] = {AK_SYNC_THREADS, AK_SYNC_SPINLOCK, AK_SYNC_LOCKFREE};
  auto make = [](ak_sync m) {
    ak_pool_options o{};
    o.object_size = 48;
    o.sync = m;
    o.name = "doomed";
    ak_pool *p = ak_pool_create(&o);
    EXPECT_NE(p, nullptr) << ak_last_error();
    return p;
  };
  ak_pool *pools[3];
  for (int k = 0; k < 3; k++) pools[k] = make(modes[k]);
  constexpr int kT = 3;
  std::atomic<int> phase{0}, done{0};
  std::vector<std::vector<void *>> survivors(3);
  std::mutex mu;
  std::vector<std::thread> th;
  for (int id = 0; id < kT; id++)
    th.emplace_back([&] {
      // Phase 0: use the first pools; keep objects live in them.
      for (ak_pool *p : pools) {
        std::vector<void *> v;
        for (int i = 0; i < 700; i++) v.push_back(ak_pool_alloc(p));
        for (size_t i = 0; i < v.size(); i += 2) ak_pool_free(p, v[i]);
      }
      done++;
      while (phase.load() != 1) std::this_thread::yield();
      // Phase 1: the same threads use the new pools.
      for (int k = 0; k < 3; k++) {
        std::vector<void *> v;
        for (int i = 0; i < 700; i++) {
          v.push_back(ak_pool_alloc(pools[k]));
          ASSERT_TRUE(v.back() != nullptr && ak_pool_owns(pools[k], v.back()));
        }
        for (size_t i = 0; i < v.size(); i++) {
          if (i % 100 == 0) {
            std::lock_guard<std::mutex> g(mu);
            survivors[static_cast<size_t>(k)].push_back(v[i]);
          } else {
            ak_pool_free(pools[k], v[i]);
          }
        }
      }
    });
  while (done.load() != kT) std::this_thread::yield();
  ak_pool *old[3];
  for (int k = 0; k < 3; k++) {
    old[k] = pools[k];
    ak_pool_destroy(pools[k]);
    pools[k] = make(modes[k]);
  }
  bool reused = std::equal(old, old + 3, pools);
  phase = 1;
  for (auto &x : th) x.join();
  for (int k = 0; k < 3; k++) {
    ak_pool_stats st;
    ak_pool_stats_get(pools[k], &st);
    EXPECT_EQ(st.live, survivors[static_cast<size_t>(k)].size())
        << mode_name(modes[k]) << " reused " << reused;
    for (void *o : survivors[static_cast<size_t>(k)]) ak_pool_free(pools[k], o);
    ak_pool_trim(pools[k]);
    ak_pool_stats_get(pools[k], &st);
    EXPECT_EQ(st.live, 0u) << mode_name(modes[k]);
    if (modes[k] != AK_SYNC_LOCKFREE) {
      EXPECT_EQ(st.slabs, 0u) << mode_name(modes[k]);
    }
    ak_pool_destroy(pools[k]);
  }
}

// One thread uses more pools than either cache holds (magazines: 8 entries,
// THREADS: AK_POOL_TCACHE) of every mode, after it used pools that were
// destroyed since (their entries are pruned when its table is full), in
// turn and repeatedly: each object stays in its pool, counts are exact, and
// at its exit every pool gets its state back.
TEST(PoolThreadExit, TableGrowsPastTheCaches) {
  constexpr int kEach = AK_POOL_TCACHE + 5;  // > 16 and > 8 pools of each kind
  const ak_sync modes[3] = {AK_SYNC_THREADS, AK_SYNC_SPINLOCK, AK_SYNC_LOCKFREE};
  std::vector<ak_pool *> pools;
  std::vector<std::vector<uint64_t *>> held;
  std::atomic<bool> bad{false};
  auto make = [](ak_sync m, size_t size) {
    ak_pool_options o{};
    o.object_size = size;
    o.sync = m;
    o.name = "many";
    return ak_pool_create(&o);
  };
  std::thread([&] {
    // Pools used, then destroyed, in rounds: stale entries fill the table
    // (pruned when it is full), and new pools may get their addresses.
    for (int round = 0; round < 4; round++) {
      std::vector<ak_pool *> gone;
      for (int i = 0; i < 12; i++) gone.push_back(make(modes[i % 3], 32));
      for (ak_pool *p : gone) ak_pool_free(p, ak_pool_alloc(p));
      for (ak_pool *p : gone) ak_pool_destroy(p);
    }
    for (int i = 0; i < 3 * kEach; i++) {
      pools.push_back(make(modes[i % 3], 16 + 8 * static_cast<size_t>(i % 4)));
      held.emplace_back();
    }
    std::mt19937 rng(11);
    for (int step = 0; step < 60000; step++) {
      size_t k = rng() % pools.size();
      auto &h = held[k];
      if (h.size() < 40 && (rng() & 1)) {
        auto *o = static_cast<uint64_t *>(ak_pool_alloc(pools[k]));
        if (!o || !ak_pool_owns(pools[k], o)) {
          bad = true;
          return;
        }
        *o = reinterpret_cast<uintptr_t>(pools[k]) ^ reinterpret_cast<uintptr_t>(o);
        h.push_back(o);
      } else if (!h.empty()) {
        size_t i = rng() % h.size();
        if (*h[i] != (reinterpret_cast<uintptr_t>(pools[k]) ^ reinterpret_cast<uintptr_t>(h[i]))) bad = true;
        ak_pool_free(pools[k], h[i]);
        h[i] = h.back();
        h.pop_back();
      }
    }
    for (size_t k = 0; k < pools.size(); k++) {
      ak_pool_stats st;
      ak_pool_stats_get(pools[k], &st);
      if (st.live != held[k].size()) bad = true;
    }
  }).join();
  EXPECT_FALSE(bad.load()) << "an object left its pool, changed, or a count was off";
  for (size_t k = 0; k < pools.size(); k++) {
    ak_pool_stats st;
    ak_pool_stats_get(pools[k], &st);
    EXPECT_EQ(st.live, held[k].size()) << k;
    for (uint64_t *o : held[k]) ak_pool_free(pools[k], o);
    ak_pool_trim(pools[k]);
    ak_pool_stats_get(pools[k], &st);
    EXPECT_EQ(st.live, 0u) << k;
    if (modes[k % 3] != AK_SYNC_LOCKFREE) {
      EXPECT_EQ(st.slabs, 0u) << k << " kept a slab after its thread exited";
    }
    ak_pool_destroy(pools[k]);
  }
}

// ---- AK_SYNC_THREADS inline paths (the thread cache, _ak_pool_tcache) -------------

// Whether this build turns the AK_SYNC_THREADS inline paths on (not in the
// checked build or under a tool, which must see every call).
bool threads_inline_on(const ak_pool *p) { return p->tkey != 0; }

TEST(PoolThreadsInline, OnByDefaultAndCountsExactly) {
  Pool t(48, AK_SYNC_THREADS, 0, true);
  if (!AK_CHECKED && !_ak_track_mode() && !ak_prof_active()) { /* a sampled pool's are off */
    EXPECT_TRUE(threads_inline_on(t.p)) << "a plain AK_SYNC_THREADS pool has inline paths";
  }
  std::vector<void *> v;
  for (int i = 0; i < 30000; i++) {
    v.push_back(ak_pool_alloc(t.p));
    std::memset(v.back(), i & 0xff, 48);
  }
  EXPECT_EQ(t.stats().live, v.size());
  // Free every other one (inline frees into slabs other than the current
  // one), then check the survivors' contents.
  for (size_t i = 0; i < v.size(); i += 2) ak_pool_free(t.p, v[i]);
  EXPECT_EQ(t.stats().live, v.size() / 2);
  for (size_t i = 1; i < v.size(); i += 2)
    for (size_t b = 0; b < 48; b++)
      ASSERT_EQ(static_cast<unsigned char *>(v[i])[b], static_cast<unsigned char>(i & 0xff));
  for (size_t i = 1; i < v.size(); i += 2) ak_pool_free(t.p, v[i]);
  EXPECT_EQ(t.stats().live, 0u);
  EXPECT_LE(t.stats().slabs, 1u) << "slabs emptied by inline frees go back (the current one may stay)";
  ak_pool_trim(t.p);
  EXPECT_EQ(t.stats().slabs, 0u);
}

TEST(PoolThreadsInline, ObjectFreedInlineIsReusedFirst) {
  Pool t(32, AK_SYNC_THREADS);
  void *a = ak_pool_alloc(t.p);
  void *b = ak_pool_alloc(t.p);
  ak_pool_free(t.p, a);
  EXPECT_EQ(ak_pool_alloc(t.p), a) << "LIFO within the current slab";
  ak_pool_free(t.p, a);
  ak_pool_free(t.p, b);
  EXPECT_EQ(t.stats().live, 0u);
}

// More pools than thread-cache entries, used in turn by one thread and
// destroyed and created again (a new pool may get an old one's address and
// entry): every object stays in its own pool, contents survive, counts are
// exact.
TEST(PoolThreadsInline, CacheCollisionsAndReusedAddresses) {
  constexpr int kPools = 2 * AK_POOL_TCACHE + 3;
  std::mt19937 rng(7);
  std::vector<std::pair<ak_pool *, std::vector<uint64_t *>>> pools;
  auto make = [](int i) {
    ak_pool_options o{};
    o.object_size = 16 + 8 * static_cast<size_t>(i % 5);
    o.name = "collide";
    ak_pool *p = ak_pool_create(&o);
    EXPECT_NE(p, nullptr);
    return p;
  };
  for (int i = 0; i < kPools; i++) pools.push_back({make(i), {}});
  for (int step = 0; step < 200000; step++) {
    auto &pp = pools[rng() % pools.size()];
    if (pp.second.size() < 300 && (rng() & 1)) {
      auto *o = static_cast<uint64_t *>(ak_pool_alloc(pp.first));
      ASSERT_NE(o, nullptr);
      ASSERT_TRUE(ak_pool_owns(pp.first, o));
      *o = reinterpret_cast<uintptr_t>(pp.first) ^ reinterpret_cast<uintptr_t>(o);
      pp.second.push_back(o);
    } else if (!pp.second.empty()) {
      size_t k = rng() % pp.second.size();
      uint64_t *o = pp.second[k];
      ASSERT_EQ(*o, reinterpret_cast<uintptr_t>(pp.first) ^ reinterpret_cast<uintptr_t>(o));
      pp.second[k] = pp.second.back();
      pp.second.pop_back();
      ak_pool_free(pp.first, o);
    }
    if (step % 20000 == 19999) { /* destroy one pool with its objects, create another */
      size_t k = rng() % pools.size();
      ak_pool_stats st;
      ak_pool_stats_get(pools[k].first, &st);
      EXPECT_EQ(st.live, pools[k].second.size());
      ak_pool_destroy(pools[k].first);
      pools[k] = {make(step), {}};
    }
  }
  for (auto &pp : pools) {
    ak_pool_stats st;
    ak_pool_stats_get(pp.first, &st);
    EXPECT_EQ(st.live, pp.second.size());
    for (uint64_t *o : pp.second) ak_pool_free(pp.first, o);
    ak_pool_stats_get(pp.first, &st);
    EXPECT_EQ(st.live, 0u);
    ak_pool_destroy(pp.first);
  }
}

// The defragmenter switched on and off while threads allocate and free
// (each heap follows the switch at its next slow path): no lost or
// duplicated object, exact counts at the end (TSan: no race).
TEST(PoolThreadsInline, DefragmentSwitchUnderLoad) {
  Pool t(64, AK_SYNC_THREADS);
  std::atomic<bool> stop{false};
  std::vector<std::thread> th;
  for (int k = 0; k < 3; k++)
    th.emplace_back([&, k] {
      std::mt19937 rng(static_cast<unsigned>(k));
      std::vector<void *> v;
      while (!stop.load(std::memory_order_relaxed)) {
        if (v.size() < 5000 && (rng() % 3)) {
          v.push_back(ak_pool_alloc(t.p));
          *static_cast<void **>(v.back()) = v.back();
        } else if (!v.empty()) {
          size_t i = rng() % v.size();
          ASSERT_EQ(*static_cast<void **>(v[i]), v[i]);
          ak_pool_free(t.p, v[i]);
          v[i] = v.back();
          v.pop_back();
        }
      }
      for (void *o : v) ak_pool_free(t.p, o);
    });
  for (int i = 0; i < 50; i++) {
    ak_pool_set_defragment(t.p, i % 2 == 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  stop = true;
  for (auto &x : th) x.join();
  EXPECT_EQ(t.stats().live, 0u);
}

// ---- checked build: misuse dies with a message naming call, pointer, pool --
#if AK_CHECKED
TEST(PoolCheckedDeathTest, DoubleFree) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (ak_sync mode : kAllModes) {
    EXPECT_DEATH(
        {
          Pool t(32, mode);
          void *o = ak_pool_alloc(t.p);
          void *o2 = ak_pool_alloc(t.p);
          ak_pool_free(t.p, o);
          (void)o2;
          ak_pool_free(t.p, o);
        },
        "ak_pool_free\\(0x[0-9a-f]+\\): double free.*pool 'test'");
  }
}

TEST(PoolCheckedDeathTest, ForeignPointer) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Pool t(32, AK_SYNC_NONE);
        void *m = std::malloc(32);
        ak_pool_free(t.p, m);
      },
      "ak_pool_free\\(0x[0-9a-f]+\\): pointer was not allocated by pool 'test'");
}

TEST(PoolCheckedDeathTest, WrongPool) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        ak_pool_options o{};
        o.object_size = 32;
        o.name = "first";
        ak_pool *a = ak_pool_create(&o);
        o.name = "second";
        ak_pool *b = ak_pool_create(&o);
        void *x = ak_pool_alloc(a);
        ak_pool_free(b, x);
      },
      "pointer belongs to pool 'first', not to pool 'second'");
}

TEST(PoolCheckedDeathTest, InteriorPointer) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Pool t(32, AK_SYNC_SPINLOCK);
        char *x = static_cast<char *>(ak_pool_alloc(t.p));
        ak_pool_free(t.p, x + 8);
      },
      "not the start of an object");
}

TEST(PoolChecked, DestroyReportsLiveObjects) {
  testing::internal::CaptureStderr();
  {
    Pool t(32, AK_SYNC_NONE);
    for (int i = 0; i < 7; i++) ASSERT_NE(ak_pool_alloc(t.p), nullptr);
  }
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("had 7 live objects"), std::string::npos) << err;
}
#endif

#if AK_TRACK_ASAN
TEST(PoolAsanDeathTest, UseAfterFreeIsReported) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Pool t(64, AK_SYNC_NONE);
        auto *o = static_cast<volatile long *>(ak_pool_alloc(t.p));
        ak_pool_free(t.p, const_cast<long *>(o));
        long v = o[3];
        (void)v;
      },
      "use-after-poison");
}
#endif

}  // namespace
