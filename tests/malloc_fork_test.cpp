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
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

namespace {

constexpr int kThreads = 4;
constexpr int kForks = 200;
constexpr int kSlots = 64;  // per thread: blocks a child may free
constexpr auto kChildTimeout = std::chrono::seconds(10);

std::atomic<void *> g_slots[kThreads][kSlots];

// Sizes that reach every lock: small classes, solo spans (segment cache
// when segments come and go), 3 MiB (solo, nearly a whole segment: a new
// segment each time), large mappings (segment registry) and huge-aligned
// blocks (their registry).
void *churn_alloc(unsigned r) {
  switch (r % 16) {
    case 0: return ak_malloc(3 << 20);
    case 1: return ak_malloc(5 << 20);
    case 2: return ak_aligned_alloc(4 << 20, 4096);
    case 3:
    case 4: return ak_malloc(64 * 1024 + (r % 7) * 40000);
    default: return ak_malloc(8 + (r % 2000));
  }
}

void churn(int t, const std::atomic<bool> *stop) {
  unsigned r = 12345u + static_cast<unsigned>(t) * 7919u;
  while (!stop->load(std::memory_order_relaxed)) {
    r = r * 1103515245u + 12345u;
    void *p = churn_alloc(r >> 8);
    if (p) std::memset(p, 0x5a, 16);
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
    if (!p) _exit(2);
    std::memset(p, 1, 64);
    ak_free(p);
  }
  void *big = ak_malloc(3 << 20);
  if (!big) _exit(3);
  big = ak_realloc(big, 9 << 20);
  if (!big) _exit(4);
  ak_free(big);
  ak_collect(true);
  ak_malloc_stats s;
  ak_malloc_stats_get(&s);
  _exit(0);
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

TEST(MallocFork, ChildrenOfAChurningProcessNeverHang) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) threads.emplace_back(churn, t, &stop);
  int hung = 0, failed = 0;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kForks; i++) {
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
  std::printf("%d forks in %.1f s: %d hung, %d failed\n", kForks, secs, hung, failed);
  EXPECT_EQ(hung, 0);
  EXPECT_EQ(failed, 0);
}

}  // namespace
