// SPDX-License-Identifier: MIT
// pool_random_test.cpp - random lifetimes: frees of a random one of N live
// objects into full slabs, by the owner and (AK_SYNC_THREADS) by another
// thread, each followed by an allocation. Every object carries a stamp
// checked when it is freed, so an object handed out twice or lost is
// seen; the pool's counts, its slab count (fullest first keeps few slabs
// in use) and, in the checked build, its slab validators (AK_ASSERT in the
// library) must agree after the churn; everything goes back on a trim.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <vector>

#include "arenakit/pool.h"

namespace {

constexpr size_t kObject = 48;
constexpr size_t kSlab = 4096;  // small slabs: many full slabs, many transitions
constexpr size_t kLive = 2000;
constexpr int kSteps = 60000;

struct Rng {
  uint64_t s;
  uint32_t next(uint32_t n) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return static_cast<uint32_t>((s >> 32) % n);
  }
};

ak_pool *make_pool(ak_sync sync) {
  ak_pool_options o{};
  o.object_size = kObject;
  o.slab_size = kSlab;
  o.sync = sync;
  o.name = "random";
  ak_pool *p = ak_pool_create(&o);
  EXPECT_NE(p, nullptr);
  return p;
}

ak_pool_stats stats_of(ak_pool *p) {
  ak_pool_stats s;
  ak_pool_stats_get(p, &s);
  return s;
}

// Writes `stamp` over the whole object.
void stamp(void *o, uint64_t v) {
  for (size_t i = 0; i < kObject / sizeof v; i++)
    std::memcpy(static_cast<char *>(o) + i * sizeof v, &v, sizeof v);
}

// True if the object still holds `v` in every word.
bool stamped(const void *o, uint64_t v) {
  for (size_t i = 0; i < kObject / sizeof v; i++) {
    uint64_t w;
    std::memcpy(&w, static_cast<const char *>(o) + i * sizeof w, sizeof w);
    if (w != v) return false;
  }
  return true;
}

// The live objects, their stamps, and the set of live addresses.
struct Live {
  std::vector<void *> obj;
  std::vector<uint64_t> tag;
  std::unordered_set<uintptr_t> addr;
  uint64_t serial = 1;

  // Allocates into slot `i`: a new address, stamped.
  void fill(ak_pool *p, size_t i) {
    void *o = ak_pool_alloc(p);
    ASSERT_NE(o, nullptr);
    ASSERT_TRUE(ak_pool_owns(p, o));
    ASSERT_TRUE(addr.insert(reinterpret_cast<uintptr_t>(o)).second) << "handed out twice: " << o;
    obj[i] = o;
    tag[i] = serial++ * 0x9E3779B97F4A7C15ull;
    stamp(o, tag[i]);
  }
  // Takes slot `i` out (its object still stamped); returns the object.
  void *take(size_t i) {
    void *o = obj[i];
    EXPECT_TRUE(stamped(o, tag[i])) << "object " << o << " was overwritten while live";
    addr.erase(reinterpret_cast<uintptr_t>(o));
    obj[i] = nullptr;
    return o;
  }
};

// Objects of a slab at most (a slab holds its header too).
size_t per_slab() { return kSlab / kObject; }

class PoolRandom : public ::testing::TestWithParam<ak_sync> {};
INSTANTIATE_TEST_SUITE_P(Modes, PoolRandom, ::testing::Values(AK_SYNC_NONE, AK_SYNC_THREADS),
                         [](const auto &pi) { return pi.param == AK_SYNC_NONE ? "None" : "Threads"; });

