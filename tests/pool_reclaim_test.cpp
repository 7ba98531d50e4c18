// SPDX-License-Identifier: MIT
// The pool under the reclaim policy (arenakit/reclaim.h), with a fake clock:
// by default an emptied slab is kept as a spare and reused, decommitted after
// the purge delay and unmapped after the release delay, so RSS goes back to
// its baseline; release_empty (ARAL's policy) still gives an empty slab back
// at once; the background thread does it with no call, also for slabs of
// exited threads and across fork.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "arenakit/pool.h"
extern "C" {
#include "common/harden.h"
}
#include "pool_sync_modes.h"
#include "reclaim_testing.h"
#include "sanitizers.h"

namespace {

ak_pool_stats stats(ak_pool *p) {
  ak_pool_stats s;
  ak_pool_stats_get(p, &s);
  return s;
}

class PoolReclaim : public ::testing::TestWithParam<ak_sync>, public FakeClockTest {
 protected:
  void SetUp() override { use_fake_clock(); }
  void TearDown() override { restore_clock(); }
  ak_pool *make(bool at_once = false, size_t spare = 0) {
    ak_pool_options o{};
    o.object_size = 48;
    o.sync = GetParam();
    o.release_empty = at_once;
    o.spare_slabs = spare;
    ak_pool *p = ak_pool_create(&o);
    EXPECT_NE(p, nullptr) << ak_last_error();
    return p;
  }
  // Allocates and writes n objects, then frees them all.
  static void churn(ak_pool *p, size_t n) {
    std::vector<void *> v(n);
    for (auto &o : v) {
      o = ak_pool_alloc(p);
      ASSERT_NE(o, nullptr);
      std::memset(o, 0x5a, 48);
    }
    for (void *o : v) ak_pool_free(p, o);
  }
};

class PoolReclaimThreads : public ::testing::Test, public FakeClockTest {
 protected:
  void SetUp() override { use_fake_clock(); }
  void TearDown() override { restore_clock(); }
};

// The modes whose empty slabs go to the spare set (LOCKFREE keeps its
// slabs mapped until a trim, pool_test covers it).
constexpr ak_sync kPolicyModes[] = {AK_SYNC_THREADS, AK_SYNC_NONE, AK_SYNC_SPINLOCK};
INSTANTIATE_TEST_SUITE_P(Modes, PoolReclaim, ::testing::ValuesIn(kPolicyModes), ak_sync_mode_name);

TEST_P(PoolReclaim, EmptySlabsAreKeptAndReusedBeforeTheDelay) {
  ak_pool *p = make();
  churn(p, 100000);
  ak_pool_stats s = stats(p);
  EXPECT_EQ(s.live, 0u);
  EXPECT_GT(s.slabs, 50u) << "the emptied slabs are kept as spares";
  EXPECT_GE(s.bytes_spare, (s.slabs - 2) * 65536);
  EXPECT_EQ(s.bytes_committed, s.bytes_reserved);
  size_t allocs = s.slab_allocs, releases = s.slab_releases;
  g_fake_ms += 50;  // below the purge delay
  churn(p, 100000);
  s = stats(p);
  EXPECT_EQ(s.slab_allocs, allocs) << "the second round reuses the spares, no new slab";
  EXPECT_EQ(s.slab_releases, releases);
  EXPECT_EQ(s.bytes_purged, 0u);
  ak_pool_destroy(p);
}

// SPINLOCK: a drain within the release delay of the last one leaves the
// thread's stash for later, and the delay is the policy's own
// (ak_reclaim_set_delays): a longer one keeps the stash longer.
TEST_P(PoolReclaim, ADeferredDrainWaitsThePolicysReleaseDelay) {
  if (GetParam() != AK_SYNC_SPINLOCK) GTEST_SKIP() << "the stash of a SPINLOCK magazine";
  if (ak_harden_double_free) GTEST_SKIP() << "no stash in the hardened double-free build";
  long purge = 0, release = 0;
  ak_reclaim_get_delays(&purge, &release);
  ASSERT_EQ(ak_reclaim_set_delays(purge, 3000), 0);
  ak_pool *p = make(true);  // empty slabs go back at once: `slabs` counts the held ones
  churn(p, 20000);          // the first drain gives everything back
  EXPECT_LE(stats(p).slabs, 1u);
  churn(p, 20000);  // again at once: the stash waits
  EXPECT_GT(stats(p).slabs, 2u) << "a drain within the release delay gave the stash back";
  g_fake_ms += 1000;
  EXPECT_GT(stats(p).slabs, 2u) << "the stash went back before the policy's release delay";
  g_fake_ms += 2000;
  EXPECT_LE(stats(p).slabs, 1u) << "the deferred drain did not give the stash back once due";
  EXPECT_EQ(stats(p).live, 0u);
  ak_pool_destroy(p);
  ASSERT_EQ(ak_reclaim_set_delays(purge, release), 0);
}

TEST_P(PoolReclaim, SparesArePurgedAfterTheDelayThenUnmapped) {
  ak_pool *p = make();
  churn(p, 100000);
  ak_pool_stats s = stats(p);
  size_t slabs = s.slabs, resident = s.bytes_resident;
  ASSERT_GT(resident, 100000u * 48 / 2);
  g_fake_ms += 150;  // past the purge delay, before the release delay
  s = stats(p);      // a library call: the due steps run
  EXPECT_EQ(s.slabs, slabs) << "decommitted, still mapped";
  EXPECT_GT(s.bytes_purged, 0u);
  EXPECT_LT(s.bytes_committed, s.bytes_reserved / 4);
  EXPECT_LT(s.bytes_resident, resident / 4) << "the pages went back (mincore)";
  // A purged spare is reused as well (its pages fault in again).
  size_t allocs = s.slab_allocs;
  churn(p, 20000);
  EXPECT_EQ(stats(p).slab_allocs, allocs);
  if (GetParam() == AK_SYNC_SPINLOCK && !ak_harden_double_free) {
    // Emptied again within a second of the last drain: the thread keeps
    // its stash of batches (none in the hardened double-free build), and
    // the first call the default release delay on gives it back.
    auto in_use = [](const ak_pool_stats &x) {
      return x.slabs ? (x.bytes_reserved - x.bytes_spare) / (x.bytes_reserved / x.slabs) : 0;
    };
    EXPECT_GT(in_use(stats(p)), 2u) << "the stash holds slabs";
    g_fake_ms += 1000;
    s = stats(p);
    EXPECT_EQ(s.live, 0u);
    EXPECT_LE(in_use(s), 2u) << "the deferred drain gave the stash back to the slabs";
  }
  g_fake_ms += 2000;  // past the release delay
  s = stats(p);
  EXPECT_LE(s.slabs, 2u) << "unmapped (the current slab stays)";
  EXPECT_GE(s.slab_releases, slabs - 2);
  EXPECT_EQ(s.bytes_spare, 0u);
  ak_pool_destroy(p);
}

TEST_P(PoolReclaim, ReserveTakesSparesThePolicyThenKeeps) {
  ak_pool *p = make();
  churn(p, 100000);
  size_t allocs = stats(p).slab_allocs;
  ASSERT_EQ(ak_pool_reserve(p, 100000), 0);
  EXPECT_EQ(stats(p).slab_allocs, allocs) << "the spares made the room";
  g_fake_ms += 5000;  // past both delays: spares would be gone
  (void)stats(p);
  churn(p, 100000);
  EXPECT_EQ(stats(p).slab_allocs, allocs) << "the reserved room stayed";
  ak_pool_destroy(p);
}

TEST_P(PoolReclaim, SpareSlabsCapsTheSpares) {
  ak_pool *p = make(false, 4);
  churn(p, 100000);
  ak_pool_stats s = stats(p);
  EXPECT_LE(s.bytes_spare, 4u * 65536);
  // AK_SYNC_THREADS: the thread's own spare_slabs come on top.
  EXPECT_LE(s.slabs, GetParam() == AK_SYNC_THREADS ? 9u : 5u);
  ak_pool_destroy(p);
}

TEST_P(PoolReclaim, ReleaseEmptyGivesAnEmptySlabBackAtOnce) {
  ak_pool *p = make(true);
  churn(p, 100000);
  ak_pool_stats s = stats(p);
  EXPECT_LE(s.slabs, 1u) << "ARAL's policy: no spares";
  EXPECT_EQ(s.bytes_spare, 0u);
  EXPECT_GE(s.slab_releases + 1, s.slab_allocs);
  ak_pool_destroy(p);
}

// What may stay resident above the baseline once the pool's memory is
// given back: a little noise, plus, under AddressSanitizer, the shadow of
// the objects' memory (one byte per eight, written when the pool poisons
// and unpoisons slots; decommitting the slabs leaves it resident).
size_t rss_slack(size_t base, size_t object_bytes) {
  return base / 10 + 256 * 1024 + (AK_TEST_ASAN ? object_bytes / 8 + 512 * 1024 : 0);
}

// The first library call past the delays gives the memory back: with no
// background thread, which would otherwise race it for the due steps (its
// own test is the next one).
TEST_P(PoolReclaim, RssReturnsToItsBaselineAfterTheDelay) {
  ASSERT_EQ(ak_reclaim_set_background(AK_BACKGROUND_OFF), 0);
  ak_pool *p = make();
  std::vector<void *> v(400000);  // ~19 MiB of objects; the vector is touched first
  std::memset(v.data(), 0, v.size() * sizeof(void *));
  size_t base = rss_bytes();
  for (auto &o : v) {
    o = ak_pool_alloc(p);
    std::memset(o, 1, 48);
  }
  EXPECT_GT(rss_bytes(), base + 15u * 1048576);
  for (void *o : v) ak_pool_free(p, o);
  g_fake_ms += 2000;
  (void)stats(p);  // the first library call past the delays
  EXPECT_LT(rss_bytes(), base + rss_slack(base, v.size() * 48)) << "RSS near the baseline (" << base << " B)";
  ak_pool_destroy(p);
  ak_reclaim_set_background(AK_BACKGROUND_AUTO);
}

TEST_P(PoolReclaim, TheBackgroundThreadReturnsMemoryWithoutACall) {
  ak_pool *p = make();
  std::vector<void *> v(400000);
  std::memset(v.data(), 0, v.size() * sizeof(void *));
  size_t base = rss_bytes();
  for (auto &o : v) {
    o = ak_pool_alloc(p);
    std::memset(o, 1, 48);
  }
  for (void *o : v) ak_pool_free(p, o);
  ASSERT_EQ(ak_reclaim_thread_start(), 0);
  g_fake_ms += 2000;
  _ak_reclaim_set_clock(fake_now);  // wakes the thread
  EXPECT_TRUE(eventually([&] { return rss_bytes() < base + rss_slack(base, v.size() * 48); }))
      << "RSS " << rss_bytes() << " B, baseline " << base << " B";
  ak_reclaim_thread_stop();
  ak_pool_destroy(p);
}

TEST_F(PoolReclaimThreads, SlabsOfExitedThreadsGoBackByTime) {
  ak_pool_options o{};
  o.object_size = 64;
  ak_pool *p = ak_pool_create(&o);
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(ak_reclaim_thread_start(), 0);
  for (int round = 0; round < 4; round++) {
    std::vector<std::thread> th;
    for (int k = 0; k < 4; k++)
      th.emplace_back([&] {
        std::vector<void *> v(20000);
        for (auto &x : v) x = ak_pool_alloc(p);
        for (void *x : v) ak_pool_free(p, x);
      });
    for (auto &t : th) t.join();
  }
  EXPECT_GT(stats(p).slabs, 4u) << "spares kept for the next threads";
  g_fake_ms += 5000;
  _ak_reclaim_set_clock(fake_now);
  EXPECT_TRUE(eventually([&] {
    ak_pool_stats s;
    ak_pool_stats_get(p, &s);
    return s.slabs == 0 && s.live == 0;
  })) << "slabs "
      << stats(p).slabs;
  ak_reclaim_thread_stop();
  ak_pool_destroy(p);
}

// AK_SYNC_THREADS: the slabs a thread empties wait in its heap's own spare
// set. A thread that runs `first`, then waits (alive, holding its heap)
// until released, then runs `then`.
class ParkedThread {
 public:
  template <class F, class G>
  ParkedThread(F first, G then)
      : t_([this, first, then] {
          first();
          parked_ = true;
          while (!go_) std::this_thread::yield();
          then();
        }) {
    while (!parked_) std::this_thread::yield();
  }
  void finish() {
    go_ = true;
    t_.join();
  }

