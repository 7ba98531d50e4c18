// SPDX-License-Identifier: MIT
// prof_fixture.h - what the heap profiler's suites share: a fixture that
// starts each test from a reset profiler with a temporary directory for
// its dumps, and the profiler's counters in one call.
#ifndef AK_TESTS_PROF_FIXTURE_H
#define AK_TESTS_PROF_FIXTURE_H

#include <arenakit/prof.h>
#include <gtest/gtest.h>

#include <string>

#include "prof/prof_internal.h"
#include "prof_decode.h"

namespace proftest {

// A reset profiler (no tables, defaults) before and after each test, and
// a temporary directory (dir_) removed after it.
class Fixture : public ::testing::Test {
 protected:
  void SetUp() override {
    _ak_prof_reset(nullptr);
    ASSERT_FALSE(tmp_.path().empty());
    dir_ = tmp_.path();
  }
  void TearDown() override { _ak_prof_reset(nullptr); }
  std::string path(const std::string &name) const { return dir_ + "/" + name; }
  profdec::TempDir tmp_{"ak_prof_test"};
  std::string dir_;
};

// The profiler's counters now.
inline ak_prof_stats stats() {
  ak_prof_stats st;
  ak_prof_stats_get(&st);
  return st;
}

}  // namespace proftest

#endif  // AK_TESTS_PROF_FIXTURE_H
