// SPDX-License-Identifier: MIT
// pool_fork_test.cpp - fork() while other threads use a pool, in every sync
// mode: the child allocates, frees objects from before the fork (allocated
// by a thread that has exited), uses a new pool, destroys the pool and
// exits; the parent watches each child's progress (tests/fork_child_watch.h):
// a child that hangs on a lock a parent thread held at the fork makes none
// for the limit, is killed and fails the test.
#include <arenakit/arenakit.h>
#include <gtest/gtest.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "fork_child_watch.h"
#include "pool_sync_modes.h"
#include "sanitizers.h"

namespace {

constexpr int kForks = 200;     // per sync mode (the count)
constexpr int kChurners = 4;    // threads using the pool while the main thread forks
constexpr size_t kObject = 48;  // bytes per object
// A child whose step (one phase of the child below, milliseconds of work)
// makes no progress for this long is hung.
constexpr auto kQuietLimit = std::chrono::seconds(5);

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

// The child: every step may need a lock some parent thread held at fork();
// a progress byte after each. Exit codes name the step that failed.
[[noreturn]] void child(ak_pool *p, const std::vector<void *> &before, ForkChildWatch &watch) {
  watch.in_child();
  std::vector<void *> mine;
  for (int i = 0; i < 300; i++) {
    void *o = ak_pool_alloc(p);
    if (!o) fork_child_exit(2);
    memset(o, 0x5a, kObject);
    mine.push_back(o);
  }
  watch.progress();
  for (void *o : before) ak_pool_free(p, o);  // allocated before the fork, by an exited thread
  watch.progress();
  for (void *o : mine) ak_pool_free(p, o);
  watch.progress();
  ak_pool_trim(p);
  watch.progress();
  void *o = ak_pool_alloc(p);
  if (!o) fork_child_exit(3);
  ak_pool_free(p, o);
  watch.progress();
  ak_pool *q = make_pool(AK_SYNC_THREADS);  // the registries
  if (!q) fork_child_exit(4);
  void *x = ak_pool_alloc(q);
  if (!x) fork_child_exit(5);
  ak_pool_free(q, x);
  ak_pool_destroy(q);
  watch.progress();
  ak_pool_destroy(p);
  watch.progress();
  fork_child_exit(0);
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
  unsigned hung_steps = 0;
  for (int i = 0; i < kForks; i++) {
    ForkChildWatch watch;
    if (!watch.open()) {
      ADD_FAILURE() << "no pipe: " << strerror(errno);
      break;
    }
    pid_t pid = fork();
    if (pid == 0) child(p, before, watch);
    if (pid < 0) {
      ADD_FAILURE() << "fork: " << strerror(errno);
      break;
    }
    ForkChildWatch::Outcome o = watch.wait(pid, kQuietLimit);
    if (o.hung) {
      hung_steps = o.steps;
      if (++hung == 3) break;  // each hang costs the limit: three prove it
    } else if (!WIFEXITED(o.status) || WEXITSTATUS(o.status) != 0) {
      failed++;
      last_bad = o.status;
    }
  }
  stop = true;
  for (auto &t : threads) t.join();
  EXPECT_EQ(hung, 0) << "children hung: no progress for " << kQuietLimit.count()
                     << " s (killed); the last after " << hung_steps << " steps";
  EXPECT_EQ(failed, 0) << "children failed; last wait status 0x" << std::hex << last_bad;
  for (void *o : before) ak_pool_free(p, o);
  ak_pool_destroy(p);
}

INSTANTIATE_TEST_SUITE_P(AllModes, PoolFork, AK_ALL_SYNC_MODES, ak_sync_mode_name);

}  // namespace
