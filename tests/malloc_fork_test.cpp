// SPDX-License-Identifier: MIT
// malloc_fork_test.cpp - fork() while other threads allocate: the child,
// which has only the forking thread, must find every lock of the malloc
// free (the atfork handlers take them all, in the order written beside
// them in src/malloc/heap.c). Forks while 4 threads churn five kinds of
// block (small, solo, segment-sized, large and 4 MiB-aligned); each child
// frees one block of each kind of each churning thread from before the
// fork and one of its own, allocates and frees every kind, reallocates,
// collects and reads the stats. The parent watches each child's progress
// (tests/fork_child_watch.h) and kills one that makes none for the limit:
// a hang, and a failure.
#include <arenakit/arenakit.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "fork_child_watch.h"
#include "os/os_mem.h"
#include "sanitizers.h"

namespace {

constexpr int kThreads = 4;
// Fewer forks under the sanitizers, where each fork copies the page
// tables of the shadow memory too and each page a thread writes after it
// is copied again (ThreadSanitizer's shadow is larger still): their runs
// look for races and bad accesses, the release build for the hang.
#if AK_TEST_SANITIZED
constexpr int kForks = 40;
#else
constexpr int kForks = 200;
#endif
// Slots per thread: blocks a child may free. A multiple of 16: slot s
// always holds a block of kind_of(s), so the first 16 slots hold every kind.
constexpr unsigned kSlots = 64;
static_assert(kSlots % 16 == 0, "each kind keeps its share of the slots");
// A child that makes no progress for this long is hung: each step is one
// allocation, free or call of the malloc.
constexpr auto kQuietLimit = std::chrono::seconds(10);

std::atomic<void *> g_slots[kThreads][kSlots];

// Kinds of block, each reaching its own locks: small classes, solo spans
// (the segment cache when segments come and go), segment-sized (3 MiB,
// solo, nearly a whole segment: a segment taken from and given to the
// spare set each time), large mappings (the segment registry, the
// large-block cache) and huge-aligned blocks (their registry).
enum Kind { kSmall, kSolo, kSegmentSized, kLarge, kHugeAligned, kKinds };

// The mix, for r = 0..15: half segment-sized, one large, one huge-aligned,
// two solo, four small.
Kind kind_of(unsigned r) {
  switch (r % 16) {
    case 8: return kLarge;
    case 9: return kHugeAligned;
    case 10:
    case 11: return kSolo;
    case 12:
    case 13:
    case 14:
    case 15: return kSmall;
    default: return kSegmentSized;
  }
}

// A block of kind `k`, its size varied by `r`.
void *alloc_kind(Kind k, unsigned r) {
  switch (k) {
    case kSegmentSized: return ak_malloc(3 << 20);
    case kLarge: return ak_malloc(5 << 20);
    case kHugeAligned: return ak_aligned_alloc(4 << 20, 4096);
    case kSolo: return ak_malloc(64 * 1024 + (r % 7) * 40000);
    default: return ak_malloc(8 + (r % 2000));
  }
}

void churn(int t, const std::atomic<bool> *stop) {
  unsigned r = 12345u + static_cast<unsigned>(t) * 7919u;
  while (!stop->load(std::memory_order_relaxed)) {
    r = r * 1103515245u + 12345u;
    unsigned slot = (r >> 4) % kSlots;
    void *p = alloc_kind(kind_of(slot), r >> 8);
    if (p) std::memset(p, 0x5a, std::min<size_t>(16, ak_usable_size(p)));
    // Exchange: a block is freed by exactly one owner, here or in a child.
    void *old = g_slots[t][slot].exchange(p, std::memory_order_acq_rel);
    ak_free(old);
    if ((r & 255) == 0) ak_collect(false);
  }
}

// The child: a progress byte after each step. Frees blocks from before the
// fork: its own, and one of each kind of each churning thread (a thread
// that does not exist in the child: remote frees, and the locks of the
// large kinds). Freeing more of them would take no other lock, and in the
// checked build each free fills the whole block, so every page of a
// segment-sized block is copied on write. Then allocates and frees every
// kind three times, grows a block from solo to large, collects (the
// abandoned segments) and reads the stats (the heap registry).
[[noreturn]] void child(void *before, ForkChildWatch &watch) {
  watch.in_child();
  ak_free(before);
  watch.progress();
  for (int t = 0; t < kThreads; t++) {
    bool freed[kKinds] = {};
    for (unsigned s = 0; s < 16; s++) {
      if (freed[kind_of(s)]) continue;
      freed[kind_of(s)] = true;
      ak_free(g_slots[t][s].exchange(nullptr));
      watch.progress();
    }
  }
  for (unsigned i = 0; i < 48; i++) {
    void *p = alloc_kind(kind_of(i), i * 2654435761u >> 4);
    if (!p) fork_child_exit(2);
    std::memset(p, 1, std::min<size_t>(64, ak_usable_size(p)));
    ak_free(p);
    watch.progress();
  }
  void *big = ak_malloc(3 << 20);
  if (!big) fork_child_exit(3);
  big = ak_realloc(big, 9 << 20);
  if (!big) fork_child_exit(4);
  ak_free(big);
  watch.progress();
  ak_collect(true);
  watch.progress();
  ak_malloc_stats s;
  ak_malloc_stats_get(&s);
  watch.progress();
  fork_child_exit(0);
}

// A lock held by another thread at the moment of fork(), made certain:
// a map hook stops the thread inside the huge-aligned registry's lock (the
// registry grows with a 4 KiB mapping under it) while the main thread
// forks. The prepare handler waits for that lock (the hook lets the thread
// go 200 ms later), so the child finds it free; without the handler the
// fork goes through at once and the child hangs on the copied lock.
std::atomic<int> g_hook_state{0};  // 1: armed, 2: a thread is inside, 3: released

void *blocking_map(void *hint, size_t size, void *ctx) {
  int armed = 1;
  if (size == 4096 && g_hook_state.compare_exchange_strong(armed, 2)) {
    while (g_hook_state.load() != 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return _ak_os_default_hooks().map(hint, size, ctx);
}

TEST(MallocFork, ALockHeldAtForkIsFreeInTheChild) {
  ak_free(ak_malloc(16));  // the heap and its fork handlers exist
  ForkChildWatch watch;
  ASSERT_TRUE(watch.open()) << strerror(errno);
  _ak_os_hooks h = _ak_os_default_hooks();
  h.map = blocking_map;
  _ak_os_hooks saved = _ak_os_set_hooks(&h);
  g_hook_state = 1;
  void *held = nullptr;
  std::thread inside([&] { held = ak_aligned_alloc(4 << 20, 4096); });
  for (int i = 0; i < 2000 && g_hook_state.load() != 2; i++)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (g_hook_state.load() != 2) {
    g_hook_state = 3;
    inside.join();
    _ak_os_set_hooks(&saved);
    ak_free(held);
    GTEST_SKIP() << "the huge-aligned registry was already mapped: no lock to hold across fork";
  }
  std::thread releaser([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    g_hook_state = 3;
  });
  pid_t pid = fork();  // with the handler: waits here until the releaser runs
  if (pid == 0) {
    watch.in_child();
    void *p = ak_aligned_alloc(4 << 20, 4096);  // the registry's lock
    if (!p) fork_child_exit(2);
    ak_free(p);
    watch.progress();
    fork_child_exit(0);
  }
  ASSERT_GE(pid, 0);
  releaser.join();
  inside.join();
  _ak_os_set_hooks(&saved);
  ak_free(held);
  ForkChildWatch::Outcome o = watch.wait(pid, kQuietLimit);
  EXPECT_FALSE(o.hung) << "the child hung on a lock held at fork";
  if (!o.hung) {
    EXPECT_TRUE(WIFEXITED(o.status) && WEXITSTATUS(o.status) == 0) << o.status;
  }
}

// Forks `forks` times while kThreads threads churn; every child must exit
// 0, never going kQuietLimit without progress.
void fork_while_churning(int forks) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) threads.emplace_back(churn, t, &stop);
  int hung = 0, failed = 0;
  double slowest = 0, longest_quiet = 0;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < forks && hung + failed < 3; i++) {  // three prove it; each hang costs the limit
    ForkChildWatch watch;
    void *before = ak_malloc(3 << 20);  // freed by the child, and by the parent
    if (!before || !watch.open()) {
      ADD_FAILURE() << "fork " << i << ": " << (before ? "no pipe: " : "no block: ") << strerror(errno);
      ak_free(before);
      break;
    }
    pid_t pid = fork();
    if (pid == 0) child(before, watch);
    ak_free(before);
    if (pid < 0) {
      ADD_FAILURE() << "fork " << i << ": " << strerror(errno);
      break;
    }
    ForkChildWatch::Outcome o = watch.wait(pid, kQuietLimit);
    slowest = std::max(slowest, o.seconds);
    longest_quiet = std::max(longest_quiet, o.longest_quiet);
    if (o.hung) {
      hung++;
      ADD_FAILURE() << "child " << i << " hung: no progress for " << kQuietLimit.count() << " s after "
                    << o.steps << " steps (killed)";
    } else if (!WIFEXITED(o.status) || WEXITSTATUS(o.status) != 0) {
      failed++;
      ADD_FAILURE() << "child " << i << " ended with status " << o.status << " after " << o.steps << " steps";
    }
  }
  stop = true;
  for (auto &th : threads) th.join();
  for (auto &row : g_slots)
    for (auto &s : row) ak_free(s.exchange(nullptr));
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "%d forks in %.1f s: %d hung, %d failed; slowest child %.2f s, longest wait for progress %.2f s\n",
      forks, secs, hung, failed, slowest, longest_quiet);
  EXPECT_EQ(hung, 0);
  EXPECT_EQ(failed, 0);
}

TEST(MallocFork, ChildrenOfAChurningProcessNeverHang) { fork_while_churning(kForks); }

// The same with the reclaim policy's background thread purging the spare
// segments all the while (delays of 1 and 2 ms: every segment the churn
// gives back is decommitted and unmapped by the thread, whose pass holds
// the spare set's lock that the fork handlers take too).
TEST(MallocFork, ChildrenNeverHangWhileTheBackgroundThreadPurges) {
  long purge = 0, release = 0;
  ak_reclaim_get_delays(&purge, &release);
  ASSERT_EQ(ak_reclaim_set_delays(1, 2), 0);
  ASSERT_EQ(ak_reclaim_thread_start(), 0);
  fork_while_churning(kForks / 4);
  ak_reclaim_thread_stop();
  ak_reclaim_set_delays(purge, release);
}

}  // namespace
