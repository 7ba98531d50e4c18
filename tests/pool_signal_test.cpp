// SPDX-License-Identifier: MIT
// pool_signal_test.cpp - pools used from signal handlers (arenakit/pool.h,
// "Signal handlers"): an AK_SYNC_LOCKFREE pool serves a handler that
// interrupted the same thread inside a pool call, without a hang, a lost
// object or one handed out twice; AK_SYNC_SPINLOCK refuses such a call
// (EDEADLK, or an abort with a message for a free). Each scenario runs in a
// child watched for progress (fork_child_watch.h), so a hang is a failure
// and not a stuck test.
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>

#include <gtest/gtest.h>

#include "arenakit/pool.h"
#include "fork_child_watch.h"
#include "sanitizers.h"

// The magazine's test seam (src/pool/modes.h): called where a slow path
// holds the thread's chain.
extern "C" void (*_ak_mag_test_point)(void);

namespace {

constexpr uint64_t kMain = 0x6d61696e6d61696eULL;     // stamp of the main code's objects
constexpr uint64_t kHandler = 0x68616e646c657221ULL;  // stamp of the handler's objects
constexpr int kHeld = 64;                             // objects the handler keeps between runs

// What the handler works on (one pool, one thread at a time: the handler
// runs on the thread it interrupted).
ak_pool *g_pool;
void *g_held[kHeld];
int g_nheld;
volatile sig_atomic_t g_failed;  // exit code of the first failure seen in the handler
std::atomic<long> g_runs{0};

void fail(int code) {
  if (!g_failed) g_failed = code;
}

// Allocates two objects, stamps them, frees one and keeps the other; every
// kHeld runs frees what it kept. So the handler leaves the pool changed
// (objects held across the interrupted call), which a handler that only
// paired its allocations with frees would hide.
void lockfree_handler(int) {
  int saved = errno;
  void *a = ak_pool_alloc(g_pool);
  void *b = ak_pool_alloc(g_pool);
  if (!a || !b) fail(3);
  if (a && b && a == b) fail(4);
  if (a) *static_cast<uint64_t *>(a) = kHandler;
  if (b) *static_cast<uint64_t *>(b) = kHandler;
  if (a) ak_pool_free(g_pool, a);
  if (b) g_held[g_nheld++] = b;
  if (g_nheld == kHeld) {
    for (int i = 0; i < kHeld; i++) {
      if (*static_cast<uint64_t *>(g_held[i]) != kHandler) fail(5);  // handed out twice
      ak_pool_free(g_pool, g_held[i]);
    }
    g_nheld = 0;
  }
  g_runs.fetch_add(1, std::memory_order_relaxed);
  errno = saved;
}

void raise_usr1() { raise(SIGUSR1); }

void install(void (*handler)(int)) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR1, &sa, nullptr);
}

ak_pool *lockfree_pool() {
  ak_pool_options o = {};
  o.object_size = 48;
  o.name = "signals";
  o.sync = AK_SYNC_LOCKFREE;
  ak_pool *p = ak_pool_create(&o);
  // Free objects on the shared stack for every handler call: a handler
  // maps no slab (arenakit/pool.h).
  if (p && ak_pool_reserve(p, 1 << 16) != 0) return nullptr;
  return p;
}

// The main code's churn: batches that cross the magazine's slow paths
// (refills, spills, drains), each object stamped and checked before its
// free. Returns 0 or an exit code.
int churn_round(ak_pool *p, unsigned seed) {
  void *v[600];  // up to past two batches of a 48-byte pool (256 each)
  int n = 40 + static_cast<int>(seed % 560);
  for (int i = 0; i < n; i++) {
    v[i] = ak_pool_alloc(p);
    if (!v[i]) return 10;
    *static_cast<uint64_t *>(v[i]) = kMain ^ reinterpret_cast<uintptr_t>(v[i]);
  }
  for (int i = 0; i < n; i++)
    if (*static_cast<uint64_t *>(v[i]) != (kMain ^ reinterpret_cast<uintptr_t>(v[i]))) return 11;
  for (int i = n - 1; i >= 0; i--) ak_pool_free(p, v[i]);
  return 0;
}

// After the run: everything the handler kept freed, nothing live, and a
// trim takes every slab down (a lost or doubled slot would keep the stack
// short of a full count, and the slabs committed).
int settle(ak_pool *p) {
  for (int i = 0; i < g_nheld; i++) ak_pool_free(p, g_held[i]);
  g_nheld = 0;
  ak_pool_stats st = {};
  st.version = AK_POOL_STATS_VERSION;
  ak_pool_stats_get(p, &st);
  if (st.live != 0) return 20;
  ak_pool_trim(p);
  ak_pool_stats_get(p, &st);
  if (st.bytes_spare != st.bytes_reserved) return 21;
  return 0;
}

template <class F>
ForkChildWatch::Outcome in_child(F body, std::chrono::seconds limit) {
  ForkChildWatch watch;
  EXPECT_TRUE(watch.open());
  fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    watch.in_child();
    fork_child_exit(body(watch));
  }
  return watch.wait(pid, limit);
}

