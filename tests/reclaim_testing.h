// SPDX-License-Identifier: MIT
// reclaim_testing.h - what the tests of the reclaim policy share: a fake
// reclaim clock, the process's RSS, waiting for a condition, and a fixture
// base that sets the delays and the fake clock and restores them.
#ifndef AK_TESTS_RECLAIM_TESTING_H
#define AK_TESTS_RECLAIM_TESTING_H

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "arenakit/reclaim.h"

extern "C" {
#include "common/reclaim.h"
}

// The fake reclaim clock (ms), advanced by hand.
inline std::atomic<uint64_t> g_fake_ms{1000000};
inline uint64_t fake_now() { return g_fake_ms.load(); }

// RSS of the process in bytes (/proc/self/statm).
inline size_t rss_bytes() {
  long pages = 0, resident = 0;
  FILE *f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  int n = std::fscanf(f, "%ld %ld", &pages, &resident);
  std::fclose(f);
  return n == 2 ? static_cast<size_t>(resident) * static_cast<size_t>(sysconf(_SC_PAGESIZE)) : 0;
}

// Waits (real time, up to 5 s) for `pred`.
template <class F>
bool eventually(F pred) {
  for (int i = 0; i < 500; i++) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

// Delays of 100 ms (purge) and 1000 ms (release) on the fake clock for the
// test's duration; the background thread stopped and everything restored
// after it.
class FakeClockTest {
 protected:
  void use_fake_clock() {
    ak_reclaim_get_delays(&purge_, &release_);
    ASSERT_EQ(ak_reclaim_set_delays(100, 1000), 0);
    _ak_reclaim_set_clock(fake_now);
  }
  void restore_clock() {
    ak_reclaim_thread_stop();
    _ak_reclaim_set_clock(nullptr);
    ak_reclaim_set_delays(purge_, release_);
  }
  long purge_ = 0, release_ = 0;
};

#endif  // AK_TESTS_RECLAIM_TESTING_H