 private:
  std::atomic<bool> parked_{false}, go_{false};
  std::thread t_;
};

// The slabs (by address) holding the objects of `v`.
std::vector<uintptr_t> slabs_of(const std::vector<void *> &v, size_t slab) {
  std::vector<uintptr_t> s;
  for (void *o : v) s.push_back(reinterpret_cast<uintptr_t>(o) & ~(uintptr_t)(slab - 1));
  std::sort(s.begin(), s.end());
  s.erase(std::unique(s.begin(), s.end()), s.end());
  return s;
}

size_t overlap(const std::vector<uintptr_t> &a, const std::vector<uintptr_t> &b) {
  std::vector<uintptr_t> both;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(both));
  return both.size();
}

ak_pool *threads_pool() {
  ak_pool_options o{};
  o.object_size = 48;
  ak_pool *p = ak_pool_create(&o);
  EXPECT_NE(p, nullptr) << ak_last_error();
  return p;
}

// Allocates 20,000 objects and frees them: about 15 slabs emptied.
void empty_slabs(ak_pool *p) {
  std::vector<void *> v(20000);
  for (auto &o : v) o = ak_pool_alloc(p);
  for (void *o : v) ak_pool_free(p, o);
}

size_t slab_bytes(ak_pool *p) {
  ak_pool_stats s = stats(p);
  return s.slabs ? s.bytes_reserved / s.slabs : 65536;
}

