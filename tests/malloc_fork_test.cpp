// SPDX-License-Identifier: MIT
// malloc_fork_test.cpp - fork() while other threads allocate: the child,
// which has only the forking thread, must find every lock of the malloc
// free (the atfork handlers take them all, in the order written beside
// them in src/malloc/heap.c). 200 forks while 4 threads churn mixed sizes
// (small, solo, 3 MiB, large and 4 MiB-aligned blocks); each child
// allocates, frees blocks from before the fork (its own and the churning
// threads'), collects and exits; the parent waits for each child with a
// timeout and kills a hung one (a failure).
#include <arenakit/arenakit.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "os/os_mem.h"
#include "sanitizers.h"

namespace {

constexpr int kThreads = 4;
// 200 forks; 40 under AddressSanitizer, where each fork copies the page
// tables of the shadow memory too (200 took 108 s on 2 busy cores).
#if AK_TEST_ASAN
constexpr int kForks = 40;
#else
constexpr int kForks = 200;
#endif
constexpr int kSlots = 64;  // per thread: blocks a child may free
constexpr auto kChildTimeout = std::chrono::seconds(10);

std::atomic<void *> g_slots[kThreads][kSlots];

// A child's exit. Under ThreadSanitizer, _exit() in a child makes it report
// the parent's threads copied into the child as leaked (exit code 66): the
// child leaves with the system call itself.
[[noreturn]] void child_exit(int code) {
#if defined(__SANITIZE_THREAD__)
  syscall(SYS_exit_group, code);
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
  syscall(SYS_exit_group, code);
#endif
#endif
  _exit(code);
}

// Sizes that reach every lock: small classes, solo spans (segment cache
// when segments come and go), 3 MiB (solo, nearly a whole segment: a new
// segment each time), large mappings (segment registry) and huge-aligned
// blocks (their registry).
void *churn_alloc(unsigned r) {
  switch (r % 16) {
    case 0:
    case 1:
    case 2:
    case 3:
    case 4:
    case 5:
    case 6:
    case 7:  // half the time 3 MiB: a segment taken from and given to the cache each time
      return ak_malloc(3 << 20);
    case 8: return ak_malloc(5 << 20);
    case 9: return ak_aligned_alloc(4 << 20, 4096);
    case 10:
    case 11: return ak_malloc(64 * 1024 + (r % 7) * 40000);
    default: return ak_malloc(8 + (r % 2000));
  }
}

void churn(int t, const std::atomic<bool> *stop) {
  unsigned r = 12345u + static_cast<unsigned>(t) * 7919u;
  while (!stop->load(std::memory_order_relaxed)) {
    r = r * 1103515245u + 12345u;
    void *p = churn_alloc(r >> 8);
    if (p) std::memset(p, 0x5a, std::min<size_t>(16, ak_usable_size(p)));
    // Exchange: a block is freed by exactly one owner, here or in a child.
    void *old = g_slots[t][(r >> 4) % kSlots].exchange(p, std::memory_order_acq_rel);
    ak_free(old);
    if ((r & 255) == 0) ak_collect(false);
  }
}

// The child: allocates and frees across the sizes, frees blocks of the
// parent's threads from before the fork, collects, reads the stats.
[[noreturn]] void child(void *before) {
  ak_free(before);
  for (int t = 0; t < kThreads; t++)
    for (int i = 0; i < kSlots; i += 3) ak_free(g_slots[t][i].exchange(nullptr));
  for (unsigned i = 0; i < 48; i++) {
    void *p = churn_alloc(i * 2654435761u >> 4);
    if (!p) child_exit(2);
    std::memset(p, 1, std::min<size_t>(64, ak_usable_size(p)));
    ak_free(p);
  }
  void *big = ak_malloc(3 << 20);
  if (!big) child_exit(3);
  big = ak_realloc(big, 9 << 20);
  if (!big) child_exit(4);
  ak_free(big);
  ak_collect(true);
  ak_malloc_stats s;
  ak_malloc_stats_get(&s);
  child_exit(0);
}

// Waits for `pid` at most kChildTimeout; a child still running then is
// killed. Returns the wait status, or -1 for a hung child.
int wait_with_timeout(pid_t pid) {
  auto deadline = std::chrono::steady_clock::now() + kChildTimeout;
  for (;;) {
    int status = 0;
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) return status;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
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
    void *p = ak_aligned_alloc(4 << 20, 4096);  // the registry's lock
    if (!p) child_exit(2);
    ak_free(p);
    child_exit(0);
  }
  ASSERT_GE(pid, 0);
  releaser.join();
  inside.join();
  _ak_os_set_hooks(&saved);
  ak_free(held);
  int status = wait_with_timeout(pid);
  EXPECT_NE(status, -1) << "the child hung on a lock held at fork";
  if (status != -1) {
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
}

// Forks `forks` times while kThreads threads churn; every child must exit
// 0 within kChildTimeout.
void fork_while_churning(int forks) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) threads.emplace_back(churn, t, &stop);
  int hung = 0, failed = 0;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < forks; i++) {
    void *before = ak_malloc(3 << 20);  // freed by the child, and by the parent
    ASSERT_NE(before, nullptr);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) child(before);
    ak_free(before);
    int status = wait_with_timeout(pid);
    if (status == -1) {
      hung++;
      ADD_FAILURE() << "child " << i << " hung (killed after " << kChildTimeout.count() << " s)";
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      failed++;
      ADD_FAILURE() << "child " << i << " ended with status " << status;
    }
    if (hung + failed >= 3) break;  // enough evidence; do not wait out every timeout
  }
  stop = true;
  for (auto &th : threads) th.join();
  for (auto &row : g_slots)
    for (auto &s : row) ak_free(s.exchange(nullptr));
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%d forks in %.1f s: %d hung, %d failed\n", forks, secs, hung, failed);
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
