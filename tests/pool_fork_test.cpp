// SPDX-License-Identifier: MIT
// pool_fork_test.cpp - fork() while other threads use a pool, in every sync
// mode: the child allocates, frees objects from before the fork (allocated
// by a thread that has exited), uses a new pool, destroys the pool and
// exits; a child that hangs on a lock a parent thread held at the fork is
// killed after a timeout and fails the test.
#include <arenakit/arenakit.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <thread>
#include <vector>

#include "pool_sync_modes.h"
#include "sanitizers.h"

namespace {

constexpr int kForks = 200;        // per sync mode (the count)
constexpr int kChurners = 4;       // threads using the pool while the main thread forks
constexpr size_t kObject = 48;     // bytes per object
constexpr int kChildTimeoutS = 5;  // a child needs milliseconds; longer is a hang

ak_pool *make_pool(ak_sync sync) {
  ak_pool_options o = {};
  o.object_size = kObject;
  o.sync = sync;
  o.slab_size = 16384;  // small slabs: slabs come and go all the time
  o.name = "forked";
  return ak_pool_create(&o);
}

// One churning thread: batches of allocations and frees that take and give
// slabs back, a trim now and then (every magazine, the pool's locks), a
// short-lived thread that makes and hands back its per-thread state (the
// registry lock, the pool mutex), and a pool created and destroyed (the
// registry of pools). AK_SYNC_NONE is not thread-safe: each churning thread
// uses a NONE pool of its own there.
void churn(ak_pool *shared, ak_sync sync, const std::atomic<bool> *stop, unsigned seed) {
  ak_pool *p = sync == AK_SYNC_NONE ? make_pool(AK_SYNC_NONE) : shared;
  std::vector<void *> held;
  for (unsigned round = 0; !stop->load(std::memory_order_relaxed); round++) {
    size_t n = 64 + (seed = seed * 1103515245u + 12345u) % 512;
    for (size_t i = 0; i < n; i++)
      if (void *o = ak_pool_alloc(p)) held.push_back(o);
    for (void *o : held) ak_pool_free(p, o);
    held.clear();
    if (round % 8 == 0) ak_pool_trim(p);
    if (round % 16 == 0 && sync != AK_SYNC_NONE) {
      std::thread([p] {
        void *o = ak_pool_alloc(p);
        ak_pool_free(p, o);
      }).join();
    }
    if (round % 32 == 0) {
      ak_pool *q = make_pool(sync);
      ak_pool_free(q, ak_pool_alloc(q));
      ak_pool_destroy(q);
    }
  }
  if (p != shared) ak_pool_destroy(p);
}

// The child: every step may need a lock some parent thread held at fork().
// Exit codes name the step that failed.
[[noreturn]] void child(ak_pool *p, const std::vector<void *> &before) {
  std::vector<void *> mine;
  for (int i = 0; i < 300; i++) {
    void *o = ak_pool_alloc(p);
    if (!o) _exit(2);
    memset(o, 0x5a, kObject);
    mine.push_back(o);
  }
  for (void *o : before) ak_pool_free(p, o);  // allocated before the fork, by an exited thread
  for (void *o : mine) ak_pool_free(p, o);
  ak_pool_trim(p);
  void *o = ak_pool_alloc(p);
  if (!o) _exit(3);
  ak_pool_free(p, o);
  ak_pool *q = make_pool(AK_SYNC_THREADS);  // the registries
  if (!q) _exit(4);
  void *x = ak_pool_alloc(q);
  if (!x) _exit(5);
  ak_pool_free(q, x);
  ak_pool_destroy(q);
  ak_pool_destroy(p);
  _exit(0);
}

// Waits for `pid` at most kChildTimeoutS seconds; kills it if it hangs.
// Returns its wait status, or -1 if it was killed for hanging.
int wait_or_kill(pid_t pid) {
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (unsigned nap = 50;;) {
    int status = 0;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - start.tv_sec >= kChildTimeoutS) break;
    usleep(nap);
    if (nap < 2000) nap *= 2;
  }
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  return -1;
}

class PoolFork : public ::testing::TestWithParam<ak_sync> {};

// AddressSanitizer's allocator (GCC 12's libasan) takes no lock around
// fork(): under a sanitizer, a child of threads that call malloc may block
// forever inside the sanitizer's own allocator (seen under ASan in
// __sanitizer::SizeClassAllocator64::GetFromAllocator, reached from the
// pool's per-thread state, which the pool allocates with malloc; under TSan
// in about one run of six, on the commit before the reclaim policy too).
// The release and hardened builds run the test.

TEST_P(PoolFork, ChildrenOfAChurningPoolAllocateFreeAndExit) {
#if AK_TEST_SANITIZED
  GTEST_SKIP() << "a sanitizer's malloc is not fork-safe with threads: its children can hang in it";
#endif
  ak_pool *p = make_pool(GetParam());
  ASSERT_NE(p, nullptr);
  // Objects from before the fork, allocated by a thread that has exited
  // (AK_SYNC_THREADS: its slabs are abandoned; the magazines: handed back).
  std::vector<void *> before(64);
  std::thread([&] {
    for (void *&o : before) o = ak_pool_alloc(p);
  }).join();
  for (void *o : before) ASSERT_NE(o, nullptr);

  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kChurners; t++) threads.emplace_back(churn, p, GetParam(), &stop, 17u + (unsigned)t);

  int hung = 0, failed = 0, last_bad = 0;
  for (int i = 0; i < kForks; i++) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0) << strerror(errno);
    if (pid == 0) child(p, before);
    int st = wait_or_kill(pid);
    if (st == -1) {
      if (++hung == 3) break;  // each hang costs the timeout: three prove it
    } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      failed++;
      last_bad = st;
    }
  }
  stop = true;
  for (auto &t : threads) t.join();
  EXPECT_EQ(hung, 0) << "children hung (killed after " << kChildTimeoutS << " s)";
  EXPECT_EQ(failed, 0) << "children failed; last wait status 0x" << std::hex << last_bad;
  for (void *o : before) ak_pool_free(p, o);
  ak_pool_destroy(p);
}

INSTANTIATE_TEST_SUITE_P(AllModes, PoolFork, AK_ALL_SYNC_MODES, ak_sync_mode_name);

}  // namespace
