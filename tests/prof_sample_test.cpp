// SPDX-License-Identifier: MIT
// prof_sample_test.cpp - the heap profiler's sampler (src/prof/sample.h,
// sample.c): ln and exp without libm against the C library's; the
// exponential draws' mean; the countdown samples an allocation of s bytes
// with probability 1 - exp(-s / period) and the weights unsample it (the
// estimate of the bytes allocated comes back to the true total); off, the
// countdown never fires; start, stop and a new period reach a thread that
// allocates, through the slow path or the components' poll. Every draw
// comes from a fixed seed, so each figure below is the same at every run;
// the tolerances are several standard deviations of the statistic.
#include <arenakit/prof.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "prof/prof_internal.h"

namespace {

class ProfSample : public ::testing::Test {
 protected:
  void SetUp() override { _ak_prof_reset(nullptr); }
  void TearDown() override { _ak_prof_reset(nullptr); }
};

TEST_F(ProfSample, LnAndExpMatchTheCLibrary) {
  for (double x = 1e-300; x < 1e300; x *= 3.7)
    EXPECT_NEAR(_ak_prof_ln(x), std::log(x), 1e-13 * std::fabs(std::log(x)) + 1e-15);
  for (double x : {1.0, 0.5, 2.0, 1.0 / 3, 0.999999, 1.000001, 1.1102230246251565e-16, 4.9e-324})
    EXPECT_NEAR(_ak_prof_ln(x), std::log(x), 1e-12 * std::fabs(std::log(x)) + 1e-15) << x;
  for (double x = -700; x < 700; x += 0.37) EXPECT_NEAR(_ak_prof_exp(x) / std::exp(x), 1.0, 1e-13) << x;
  EXPECT_EQ(_ak_prof_exp(-800), 0.0);
}

TEST_F(ProfSample, AWeightIsTheInverseOfTheSamplingProbability) {
  const uint64_t period = 524288;
  for (uint64_t size : {1ull, 16ull, 1000ull, 65536ull, 524288ull, 4ull << 20, 1ull << 30}) {
    double p = -std::expm1(-double(size) / double(period));
    double want = double(AK_PROF_OBJ_ONE) / p;
    EXPECT_NEAR(double(_ak_prof_weight(size, period)), want, want * 1e-9 + 1) << size;
  }
  EXPECT_EQ(_ak_prof_weight(1ull << 40, 4096), AK_PROF_OBJ_ONE);  // certain: stands for itself
}

TEST_F(ProfSample, DrawsAreExponentialWithThePeriodAsMean) {
  _ak_prof_seed(7);
  const uint64_t period = 524288;
  const int n = 400000;
  double sum = 0, sum2 = 0;
  int below_mean = 0;
  for (int i = 0; i < n; i++) {
    double x = double(_ak_prof_draw(period));
    ASSERT_GE(x, 0);
    sum += x;
    sum2 += x * x;
    below_mean += x < double(period);
  }
  double mean = sum / n, sd = std::sqrt(sum2 / n - mean * mean);
  // The mean's standard error is period / sqrt(n) = 0.16 %; 1 % is 6 of them.
  EXPECT_NEAR(mean / double(period), 1.0, 0.01);
  EXPECT_NEAR(sd / double(period), 1.0, 0.02);                     // exponential: sd = mean
  EXPECT_NEAR(double(below_mean) / n, 1 - std::exp(-1.0), 0.005);  // P(X < mean) = 1 - 1/e
}

// Allocations of `size` bytes through the countdown until `total` bytes:
// the count sampled and the bytes their weights stand for.
struct Allocations {
  uint64_t allocations = 0, sampled = 0;
  double estimated_bytes = 0;
};

Allocations allocate(uint64_t size, uint64_t total, uint64_t period) {
  Allocations r;
  for (uint64_t done = 0; done < total; done += size) {
    r.allocations++;
    if (_ak_prof_sample_due(size)) {
      r.sampled++;
      r.estimated_bytes += double(_ak_prof_weight(size, period)) / double(AK_PROF_OBJ_ONE) * double(size);
    }
  }
  return r;
}

TEST_F(ProfSample, TheCountdownSamplesBySizeAndTheWeightsUnsample) {
  const uint64_t period = 65536;
  ASSERT_EQ(ak_prof_option_set(AK_PROF_OPTION_SAMPLE, long(period)), 0);
  ASSERT_EQ(ak_prof_start(), 0);
  _ak_prof_seed(11);
  for (uint64_t size : {64ull, 4096ull, 65536ull, 262144ull}) {
    const uint64_t total = 1ull << 31;
    Allocations r = allocate(size, total, period);
    double p = -std::expm1(-double(size) / double(period));
    double expected = double(r.allocations) * p;
    // Binomial: sd = sqrt(n p (1 - p)); 5 sd, at least 2 %.
    double tol = std::max(5 * std::sqrt(expected * (1 - p)), 0.02 * expected);
    EXPECT_NEAR(double(r.sampled), expected, tol) << "size " << size;
    EXPECT_NEAR(r.estimated_bytes / double(total), 1.0, 0.05) << "size " << size;
  }
}

TEST_F(ProfSample, OffTheCountdownNeverFires) {
  for (int i = 0; i < 1000000; i++) ASSERT_FALSE(_ak_prof_sample_due(1 << 20));
  EXPECT_EQ(_ak_prof_self.left > (INT64_MAX >> 1), true);
  ASSERT_EQ(ak_prof_start(), 0);
  ASSERT_EQ(ak_prof_stop(), 0);
  EXPECT_FALSE(ak_prof_active());
  // A thread that armed while on takes one slow path after the stop (at
  // most a period later) and never samples after it.
  int fired = 0;
  for (int i = 0; i < 100000; i++) fired += _ak_prof_sample_due(1 << 20);
  EXPECT_EQ(fired, 0);
  EXPECT_EQ(_ak_prof_self.left > (INT64_MAX >> 1), true);
}

TEST_F(ProfSample, StartReachesAThreadThroughThePoll) {
  std::atomic<int> phase{0};
  std::atomic<uint64_t> sampled_after_start{0};
  std::thread t([&] {
    while (_ak_prof_sample_due(4096)) {
    }  // armed while off: INT64_MAX
    phase = 1;
    while (phase.load() != 2) std::this_thread::yield();
    // Started: the countdown still reads "off" until the thread looks.
    uint64_t before_poll = 0;
    for (int i = 0; i < 1000; i++) before_poll += _ak_prof_sample_due(1 << 20);
    _ak_prof_poll();  // a component's slow path
    uint64_t n = 0;
    for (int i = 0; i < 1000; i++) n += _ak_prof_sample_due(1 << 20);
    sampled_after_start = n;
    EXPECT_EQ(before_poll, 0u);
  });
  while (phase.load() != 1) std::this_thread::yield();
  ASSERT_EQ(ak_prof_option_set(AK_PROF_OPTION_SAMPLE, 65536), 0);
  ASSERT_EQ(ak_prof_start(), 0);
  phase = 2;
  t.join();
  // 1000 allocations of 1 MiB at a 64 KiB period: nearly all sampled.
  EXPECT_GT(sampled_after_start.load(), 990u);
}

TEST_F(ProfSample, ANewPeriodReachesEveryThread) {
  ASSERT_EQ(ak_prof_option_set(AK_PROF_OPTION_SAMPLE, 1 << 30), 0);
  ASSERT_EQ(ak_prof_start(), 0);
  _ak_prof_seed(3);
  Allocations coarse = allocate(1024, 1ull << 28, 1 << 30);
  EXPECT_LT(coarse.sampled, 5u);
  ASSERT_EQ(ak_prof_option_set(AK_PROF_OPTION_SAMPLE, 4096), 0);
  _ak_prof_poll();
  Allocations fine = allocate(1024, 1ull << 24, 4096);
  double p = -std::expm1(-1024.0 / 4096);
  EXPECT_NEAR(double(fine.sampled), double(fine.allocations) * p, 0.05 * double(fine.allocations) * p);
}

// The recipe of prof.h for a component that counts down in a word of its
// own: mirrored, the word samples exactly the allocations the profiler's
// own countdown does.
TEST_F(ProfSample, AComponentsOwnCountdownSamplesTheSameAllocations) {
  ASSERT_EQ(ak_prof_option_set(AK_PROF_OPTION_SAMPLE, 8192), 0);
  ASSERT_EQ(ak_prof_start(), 0);
  std::mt19937_64 sizes(9);
  std::vector<size_t> n(200000);
  for (size_t &x : n) x = 1 + sizes() % 3000;
  _ak_prof_seed(5);
  _ak_prof_poll();
  std::vector<size_t> direct;
  for (size_t i = 0; i < n.size(); i++)
    if (_ak_prof_sample_due(n[i])) direct.push_back(i);
  _ak_prof_seed(5);
  ASSERT_EQ(ak_prof_start(), 0);  // a new generation: both runs arm alike
  _ak_prof_poll();
  std::vector<size_t> mirrored;
  int64_t word = _ak_prof_self.left, base = word;
  for (size_t i = 0; i < n.size(); i++) {
    word -= int64_t(n[i]);  // the component's fast path
    if (word >= 0) continue;
    if (_ak_prof_sample_due(size_t(base - word))) mirrored.push_back(i);
    word = base = _ak_prof_self.left;
  }
  EXPECT_GT(direct.size(), 1000u);
  EXPECT_EQ(mirrored, direct);
}

TEST_F(ProfSample, OptionsAreCheckedAndRead) {
  EXPECT_EQ(ak_prof_option_get(AK_PROF_OPTION_SAMPLE), AK_PROF_DEFAULT_SAMPLE);
  errno = 0;
  EXPECT_EQ(ak_prof_option_set(AK_PROF_OPTION_SAMPLE, 0), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_NE(std::string(ak_last_error()).find("ak_prof_option_set: AK_PROF_SAMPLE = 0 is out of range"),
            std::string::npos)
      << ak_last_error();
  EXPECT_EQ(ak_prof_option_set(static_cast<ak_prof_option>(3), 1), -1);
  EXPECT_EQ(ak_prof_option_get(static_cast<ak_prof_option>(3)), -1);
  EXPECT_EQ(ak_prof_option_set(AK_PROF_OPTION_STACK, 2), -1);
  EXPECT_EQ(ak_prof_option_set(AK_PROF_OPTION_STACK, AK_PROF_STACK_FP), 0);
  EXPECT_EQ(ak_prof_option_get(AK_PROF_OPTION_STACK), AK_PROF_STACK_FP);
}

}  // namespace
