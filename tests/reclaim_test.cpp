// SPDX-License-Identifier: MIT
// The reclaim policy (src/common/reclaim.h) on blocks of a test owner, with a
// fake clock: spares are reused newest first before the purge delay,
// decommitted after it, released after the release delay or past the cap;
// the background thread starts, stops, survives fork and thread exit.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include "reclaim_testing.h"
#include "sanitizers.h"

namespace {

// A sanitizer's own allocator may be left locked in a child forked while
// another thread allocated: the child starts no thread under one.
constexpr bool kSanitized = AK_TEST_SANITIZED;

struct Block {
  _ak_spare node;
  int id = 0;
  std::atomic<bool> decommitted{false};  // the background thread sets them
  std::atomic<bool> released{false};
};

void on_decommit(_ak_spare *s, void *) { reinterpret_cast<Block *>(s)->decommitted = true; }
void on_release(_ak_spare *s, void *ctx) {
  reinterpret_cast<Block *>(s)->released = true;
  ++*static_cast<std::atomic<int> *>(ctx);  // last: the set no longer reads `s`
}
const _ak_spare_ops kOps = {on_decommit, on_release};

class Reclaim : public ::testing::Test, public FakeClockTest {
 protected:
  void SetUp() override {
    use_fake_clock();
    g_fake_ms = 1000;
  }
  void TearDown() override { restore_clock(); }
};

// AK_ASSERT is on in the checked build only (tests/CMakeLists.txt defines
// AK_CHECKED as the library's): a set whose byte count disagrees with its
// spares ends the process there, naming the invariant; elsewhere the check
// is compiled out and the count is reported as it is.
TEST_F(Reclaim, CheckedBuildAssertsTheCountsOfASet) {
  _ak_spare_set set{};
  std::atomic<int> releases{0};
  _ak_spare_set_init(&set, &kOps, &releases, SIZE_MAX, 0);
  Block b;
  _ak_spare_put(&set, &b.node, 4096);
  set.bytes += 1;  // no longer the sum of the spares' sizes
  _ak_spare_counts c{};
  if (AK_CHECKED) {
    EXPECT_DEATH(_ak_spare_stats(&set, &c), "internal invariant broken: .*bytes.*reclaim\\.c");
  } else {
    _ak_spare_stats(&set, &c);
    EXPECT_EQ(c.spare_bytes, 4097u);
  }
  set.bytes -= 1;
  _ak_spare_stats(&set, &c);
  EXPECT_EQ(c.spare_bytes, 4096u);
  _ak_spare_drain(&set);
  _ak_spare_set_fini(&set);
  EXPECT_EQ(releases.load(), 1);
}

TEST_F(Reclaim, SparesAreReusedNewestFirstBeforeTheDelay) {
  _ak_spare_set set{};
  std::atomic<int> releases{0};
  _ak_spare_set_init(&set, &kOps, &releases, SIZE_MAX, AK_SPARE_TIMED);
  Block b[3];
  for (int i = 0; i < 3; i++) {
    b[i].id = i;
    _ak_spare_put(&set, &b[i].node, 4096);
    g_fake_ms += 10;
  }
  g_fake_ms += 50;  // the oldest is 80 ms old: below the 100 ms purge delay
  _ak_spare_tick(&set);
  bool cold = true;
  _ak_spare *s = _ak_spare_take(&set, &cold);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(reinterpret_cast<Block *>(s)->id, 2);
  EXPECT_FALSE(cold);
  for (auto &x : b) EXPECT_FALSE(x.decommitted);
  EXPECT_EQ(releases.load(), 0);
  _ak_spare_counts c;
  _ak_spare_stats(&set, &c);
  EXPECT_EQ(c.spares, 2u);
  EXPECT_EQ(c.committed, 8192u);
  _ak_spare_drain(&set);
  EXPECT_EQ(releases.load(), 2);
  _ak_spare_set_fini(&set);
}

TEST_F(Reclaim, SparesAreDecommittedAfterThePurgeDelayThenReleased) {
  _ak_spare_set set{};
  std::atomic<int> releases{0};
  _ak_spare_set_init(&set, &kOps, &releases, SIZE_MAX, AK_SPARE_TIMED);
  Block a{}, b{};
  _ak_spare_put(&set, &a.node, 4096);
  g_fake_ms += 60;
  _ak_spare_put(&set, &b.node, 4096);
  g_fake_ms += 50;  // a: 110 ms, b: 50 ms
  _ak_spare_tick(&set);
  EXPECT_TRUE(a.decommitted);
  EXPECT_FALSE(b.decommitted);
  _ak_spare_counts c;
  _ak_spare_stats(&set, &c);
  EXPECT_EQ(c.committed, 4096u);
  EXPECT_EQ(c.purged_bytes, 4096u);
  // The hot spare is still taken first, then the cold one.
  bool cold = true;
  EXPECT_EQ(_ak_spare_take(&set, &cold), &b.node);
  EXPECT_FALSE(cold);
  _ak_spare_put(&set, &b.node, 4096);
  g_fake_ms += 2000;  // both past the release delay
  _ak_spare_tick(&set);
  EXPECT_TRUE(a.released);
  EXPECT_TRUE(b.released);
  EXPECT_EQ(releases.load(), 2);
  _ak_spare_stats(&set, &c);
  EXPECT_EQ(c.spares, 0u);
  EXPECT_EQ(c.released_bytes, 8192u);
  EXPECT_EQ(_ak_spare_take(&set, nullptr), nullptr);
  _ak_spare_set_fini(&set);
}

TEST_F(Reclaim, AColdSpareIsHandedOutWithItsState) {
  _ak_spare_set set{};
  std::atomic<int> releases{0};
  _ak_spare_set_init(&set, &kOps, &releases, SIZE_MAX, AK_SPARE_TIMED);
  Block a{};
  _ak_spare_put(&set, &a.node, 4096);
  g_fake_ms += 500;
  bool cold = false;
  EXPECT_EQ(_ak_spare_take(&set, &cold), &a.node);  // the take purges first
  EXPECT_TRUE(cold);
  EXPECT_TRUE(a.decommitted);
  EXPECT_FALSE(a.released);
  _ak_spare_set_fini(&set);
}

TEST_F(Reclaim, PastTheCapTheOldestSpareIsReleased) {
  _ak_spare_set set{};
  std::atomic<int> releases{0};
  _ak_spare_set_init(&set, &kOps, &releases, 2, AK_SPARE_TIMED);
  Block b[3];
  for (auto &x : b) _ak_spare_put(&set, &x.node, 4096);
  EXPECT_TRUE(b[0].released);
  EXPECT_FALSE(b[1].released);
  EXPECT_FALSE(b[2].released);
  EXPECT_EQ(releases.load(), 1);
  _ak_spare_drain(&set);
  _ak_spare_set_fini(&set);
}

TEST_F(Reclaim, CapZeroReleasesAtOnceAndUntimedSetsKeep) {
  _ak_spare_set set{};
  std::atomic<int> releases{0};
  _ak_spare_set_init(&set, &kOps, &releases, 0, 0);
  Block a{};
  _ak_spare_put(&set, &a.node, 4096);
  EXPECT_TRUE(a.released);
  _ak_spare_set_fini(&set);

  _ak_spare_set keep{};
  _ak_spare_set_init(&keep, &kOps, &releases, 4, 0);
  Block b{};
  _ak_spare_put(&keep, &b.node, 4096);
  g_fake_ms += 100000;
  _ak_spare_tick(&keep);
  EXPECT_FALSE(b.decommitted);
  EXPECT_FALSE(b.released);
  _ak_spare_drain(&keep);
  EXPECT_TRUE(b.released);
  _ak_spare_set_fini(&keep);
}

TEST_F(Reclaim, PurgeDelayZeroDecommitsAtOnceAndMinusOneNever) {
  ASSERT_EQ(ak_reclaim_set_delays(0, -1), 0);
  _ak_spare_set set{};
  std::atomic<int> releases{0};
  _ak_spare_set_init(&set, &kOps, &releases, SIZE_MAX, AK_SPARE_TIMED);
  Block a{};
  _ak_spare_put(&set, &a.node, 4096);
  EXPECT_TRUE(a.decommitted);
  g_fake_ms += 1000000;
  _ak_spare_tick(&set);
  EXPECT_FALSE(a.released);  // release -1: never
  ASSERT_EQ(ak_reclaim_set_delays(-1, -1), 0);
  Block b{};
  _ak_spare_put(&set, &b.node, 4096);
  g_fake_ms += 1000000;
  _ak_spare_tick(&set);
  EXPECT_FALSE(b.decommitted);
  _ak_spare_drain(&set);
  _ak_spare_set_fini(&set);
  EXPECT_EQ(ak_reclaim_set_delays(-2, 0), EINVAL);
}

TEST_F(Reclaim, TheOwnerWithoutReleaseOnlyDecommits) {
  static const _ak_spare_ops decommit_only = {on_decommit, nullptr};
  _ak_spare_set set{};
  _ak_spare_set_init(&set, &decommit_only, nullptr, SIZE_MAX, AK_SPARE_TIMED);
  Block a{};
  _ak_spare_put(&set, &a.node, 4096);
  g_fake_ms += 100000;
  _ak_spare_tick(&set);
  EXPECT_TRUE(a.decommitted);
  EXPECT_FALSE(a.released);
  EXPECT_EQ(_ak_spare_take(&set, nullptr), &a.node);
  _ak_spare_set_fini(&set);
}

TEST_F(Reclaim, BackgroundThreadPurgesRegisteredSetsAndStops) {
  _ak_spare_set set{};
  std::atomic<int> releases{0};
  _ak_spare_set_init(&set, &kOps, &releases, SIZE_MAX, AK_SPARE_TIMED | AK_SPARE_REGISTERED);
  Block a{};
  _ak_spare_put(&set, &a.node, 4096);
  ASSERT_EQ(ak_reclaim_thread_start(), 0);
  EXPECT_EQ(ak_reclaim_thread_start(), 0);  // already running: no second thread
  EXPECT_TRUE(ak_reclaim_thread_running());
  size_t passes = _ak_reclaim_thread_passes();
  EXPECT_TRUE(eventually([&] { return _ak_reclaim_thread_passes() > passes; }));
  EXPECT_FALSE(a.released);
  g_fake_ms += 5000;
  _ak_reclaim_set_clock(fake_now);  // wakes the thread
  EXPECT_TRUE(eventually([&] {
    _ak_spare_counts c;
    _ak_spare_stats(&set, &c);
    return c.spares == 0;
  }));
  EXPECT_TRUE(a.released);
  ak_reclaim_thread_stop();
  EXPECT_FALSE(ak_reclaim_thread_running());
  ak_reclaim_thread_stop();  // no-op
  _ak_spare_set_fini(&set);
}

TEST_F(Reclaim, BackgroundThreadOutlivesTheThreadThatStartedIt) {
  std::thread([] { ASSERT_EQ(ak_reclaim_thread_start(), 0); }).join();
  EXPECT_TRUE(ak_reclaim_thread_running());
  size_t passes = _ak_reclaim_thread_passes();
  EXPECT_TRUE(eventually([&] { return _ak_reclaim_thread_passes() > passes; }));
  ak_reclaim_thread_stop();
  EXPECT_FALSE(ak_reclaim_thread_running());
}

TEST_F(Reclaim, ForkWhileTheBackgroundThreadRuns) {
  _ak_spare_set set{};
  std::atomic<int> releases{0};
  _ak_spare_set_init(&set, &kOps, &releases, SIZE_MAX, AK_SPARE_TIMED | AK_SPARE_REGISTERED);
  ASSERT_EQ(ak_reclaim_thread_start(), 0);
  std::vector<Block> blocks(64);
  for (int round = 0; round < 20; round++) {
    for (auto &b : blocks) _ak_spare_put(&set, &b.node, 4096);
    g_fake_ms += 3000;  // everything due: the thread purges while we fork
    _ak_reclaim_set_clock(fake_now);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // The child: no background thread; the policy and the registry work.
      if (ak_reclaim_thread_running()) _exit(2);
      ak_reclaim_collect();
      _ak_spare_set_fini(&set);
      // A new background thread in the child (not under a sanitizer:
      // ThreadSanitizer supports no thread creation after a multi-threaded
      // fork, and AddressSanitizer's allocator may be locked in the child).
      if (!kSanitized && ak_reclaim_thread_start() != 0) _exit(3);
      ak_reclaim_thread_stop();
      _exit(0);
    }
    int st = 0;
    ASSERT_EQ(waitpid(pid, &st, 0), pid);
    ASSERT_TRUE(WIFEXITED(st)) << "child did not exit (signal " << WTERMSIG(st) << ")";
    ASSERT_EQ(WEXITSTATUS(st), 0);
    // Every block released (the callback done) before it is put again.
    ASSERT_TRUE(eventually([&] { return releases.load() == 64 * (round + 1); }));
  }
  EXPECT_TRUE(ak_reclaim_thread_running());
  ak_reclaim_thread_stop();
  _ak_spare_set_fini(&set);
}

TEST_F(Reclaim, CollectPurgesRegisteredSetsWithoutTheThread) {
  _ak_spare_set set{};
  std::atomic<int> releases{0};
  _ak_spare_set_init(&set, &kOps, &releases, SIZE_MAX, AK_SPARE_TIMED | AK_SPARE_REGISTERED);
  Block a{};
  _ak_spare_put(&set, &a.node, 4096);
  g_fake_ms += 150;
  ak_reclaim_collect();
  EXPECT_TRUE(a.decommitted);
  EXPECT_FALSE(a.released);
  g_fake_ms += 1000;
  ak_reclaim_collect();
  EXPECT_TRUE(a.released);
  _ak_spare_set_fini(&set);
}

TEST(ReclaimClock, RealClockIsMonotonicMilliseconds) {
  uint64_t a = _ak_reclaim_now();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  uint64_t b = _ak_reclaim_now();
  EXPECT_GE(b, a + 20);
  EXPECT_LT(b, a + 5000);
}

}  // namespace