// A thread that empties slabs takes them back itself; another thread that
// needs slabs meanwhile gets others (it shares no lock and no slab lines
// with the first), and the emptied ones count as spares.
TEST_F(PoolReclaimThreads, AThreadTakesBackTheSlabsItEmptied) {
  ak_pool *p = threads_pool();
  const size_t n = 20000;
  std::vector<void *> a(n), b(n);
  std::vector<uintptr_t> emptied, again, others;
  size_t slab = 0;
  ParkedThread owner(
      [&] {
        for (auto &o : a) o = ak_pool_alloc(p);
        slab = slab_bytes(p);
        emptied = slabs_of(a, slab);
        for (void *o : a) ak_pool_free(p, o);
      },
      [&] {
        for (auto &o : a) o = ak_pool_alloc(p);
        again = slabs_of(a, slab);
        for (void *o : a) ak_pool_free(p, o);
      });
  ASSERT_GT(emptied.size(), 4u);
  EXPECT_GE(stats(p).bytes_spare, (emptied.size() - 1) * slab) << "all but the current slab are spares";
  // Alive to the end: an exited thread's slabs would be the owner's to adopt.
  ParkedThread other(
      [&] {
        for (auto &o : b) o = ak_pool_alloc(p);
      },
      [&] {
        for (void *o : b) ak_pool_free(p, o);
      });
  EXPECT_EQ(overlap(emptied, slabs_of(b, slab)), 0u) << "the other thread took none of the emptied slabs";
  owner.finish();
  EXPECT_EQ(overlap(emptied, again), again.size()) << "the owner took its own slabs back";
  other.finish();
  ak_pool_destroy(p);
}