// The owner frees a random object and allocates one, many times over: no
// object is lost or handed out twice, the count is exact, the slabs in use
// stay near the fewest that hold the live objects, and all go back.
TEST_P(PoolRandom, OwnerChurnKeepsObjectsCountsAndSlabs) {
  ak_pool *p = make_pool(GetParam());
  ASSERT_NE(p, nullptr);
  Live l{std::vector<void *>(kLive), std::vector<uint64_t>(kLive), {}};
  for (size_t i = 0; i < kLive; i++) ASSERT_NO_FATAL_FAILURE(l.fill(p, i));
  size_t fewest = (kLive + per_slab() - 2) / (per_slab() - 1);
  Rng r{0x1234567};
  for (int step = 0; step < kSteps; step++) {
    size_t i = r.next(kLive);
    ak_pool_free(p, l.take(i));
    ASSERT_NO_FATAL_FAILURE(l.fill(p, i));
    if (step % 4096 == 0) {
      ak_pool_stats s = stats_of(p);
      ASSERT_EQ(s.live, kLive);
      // A free slot is reused before a new slab is taken: a random churn
      // of a steady population never grows the pool by more than a few slabs.
      ASSERT_LE(s.slabs, fewest + 4) << "step " << step;
    }
  }
  for (size_t i = 0; i < kLive; i++) ak_pool_free(p, l.take(i));
  EXPECT_EQ(stats_of(p).live, 0u);
  ak_pool_trim(p);
  ak_pool_stats s = stats_of(p);
  EXPECT_EQ(s.live, 0u);
  EXPECT_LE(s.slabs, 1u);
  ak_pool_destroy(p);
}

// AK_SYNC_THREADS: random frees by the owner and by another thread into
// full slabs (the remote list's tag), with allocations by the owner in
// between: every object comes back, none twice, and all slabs go back.
TEST(PoolRandomThreads, OwnerAndRemoteFreesIntoFullSlabs) {
  ak_pool *p = make_pool(AK_SYNC_THREADS);
  ASSERT_NE(p, nullptr);
  Live l{std::vector<void *>(kLive), std::vector<uint64_t>(kLive), {}};
  for (size_t i = 0; i < kLive; i++) ASSERT_NO_FATAL_FAILURE(l.fill(p, i));
  std::mutex mu;
  std::vector<std::pair<void *, uint64_t>> handed;  // for the remote thread (under mu)
  bool done = false;
  size_t bad = 0, remote_frees = 0, max_inflight = 0;
  std::atomic<size_t> inflight{0};  // handed to the remote thread, not yet freed
  std::thread remote([&] {
    std::vector<std::pair<void *, uint64_t>> batch;
    for (;;) {
      bool last;
      {
        std::lock_guard<std::mutex> g(mu);
        batch.swap(handed);
        last = done;
      }
      for (auto &b : batch) {
        if (!stamped(b.first, b.second)) bad++;
        ak_pool_free(p, b.first);
        inflight.fetch_sub(1);
        remote_frees++;
      }
      batch.clear();
      if (last) break;
      std::this_thread::yield();
    }
  });
  Rng r{0xfeedbeef};
  for (int step = 0; step < kSteps; step++) {
    size_t i = r.next(kLive);
    uint64_t t = l.tag[i];
    void *o = l.take(i);
    // The first half mixes the owner's and remote frees; the second has
    // remote frees only, which reach full slabs by their tag alone.
    if (step < kSteps / 2 && r.next(2)) {
      ak_pool_free(p, o);
    } else {
      while (inflight.load() > 256) std::this_thread::yield();
      std::lock_guard<std::mutex> g(mu);
      handed.emplace_back(o, t);
      size_t n = inflight.fetch_add(1) + 1;
      if (n > max_inflight) max_inflight = n;
    }
    ASSERT_NO_FATAL_FAILURE(l.fill(p, i));
  }
  {
    std::lock_guard<std::mutex> g(mu);
    done = true;
  }
  remote.join();
  EXPECT_EQ(bad, 0u) << "objects overwritten while handed to the remote thread";
  EXPECT_GT(remote_frees, static_cast<size_t>(kSteps) / 4);
  // Remote frees into full slabs are found again (the tag, the epoch)
  // before a new slab is taken: the pool holds about what was ever live
  // at once, not one slab more per slab's worth of remote frees.
  size_t most = kLive + max_inflight;
  EXPECT_LE(stats_of(p).slabs, (most + per_slab() - 2) / (per_slab() - 1) + 8)
      << "max in flight " << max_inflight;
  for (size_t i = 0; i < kLive; i++) ak_pool_free(p, l.take(i));
  ak_pool_trim(p);  // collects the remote frees of the caller's slabs
  ak_pool_stats s = stats_of(p);
  EXPECT_EQ(s.live, 0u);
  EXPECT_LE(s.slabs, 1u);
  ak_pool_destroy(p);
}

}  // namespace
