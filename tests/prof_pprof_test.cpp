// SPDX-License-Identifier: MIT
// prof_pprof_test.cpp - the heap profiler read by `go tool pprof` itself:
// three call sites (distinct non-inlined functions, prof_pprof_sites.c)
// allocate 60 %, 30 % and 10 % of the bytes, in blocks of sizes of their
// own, through the hooks a component calls (_ak_prof_sample_due, then
// _ak_prof_record with the real captured stack; fixed seeds), and pprof's
// -top text names each site with its
// share within 5 percentage points; after the 60 % site frees everything
// (_ak_prof_forget) the next profile shows it under 1 %; -tagfocus on a
// pool's label keeps only that pool's site. Skipped, with the reason,
// where `go` is not installed (scripts/deps.sh test installs golang-go).
#include <arenakit/prof.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "pprof_run.h"
#include "prof/prof_internal.h"
#include "prof_decode.h"

// The three sites (tests/prof_pprof_sites.c): each calls the countdown and,
// when it fires, _ak_prof_record; true when the block was kept.
extern "C" bool pprof_site_sixty(void *block, size_t n);
extern "C" bool pprof_site_thirty(void *block, size_t n);
extern "C" bool pprof_site_ten(void *block, size_t n);

namespace {

class ProfPprof : public ::testing::Test {
 protected:
  void SetUp() override {
    go_ = pprofrun::find_go();
    if (go_.empty())
      GTEST_SKIP() << "go is not installed (Debian: golang-go; scripts/deps.sh test installs it)";
    _ak_prof_reset(nullptr);
    ASSERT_FALSE(tmp_.path().empty());
    dir_ = tmp_.path();
  }
  void TearDown() override { _ak_prof_reset(nullptr); }
  profdec::TempDir tmp_{"ak_prof_pprof"};
  std::string go_, dir_;
};

TEST_F(ProfPprof, TopNamesEachSiteWithItsShare) {
  ASSERT_EQ(ak_prof_option_set(AK_PROF_OPTION_SAMPLE, 65536), 0);
  ASSERT_EQ(ak_prof_start(), 0);
  _ak_prof_seed(20240601);
  // Each site has sizes of its own: small blocks (sampled rarely, each
  // sample standing for many), medium ones, and blocks above the period
  // (sampled nearly always): only the unsampled values give 60/30/10. The
  // site furthest below its share allocates next.
  std::mt19937_64 rng(42);
  bool (*const sites[3])(void *, size_t) = {pprof_site_sixty, pprof_site_thirty, pprof_site_ten};
  const size_t lo[3] = {16, 1024, 65536}, hi[3] = {1024, 16384, 262144};
  const double want[3] = {60, 30, 10};
  std::vector<uintptr_t> kept[3];
  uintptr_t next = uintptr_t{1} << 40;  // fake block addresses, never dereferenced
  double bytes[3] = {0, 0, 0};
  for (double total = 0; total < 400.0 * (1 << 20);) {
    int site = 0;
    for (int i = 1; i < 3; i++)
      if (bytes[i] / want[i] < bytes[site] / want[site]) site = i;
    size_t n = lo[site] + rng() % (hi[site] - lo[site]);
    if (sites[site](reinterpret_cast<void *>(next), n)) kept[site].push_back(next);
    next += (n + 15) & ~size_t{15};
    bytes[site] += double(n);
    total += double(n);
  }
  double sum = bytes[0] + bytes[1] + bytes[2];
  const char *names[3] = {"pprof_site_sixty", "pprof_site_thirty", "pprof_site_ten"};
  std::string profile = dir_ + "/all.pb";
  ASSERT_EQ(ak_prof_dump(profile.c_str()), 0) << ak_last_error();
  auto top = pprofrun::top(go_, profile);
  ASSERT_FALSE(top.empty()) << "go tool pprof printed no table for " << profile;
  for (int i = 0; i < 3; i++) {
    EXPECT_NEAR(100 * bytes[i] / sum, want[i], 1.0);  // the program's own split
    ASSERT_TRUE(top.count(names[i])) << names[i] << " missing from pprof's -top";
    EXPECT_NEAR(top[names[i]], 100 * bytes[i] / sum, 5.0) << names[i];
  }
  // The 60 % site frees everything it holds.
  for (uintptr_t b : kept[0]) _ak_prof_forget(reinterpret_cast<void *>(b));
  std::string after = dir_ + "/after.pb";
  ASSERT_EQ(ak_prof_dump(after.c_str()), 0) << ak_last_error();
  top = pprofrun::top(go_, after);
  ASSERT_TRUE(top.count(names[1]));
  EXPECT_LT(top.count(names[0]) ? top[names[0]] : 0.0, 1.0);
  EXPECT_NEAR(top[names[1]], 75, 6.0);  // 30 of the 40 % left
  EXPECT_NEAR(top[names[2]], 25, 6.0);
  // -tagfocus keeps one pool's samples (percentages stay of the whole).
  top = pprofrun::top(go_, profile, "-tagfocus=pool=sessions");
  EXPECT_TRUE(top.count(names[0]));
  EXPECT_FALSE(top.count(names[1]));
  EXPECT_FALSE(top.count(names[2]));
  EXPECT_NEAR(top[names[0]], 100 * bytes[0] / sum, 5.0);
  top = pprofrun::top(go_, profile, "-tagfocus=arena=parse");
  EXPECT_TRUE(top.count(names[2]));
  EXPECT_FALSE(top.count(names[0]));
}

}  // namespace