// The spares of a thread that stays alive but makes no call go back by
// time: through the stats' tick, and through the background thread.
TEST_F(PoolReclaimThreads, AnIdleThreadsSparesGoBackByTime) {
  ak_pool *p = threads_pool();
  auto churn = [p] { empty_slabs(p); };
  ParkedThread idle(churn, [] {});
  ak_pool_stats s = stats(p);
  ASSERT_GT(s.slabs, 4u);
  EXPECT_GT(s.bytes_spare, 0u);
  g_fake_ms += 150;  // past the purge delay: decommitted, still spares
  s = stats(p);
  EXPECT_GT(s.bytes_spare, 0u);
  EXPECT_GT(s.bytes_purged, 0u) << "the heap's set decommitted them";
  EXPECT_LE(s.bytes_committed, s.bytes_reserved - s.bytes_spare);
  g_fake_ms += 5000;  // past the release delay
  s = stats(p);
  EXPECT_EQ(s.bytes_spare, 0u);
  EXPECT_LE(s.slabs, 1u) << "only the idle thread's current slab";
  ParkedThread idle2(churn, [] {});
  ASSERT_GT(stats(p).bytes_spare, 0u);
  ASSERT_EQ(ak_reclaim_thread_start(), 0);
  g_fake_ms += 5000;
  _ak_reclaim_set_clock(fake_now);  // wakes the thread
  EXPECT_TRUE(eventually([&] {
    ak_pool_stats now;
    ak_pool_stats_get(p, &now);
    return now.bytes_spare == 0;
  })) << "spares "
      << stats(p).bytes_spare << " B";
  ak_reclaim_thread_stop();
  idle.finish();
  idle2.finish();
  ak_pool_destroy(p);
}

