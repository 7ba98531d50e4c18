// SPDX-License-Identifier: MIT
// malloc_reclaim_test.cpp - the malloc's empty segments under the reclaim
// policy (arenakit/reclaim.h), on the fake reclaim clock: a segment that a
// thread left empty at its exit is a spare, reused by the next thread
// before the purge delay, decommitted after it, unmapped after the release
// delay or past the cap of spares; the background thread does the same
// for a program that makes no call, started on its own when memory waits
// (AK_BACKGROUND_AUTO, the default). The page delay (AK_PURGE_DELAY) is
// the policy's: the option and ak_reclaim_set_page_delay() are one value.
#include <arenakit/malloc.h>
#include <arenakit/reclaim.h>
#include <errno.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "os/os_mem.h"
#include "reclaim_testing.h"

namespace {

constexpr uintptr_t kSegSize = uintptr_t{4} << 20;  // a malloc segment: 4 MiB, aligned to it

uintptr_t segment_of(const void *p) { return reinterpret_cast<uintptr_t>(p) & ~(kSegSize - 1); }

// Resident 4 KiB pages of segment `seg` past its first 64 KiB page (which
// holds the header, kept by a decommit); -1 if the segment is unmapped.
long resident_pages(uintptr_t seg) {
  constexpr size_t kFrom = 64 * 1024, kPages = (kSegSize - kFrom) / 4096;
  std::vector<unsigned char> vec(kPages);
  if (mincore(reinterpret_cast<void *>(seg + kFrom), kSegSize - kFrom, vec.data()) != 0)
    return errno == ENOMEM ? -1 : -2;
  long n = 0;
  for (unsigned char v : vec) n += v & 1;
  return n;
}

// Blocks of 1,000 bytes over 640 KiB, written, then freed, in the calling
// thread: its heap's segment holds that many resident pages, all free.
// Returns the segment.
uintptr_t fill_and_free() {
  std::vector<void *> blocks;
  for (int i = 0; i < 640; i++) {
    void *p = ak_malloc(1000);
    if (!p) return 0;
    std::memset(p, 0x5a, 1000);
    blocks.push_back(p);
  }
  uintptr_t seg = segment_of(blocks[100]);
  for (void *p : blocks) ak_free(p);
  return seg;
}

// A thread that fills and frees one segment and exits: its empty segment
// becomes a spare. Returns the segment.
uintptr_t spare_segment() {
  uintptr_t seg = 0;
  std::thread([&] { seg = fill_and_free(); }).join();
  return seg;
}

// The segment of a block allocated by a new thread.
uintptr_t segment_of_next_thread() {
  uintptr_t seg = 0;
  std::thread([&] {
    void *p = ak_malloc(1000);
    seg = segment_of(p);
    ak_free(p);
  }).join();
  return seg;
}

class MallocSpares : public ::testing::Test, protected FakeClockTest {
 protected:
  void SetUp() override {
    use_fake_clock();
    ak_collect(true);  // no spare segment from before the test
  }
  void TearDown() override {
    restore_clock();
    ak_collect(true);
  }
};

TEST_F(MallocSpares, ReusedBeforeThePurgeDelay) {
  uintptr_t seg = spare_segment();
  ASSERT_NE(seg, 0u);
  EXPECT_GT(resident_pages(seg), 100);  // kept committed: the next thread faults nothing in
  g_fake_ms += 50;                      // half the purge delay
  ak_collect(false);
  EXPECT_GT(resident_pages(seg), 100);
  EXPECT_EQ(segment_of_next_thread(), seg);  // the newest spare first
}

TEST_F(MallocSpares, DecommittedAfterThePurgeDelayThenUnmapped) {
  uintptr_t seg = spare_segment();
  ASSERT_NE(seg, 0u);
  ASSERT_GT(resident_pages(seg), 100);
  g_fake_ms += 150;
  ak_collect(false);                  // a call that reaches the policy
  EXPECT_EQ(resident_pages(seg), 0);  // decommitted, still mapped
  g_fake_ms += 1000;
  ak_collect(false);
  EXPECT_EQ(resident_pages(seg), -1);  // unmapped past the release delay
}

TEST_F(MallocSpares, ADecommittedSpareIsStillReused) {
  uintptr_t seg = spare_segment();
  g_fake_ms += 150;
  ak_collect(false);
  ASSERT_EQ(resident_pages(seg), 0);
  EXPECT_EQ(segment_of_next_thread(), seg);
}

TEST_F(MallocSpares, UnmappedPastTheCap) {
  // Threads alive at once each fill a segment of their own, then exit:
  // more spares than the cap (8), so the oldest go at once, unmapped.
  constexpr int kThreads = 10, kCap = 8;
  std::vector<uintptr_t> segs(kThreads);
  std::atomic<int> holding{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++)
    threads.emplace_back([&, t] {
      std::vector<void *> blocks;
      for (int i = 0; i < 640; i++) blocks.push_back(ak_malloc(1000));
      segs[t] = segment_of(blocks[0]);
      holding++;
      while (holding.load() < kThreads) std::this_thread::yield();  // every thread holds its segment
      for (void *p : blocks) ak_free(p);
    });
  for (auto &th : threads) th.join();
  int unmapped = 0, kept = 0;
  for (uintptr_t s : segs) (resident_pages(s) == -1 ? unmapped : kept)++;
  EXPECT_EQ(kept, kCap);
  EXPECT_EQ(unmapped, kThreads - kCap);
}

TEST_F(MallocSpares, TheBackgroundThreadPurgesAnIdleMalloc) {
  uintptr_t seg = spare_segment();
  ASSERT_GT(resident_pages(seg), 100);
  ASSERT_EQ(ak_reclaim_thread_start(), 0);
  g_fake_ms += 150;
  _ak_reclaim_set_clock(fake_now);  // wakes the thread
  // No call of the malloc from here on: the thread alone gives it back.
  EXPECT_TRUE(eventually([&] { return resident_pages(seg) == 0; }));
  g_fake_ms += 1000;
  _ak_reclaim_set_clock(fake_now);
  EXPECT_TRUE(eventually([&] { return resident_pages(seg) == -1; }));
}

// AK_BACKGROUND_AUTO (the default): nothing runs until memory waits; the
// thread starts at the end of the call that put memory aside, gives back
// what a program that makes no call holds (a running thread's free pages,
// the large-block cache, spare segments), and ends once nothing waits.
// On the fake clock; the mode is restored to AUTO afterwards.
class MallocIdle : public ::testing::Test, protected FakeClockTest {
 protected:
  void SetUp() override {
    use_fake_clock();
    ASSERT_EQ(ak_reclaim_set_background(AK_BACKGROUND_OFF), 0);  // a known start: no thread
    ak_collect(true);
    ASSERT_EQ(ak_reclaim_set_background(AK_BACKGROUND_AUTO), 0);
  }
  void TearDown() override {
    restore_clock();
    ak_collect(true);
    ak_reclaim_set_background(AK_BACKGROUND_AUTO);
  }
};

TEST_F(MallocIdle, AThreadThatGoesQuietGetsItsFreePagesBackWithNoCall) {
  std::atomic<int> phase{0};
  uintptr_t seg = 0;
  std::thread t([&] {
    void *keep = ak_malloc(24);  // the segment stays this running thread's
    seg = fill_and_free();
    phase = 1;
    while (phase.load() != 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // quiet: no call
    ak_free(keep);
  });
  while (phase.load() != 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  long before = resident_pages(seg);
  EXPECT_GT(before, 100);
  EXPECT_TRUE(eventually([] { return ak_reclaim_thread_running(); })) << "started when memory waited";
  g_fake_ms += 150;  // within the purge delay (100 ms on the fixture's clock) + the thread's pass: kept
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  g_fake_ms += 300;  // past it: the thread gives the pages back, the owner still quiet
  EXPECT_TRUE(eventually([&] { return resident_pages(seg) < 40; })) << resident_pages(seg);
  phase = 2;
  t.join();
}

TEST_F(MallocIdle, TheLargeBlockCacheGoesBackWithNoCallAndTheThreadEnds) {
  const size_t n = size_t{12} << 20;
  void *p = ak_malloc(n);
  std::memset(p, 1, n);
  _ak_os_counters a, b;
  _ak_os_get_counters(&a);
  ak_free(p);  // cached: the budget (the recent peak) keeps it
  EXPECT_TRUE(eventually([] { return ak_reclaim_thread_running(); }));
  g_fake_ms += 1100;  // reuse stopped: past the release delay
  EXPECT_TRUE(eventually([&] {
    _ak_os_get_counters(&b);
    return b.mapped_bytes + n <= a.mapped_bytes;
  })) << "the cached mapping was not unmapped";
  // Nothing waits any more: the thread ends (after a second of real time).
  g_fake_ms += 5000;
  ak_collect(true);
  EXPECT_TRUE(eventually([] { return !ak_reclaim_thread_running(); })) << "the thread did not end when idle";
}

TEST_F(MallocIdle, OffNeverStartsTheThread) {
  ASSERT_EQ(ak_reclaim_set_background(AK_BACKGROUND_OFF), 0);
  EXPECT_EQ(ak_reclaim_get_background(), AK_BACKGROUND_OFF);
  size_t starts = _ak_reclaim_thread_starts();
  void *p = ak_malloc(size_t{8} << 20);
  ak_free(p);
  std::thread([] { fill_and_free(); }).join();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(_ak_reclaim_thread_starts(), starts);
  EXPECT_FALSE(ak_reclaim_thread_running());
  int bad = 7;
  ak_background mode;
  std::memcpy(&mode, &bad, sizeof mode);  // a value outside the enum, as a C caller may pass
  EXPECT_EQ(ak_reclaim_set_background(mode), EINVAL);
}

// A fork child has no background thread; it starts its own when its
// memory waits (AUTO; the parent's ON becomes AUTO in the child).
TEST_F(MallocIdle, AForkChildStartsItsOwnThreadWhenItsMemoryWaits) {
  ASSERT_EQ(ak_reclaim_thread_start(), 0);
  ASSERT_TRUE(ak_reclaim_thread_running());
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (ak_reclaim_thread_running()) _exit(2);
    if (ak_reclaim_get_background() != AK_BACKGROUND_AUTO) _exit(3);
    void *p = ak_malloc(size_t{8} << 20);
    if (!p) _exit(4);
    std::memset(p, 1, 4096);
    ak_free(p);  // cached: memory waits, the call ends by starting the thread
    _exit(ak_reclaim_thread_running() ? 0 : 5);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child's step that failed (see the test)";
  EXPECT_TRUE(ak_reclaim_thread_running()) << "the parent's thread";
}

TEST(MallocPageDelay, TheOptionIsTheReclaimPolicysPageDelay) {
  long old = ak_reclaim_get_page_delay();
  ak_option_set(AK_OPTION_PURGE_DELAY, 37);
  EXPECT_EQ(ak_reclaim_get_page_delay(), 37);
  ASSERT_EQ(ak_reclaim_set_page_delay(41), 0);
  EXPECT_EQ(ak_option_get(AK_OPTION_PURGE_DELAY), 41);
  EXPECT_EQ(ak_reclaim_set_page_delay(-2), EINVAL);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_NE(std::strstr(ak_last_error(), "ak_reclaim_set_page_delay"), nullptr) << ak_last_error();
  EXPECT_EQ(ak_reclaim_get_page_delay(), 41);  // kept
  ASSERT_EQ(ak_reclaim_set_page_delay(old), 0);
}

// Page delay 20 ms, purge delay 300 ms, release delay 5 s, on the fake
// reclaim clock; the delays in force before are restored afterwards.
class MallocPurgeDelays : public ::testing::Test {
 protected:
  void SetUp() override {
    old_page_ = ak_reclaim_get_page_delay();
    ak_reclaim_get_delays(&old_purge_, &old_release_);
    ASSERT_EQ(ak_reclaim_set_page_delay(20), 0);
    ASSERT_EQ(ak_reclaim_set_delays(300, 5000), 0);
    _ak_reclaim_set_clock(fake_now);
  }
  void TearDown() override {
    _ak_reclaim_set_clock(nullptr);
    ak_reclaim_set_page_delay(old_page_);
    ak_reclaim_set_delays(old_purge_, old_release_);
    ak_collect(true);
  }

 private:
  long old_page_ = 0, old_purge_ = 0, old_release_ = 0;
};

// The free pages of a segment that a running thread holds are its spare
// memory: they wait the policy's purge delay, not the page delay (kept
// past the page delay, decommitted after the purge delay).
TEST_F(MallocPurgeDelays, FreePagesOfARunningThreadsSegmentWaitThePurgeDelay) {
  long before = 0, kept = 0, after = 0;
  std::thread([&] {
    void *keep = ak_malloc(24);  // the segment stays in use
    uintptr_t seg = fill_and_free();
    ak_collect(false);
    before = resident_pages(seg);
    g_fake_ms += 100;  // past the page delay and any doubling of it (80 ms)
    ak_collect(false);
    kept = resident_pages(seg);
    g_fake_ms += 300;  // past the purge delay
    ak_collect(false);
    after = resident_pages(seg);
    ak_free(keep);
  }).join();
  EXPECT_GT(before, 100);
  EXPECT_EQ(kept, before) << "a running thread's free pages went back after the page delay";
  // Decommitted but for the pages still in use: the live block's, and the
  // last page of the freed blocks' class, which a heap keeps (16 each).
  EXPECT_LT(after, 40);
}

// The free pages of a segment whose thread exited, holding a live block,
// follow the page delay: no thread allocates there until one adopts it.
TEST_F(MallocPurgeDelays, FreePagesOfAnExitedThreadsSegmentFollowThePageDelay) {
  uintptr_t seg = 0;
  void *keep = nullptr;
  std::thread([&] {
    keep = ak_malloc(24);  // outlives the thread: the segment is abandoned, not empty
    seg = fill_and_free();
  }).join();
  ak_collect(false);
  long before = resident_pages(seg);
  g_fake_ms += 10;  // within the page delay
  ak_collect(false);
  long kept = resident_pages(seg);
  g_fake_ms += 100;  // past it
  ak_collect(false);
  long after = resident_pages(seg);
  ak_free(keep);
  EXPECT_GT(before, 100);
  EXPECT_EQ(kept, before) << "freed pages went back before the page delay";
  EXPECT_LT(after, 40) << "an exited thread's free pages were kept past the page delay";
}

// The page delay that an exited thread's segment follows is the one in
// force: once a thread that adopted it faulted its decommitted pages in
// again, its free pages wait the doubled delay (40 ms) when their thread
// exits in turn, so threads that come in rounds do not decommit what the
// next round faults in again; they go back once that has passed.
TEST_F(MallocPurgeDelays, ExitedThreadsFreePagesWaitTheDoubledDelayAfterARefault) {
  g_fake_ms += 2000;  // past the window (1 s) of any earlier refault
  uintptr_t seg = 0, again = 0;
  void *keep = nullptr, *keep2 = nullptr;
  std::thread([&] {
    keep = ak_malloc(24);              // the segment is abandoned at exit, not empty
    std::vector<void *> blocks(4000);  // ~3.9 MiB: every page of the segment
    for (void *&p : blocks) {
      p = ak_malloc(1000);
      ASSERT_NE(p, nullptr);
      std::memset(p, 0x5a, 1000);
    }
    seg = segment_of(keep);
    for (void *p : blocks) ak_free(p);
  }).join();
  // Past the page delay, and past the purge delay too: a spare segment the
  // blocks spilled into holds no committed page then, which a new span
  // would take before the adopted segment's decommitted ones.
  g_fake_ms += 400;
  ak_collect(false);
  long decommitted = resident_pages(seg);
  std::thread([&] {
    keep2 = ak_malloc(24);
    again = fill_and_free();  // the adopted segment's decommitted pages, faulted in
  }).join();
  ASSERT_EQ(again, seg) << "the next thread did not adopt the exited one's segment";
  long before = resident_pages(seg);
  g_fake_ms += 30;  // past the page delay set (20 ms), within the doubled one
  ak_collect(false);
  long kept = resident_pages(seg);
  g_fake_ms += 100;  // past the doubled delay too
  ak_collect(false);
  long after = resident_pages(seg);
  ak_free(keep);
  ak_free(keep2);
  EXPECT_LT(decommitted, 40);
  EXPECT_GT(before, 100);
  EXPECT_EQ(kept, before)
      << "free pages faulted in again went back after the page delay set, not the doubled one";
  EXPECT_LT(after, 40);
}

}  // namespace

namespace {

// Resident 4 KiB pages of [p, p + n) (mapped); -1 if mincore fails.
long resident_bytes_pages(const void *p, size_t n) {
  uintptr_t a = reinterpret_cast<uintptr_t>(p) & ~uintptr_t{4095};
  size_t len = reinterpret_cast<uintptr_t>(p) + n - a;
  std::vector<unsigned char> vec((len + 4095) / 4096);
  if (mincore(reinterpret_cast<void *>(a), len, vec.data()) != 0) return -1;
  long r = 0;
  for (unsigned char v : vec) r += v & 1;
  return r;
}

}  // namespace

// A freed large block's mapping that the budget no longer covers (the
// large bytes in use grew to the recent peak: here a realloc that grows
// another block in place) keeps its pages for the page delay in force, as
// every free page of the malloc does, and gives them back after it; taken
// again soon after, it doubles that delay. Threads that free and take
// large blocks at once moved the budget under mappings freed a moment
// before, and faulted them in again.
TEST_F(MallocPurgeDelays, ALargeMappingPastTheBudgetWaitsThePageDelay) {
  ak_collect(true);   // an empty cache
  g_fake_ms += 2000;  // past the window (1 s) of any earlier refault, and earlier peaks
  const size_t n = size_t{6} << 20;
  auto *a = static_cast<char *>(ak_malloc(n));
  auto *b = static_cast<char *>(ak_malloc(n));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  std::memset(a, 1, n);
  std::memset(b, 2, n);
  const long all = resident_bytes_pages(b, n);
  ak_free(b);                                            // cached: the peak (both blocks) covers it
  auto *a2 = static_cast<char *>(ak_realloc(a, 2 * n));  // b's mapping does not hold it: mremap
  ASSERT_NE(a2, nullptr);
  g_fake_ms += 5;  // within the page delay (20 ms)
  ak_collect(false);
  long kept = resident_bytes_pages(b, n);
  g_fake_ms += 30;  // past it
  ak_collect(false);
  long gone = resident_bytes_pages(b, n);
  auto *c = static_cast<char *>(ak_malloc(n));  // taken again 15 ms after its decommit
  long delay = _ak_reclaim_page_delay(g_fake_ms);
  EXPECT_EQ(c, b) << "the cached mapping is reused";
  EXPECT_GT(all, 1400);
  EXPECT_EQ(kept, all) << "decommitted within the page delay";
  EXPECT_LT(gone, 16) << "kept past the page delay";
  EXPECT_EQ(delay, 40) << "a decommitted mapping taken again soon after doubles the page delay";
  ak_free(c);
  ak_free(a2);
}