void expect_exit0(const ForkChildWatch::Outcome &o) {
  EXPECT_FALSE(o.hung) << "no progress for the whole limit: a handler waits for the call it interrupted";
  ASSERT_TRUE(WIFEXITED(o.status)) << "status " << o.status;
  EXPECT_EQ(WEXITSTATUS(o.status), 0)
      << "exit code: see the test's codes (3-5 handler, 10-11 main, 20-21 end)";
}

// The slow paths raise SIGUSR1 where they hold the magazine's chain (the
// test seam): the handler's calls are nested in a claimed chain, a refill
// or a spill, 10,000 times.
TEST(PoolSignal, ALockfreePoolServesAHandlerThatInterruptsItsSlowPath) {
  auto o = in_child(
      [](ForkChildWatch &watch) {
        g_pool = lockfree_pool();
        if (!g_pool) return 2;
        install(lockfree_handler);
        _ak_mag_test_point = raise_usr1;
        for (unsigned round = 0; g_runs.load() < 10000; round++) {
          int rc = churn_round(g_pool, round * 2654435761u);
          if (rc) return rc;
          if (g_failed) return static_cast<int>(g_failed);
          if (round % 64 == 0) watch.progress();
        }
        _ak_mag_test_point = nullptr;
        int rc = settle(g_pool);
        ak_pool_destroy(g_pool);
        return rc;
      },
      std::chrono::seconds(20));
  expect_exit0(o);
}

// Another thread sends SIGUSR1 every 20 us to a thread that churns the
// pool: the handler lands anywhere, inline paths and library alike.
TEST(PoolSignal, ALockfreePoolServesHandlersThatInterruptAnyCall) {
  auto o = in_child(
      [](ForkChildWatch &watch) {
        g_pool = lockfree_pool();
        if (!g_pool) return 2;
        ak_pool_free(g_pool, ak_pool_alloc(g_pool));  // the thread's magazine, made before any handler runs
        install(lockfree_handler);
        static std::atomic<bool> stop{false};
        pthread_t self = pthread_self(), sender;
        pthread_create(
            &sender, nullptr,
            [](void *arg) -> void * {
              pthread_t target = *static_cast<pthread_t *>(arg);
              struct timespec ts = {0, 20000};
              while (!stop.load()) {
                pthread_kill(target, SIGUSR1);
                nanosleep(&ts, nullptr);
              }
              return nullptr;
            },
            &self);
        auto end = std::chrono::steady_clock::now() + std::chrono::seconds(1);
        int rc = 0;
        for (unsigned round = 0; !rc && (std::chrono::steady_clock::now() < end || g_runs.load() < 1000);
             round++) {
          rc = churn_round(g_pool, round * 2654435761u);
          if (!rc && g_failed) rc = static_cast<int>(g_failed);
          if (round % 64 == 0) watch.progress();
        }
        stop.store(true);
        pthread_join(sender, nullptr);
        if (!rc) rc = settle(g_pool);
        ak_pool_destroy(g_pool);
        return rc;
      },
      std::chrono::seconds(20));
  expect_exit0(o);
}

// AK_SYNC_SPINLOCK: a nested allocation is refused (NULL, EDEADLK), not
// served from a magazine or a lock the interrupted call holds.
void *g_spin_got;
int g_spin_errno;
void spinlock_alloc_handler(int) {
  int saved = errno;
  errno = 0;
  g_spin_got = ak_pool_alloc(g_pool);
  g_spin_errno = errno;
  g_runs.fetch_add(1);
  errno = saved;
}

ak_pool *spinlock_pool() {
  ak_pool_options o = {};
  o.object_size = 48;
  o.name = "signals-spin";
  o.sync = AK_SYNC_SPINLOCK;
  return ak_pool_create(&o);
}

TEST(PoolSignal, ASpinlockPoolRefusesAnAllocationNestedInItsOwnCall) {
  auto o = in_child(
      [](ForkChildWatch &watch) {
        g_pool = spinlock_pool();
        if (!g_pool) return 2;
        install(spinlock_alloc_handler);
        _ak_mag_test_point = raise_usr1;
        void *x = ak_pool_alloc(g_pool);  // the first allocation refills: the slow path
        _ak_mag_test_point = nullptr;
        watch.progress();
        if (!x) return 3;
        if (g_runs.load() < 1) return 4;
        if (g_spin_got != nullptr) return 5;
        if (g_spin_errno != EDEADLK) return 6;
        if (!strstr(ak_last_error(), "AK_SYNC_LOCKFREE")) return 7;
        ak_pool_free(g_pool, x);
        ak_pool_destroy(g_pool);
        return 0;
      },
      std::chrono::seconds(20));
  expect_exit0(o);
}

void *g_spin_obj;
void spinlock_free_handler(int) { ak_pool_free(g_pool, g_spin_obj); }

TEST(PoolSignalDeathTest, ASpinlockPoolReportsAFreeNestedInItsOwnCall) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        g_pool = spinlock_pool();
        g_spin_obj = ak_pool_alloc(g_pool);
        install(spinlock_free_handler);
        _ak_mag_test_point = raise_usr1;
        void *v[600];                                  // past two batches of a 48-byte pool (256 each)
        for (void *&x : v) x = ak_pool_alloc(g_pool);  // refills: the slow path raises the signal
        for (void *x : v) ak_pool_free(g_pool, x);
      },
      "ak_pool_free.*signal handler.*only AK_SYNC_LOCKFREE pools serve such calls");
}

}  // namespace