// ak_pool_trim gives back the spares of every thread at once, not only
// the caller's.
TEST_F(PoolReclaimThreads, TrimTakesTheSparesOfEveryThread) {
  ak_pool *p = threads_pool();
  ParkedThread other([p] { empty_slabs(p); }, [] {});
  ASSERT_GT(stats(p).bytes_spare, 0u);
  ak_pool_trim(p);
  ak_pool_stats s = stats(p);
  EXPECT_EQ(s.bytes_spare, 0u);
  EXPECT_LE(s.slabs, 1u);
  other.finish();
  ak_pool_destroy(p);
}

// A thread's spares outlive it: the next thread takes them before it maps
// a slab.
TEST_F(PoolReclaimThreads, ANewThreadTakesTheSparesOfAnExitedOne) {
  ak_pool *p = threads_pool();
  std::vector<void *> v(20000);
  std::vector<uintptr_t> emptied;
  std::thread([&] {
    for (auto &o : v) o = ak_pool_alloc(p);
    emptied = slabs_of(v, slab_bytes(p));
    for (void *o : v) ak_pool_free(p, o);
  }).join();
  size_t slabs = stats(p).slabs;
  ASSERT_GT(slabs, 4u);
  std::thread([&] {
    for (auto &o : v) o = ak_pool_alloc(p);
  }).join();
  EXPECT_GE(overlap(emptied, slabs_of(v, slab_bytes(p))), emptied.size() - 1);
  EXPECT_LE(stats(p).slabs, slabs) << "no slab mapped while spares were kept";
  for (void *o : v) ak_pool_free(p, o);
  ak_pool_destroy(p);
}

// A fork child gets the spares of the parent's other threads, whole, and
// uses them.
TEST_F(PoolReclaimThreads, AForkChildTakesTheSparesOfOtherThreads) {
#if AK_TEST_SANITIZED
  GTEST_SKIP() << "a sanitizer's malloc is not fork-safe with threads: its children can hang in it";
#endif
  ak_pool *p = threads_pool();
  ParkedThread other([p] { empty_slabs(p); }, [] {});
  ak_pool_stats before = stats(p);
  ASSERT_GT(before.bytes_spare, 0u);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(20);
    ak_pool_stats s = stats(p);
    int rc = 0;
    if (s.bytes_spare < before.bytes_spare) rc |= 1;  // and the other thread's empty current slab
    std::vector<void *> v(15000);
    for (auto &o : v) o = ak_pool_alloc(p);
    if (stats(p).slabs > before.slabs) rc |= 2;  // the spares were used
    for (void *o : v) ak_pool_free(p, o);
    ak_pool_trim(p);
    if (stats(p).slabs > 1) rc |= 4;
    _exit(rc);
  }
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st)) << "child died (signal " << WTERMSIG(st) << ")";
  EXPECT_EQ(WEXITSTATUS(st), 0) << "1: spares lost, 2: a slab mapped past them, 4: trim kept slabs";
  other.finish();
  ak_pool_destroy(p);
}

// Fork while the background thread purges and threads churn a pool: the
// child finds no lock held, uses the pool (objects from before the fork
// too) and exits; the parent's thread keeps running. A sanitizer's
// allocator is not fork-safe with threads that call malloc (the pool's
// slab table grows with malloc): as in pool_fork_test.cpp, the release and
// hardened builds run the test.
TEST_F(PoolReclaimThreads, ForkWhileTheBackgroundThreadPurges) {
#if AK_TEST_SANITIZED
  GTEST_SKIP() << "a sanitizer's malloc is not fork-safe with threads: its children can hang in it";
#endif
  _ak_reclaim_set_clock(nullptr);
  ak_reclaim_set_delays(0, 0);  // every emptied slab is purged and released at once, by the thread too
  ak_pool_options o{};
  o.object_size = 64;
  ak_pool *p = ak_pool_create(&o);
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(ak_reclaim_thread_start(), 0);
  std::atomic<bool> stop{false};
  std::vector<std::thread> th;
  for (int k = 0; k < 2; k++)
    th.emplace_back([&] {
      std::vector<void *> v(5000);
      while (!stop.load()) {
        for (auto &x : v) x = ak_pool_alloc(p);
        for (void *x : v) ak_pool_free(p, x);
      }
    });
  void *mine = ak_pool_alloc(p);
  for (int i = 0; i < 30; i++) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      alarm(20);
      std::vector<void *> v(3000);
      for (auto &x : v) x = ak_pool_alloc(p);
      for (void *x : v) ak_pool_free(p, x);
      ak_pool_free(p, mine);
      ak_reclaim_collect();
      _exit(ak_reclaim_thread_running() ? 2 : 0);
    }
    int st = 0;
    ASSERT_EQ(waitpid(pid, &st, 0), pid);
    ASSERT_TRUE(WIFEXITED(st)) << "child " << i << " died (signal " << WTERMSIG(st) << ")";
    ASSERT_EQ(WEXITSTATUS(st), 0);
  }
  stop = true;
  for (auto &t : th) t.join();
  EXPECT_TRUE(ak_reclaim_thread_running());
  ak_reclaim_thread_stop();
  ak_pool_free(p, mine);
  ak_pool_destroy(p);
}

// AK_SYNC_LOCKFREE: a pool that empties takes its stack down, so that the
// next allocations carve the slabs again in address order; when one thread
// empties it again and again, at most once a second of the reclaim clock
// (its drain gives its stash back to the stack at most that often), and at
// once when a thread leaves it empty.
class PoolLockfreeReorder : public ::testing::Test, public FakeClockTest {
 protected:
  void SetUp() override { use_fake_clock(); }
  void TearDown() override { restore_clock(); }
};

TEST_F(PoolLockfreeReorder, AnEmptiedPoolIsReorderedAtMostOnceASecond) {
  if (std::string(ak_hardening()).find("shuffle") != std::string::npos)
    GTEST_SKIP() << "fresh slots are shuffled in this build";
  ak_pool_options o{};
  o.object_size = 48;
  o.sync = AK_SYNC_LOCKFREE;
  ak_pool *p = ak_pool_create(&o);
  ASSERT_NE(p, nullptr) << ak_last_error();
  ak_pool_stats st;
  ak_pool_stats_get(p, &st);
  const size_t n = 5000, slot = st.slot_size;
  std::vector<void *> v(n);
  // Allocates n objects; returns how many lie one slot after the previous.
  auto alloc = [&] {
    size_t in_order = 0;
    for (size_t i = 0; i < n; i++) {
      v[i] = ak_pool_alloc(p);
      if (i > 0 && static_cast<char *>(v[i]) == static_cast<char *>(v[i - 1]) + slot) in_order++;
    }
    return in_order;
  };
  // Frees them all in a random order: the pool is empty after it.
  auto free_all = [&](unsigned seed) {
    std::shuffle(v.begin(), v.end(), std::mt19937(seed));
    for (void *x : v) ak_pool_free(p, x);
  };
  alloc();
  free_all(1);  // the first time the pool empties: reordered
  EXPECT_GE(alloc(), n * 9 / 10) << "the first emptying reorders";
  free_all(2);  // again, at the same time on the clock: not reordered
  EXPECT_LT(alloc(), n / 10) << "emptied again at once: the stash keeps the order of the frees";
  g_fake_ms += 500;
  free_all(3);  // within the second: the stash is kept
  EXPECT_LT(alloc(), n / 10) << "emptied again within a second: the stash keeps the order of the frees";
  g_fake_ms += 500;
  free_all(3);  // a second after the last reorder: reordered
  EXPECT_GE(alloc(), n * 9 / 10) << "emptied a second after the last reorder";
  free_all(4);  // not reordered
  std::thread([&] {
    void *x = ak_pool_alloc(p);
    ak_pool_free(p, x);
  }).join();  // a thread leaves the pool empty: reordered at once
  EXPECT_GE(alloc(), n * 9 / 10) << "a thread that leaves an empty pool reorders it";
  free_all(5);
  ak_pool_destroy(p);
}

// AK_BACKGROUND is read when the first pool is created: this test runs
// itself again (exec, so the variable is read afresh) with AK_BACKGROUND
// set, and the child reports whether the thread runs after its first pool.
TEST(PoolReclaimEnvironment, AkBackgroundStartsTheThread) {
  if (const char *want = std::getenv("AK_TEST_BACKGROUND_EXPECT")) {
    ak_pool_options o{};
    o.object_size = 32;
    ak_pool *p = ak_pool_create(&o);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(ak_reclaim_thread_running(), std::string(want) == "1");
    ak_reclaim_thread_stop();  // the calls win over the environment
    EXPECT_FALSE(ak_reclaim_thread_running());
    ak_pool_destroy(p);
    return;
  }
  struct Case {
    const char *value, *expect;
  } cases[] = {{"1", "1"}, {"0", "0"}, {"yes", "0"}};
  for (const Case &c : cases) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      setenv("AK_BACKGROUND", c.value, 1);
      setenv("AK_TEST_BACKGROUND_EXPECT", c.expect, 1);
      execl("/proc/self/exe", "pool_reclaim_test", "--gtest_filter=PoolReclaimEnvironment.*",
            static_cast<char *>(nullptr));
      _exit(127);
    }
    int st = 0;
    ASSERT_EQ(waitpid(pid, &st, 0), pid);
    ASSERT_TRUE(WIFEXITED(st));
    EXPECT_EQ(WEXITSTATUS(st), 0) << "AK_BACKGROUND=" << c.value;
  }
}

}  // namespace
