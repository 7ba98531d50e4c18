// SPDX-License-Identifier: MIT
// prof_malloc_test.cpp - the heap profiler on the malloc, read by `go tool
// pprof` itself: three call sites (tests/prof_malloc_sites.c) hold 60 %,
// 30 % and 10 % of the live bytes through ak_malloc (small class blocks,
// medium class and solo blocks, large blocks), sampled by the malloc's own
// countdown; pprof's -top names each site with its share within 5
// percentage points; after the 60 % site's blocks are freed (by another
// thread: remote frees) the next profile shows it under 1 %. Also: a
// sampled large block that realloc moves stays in the profile, at its new
// size; a page with more samples than its two slots loses none; at the
// default period a sampled small block has a page of its own; while the
// profiler is off nothing is recorded. Skipped, with the reason, where
// `go` is not installed (scripts/deps.sh test installs golang-go).
#include <arenakit/malloc.h>
#include <arenakit/prof.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "pprof_run.h"
#include "prof/prof_internal.h"
#include "prof_decode.h"
#include "prof_fixture.h"

extern "C" void *pm_site_sixty(size_t n);
extern "C" void *pm_site_thirty(size_t n);
extern "C" void *pm_site_ten(size_t n);
extern "C" void *pm_page_of(void *p);
extern "C" bool pm_page_marked(void *p);
extern "C" void pm_sample(void *p, size_t n);
extern "C" bool pm_guards(void);

namespace {

// The library's own frames: in a static program they are not trimmed from
// the stacks (a shared libarenakit's text is), so pprof is told to hide
// them, leaving the caller of ak_malloc as the innermost frame.
const char *const kHide = "-hide='^_?ak_|^malloc_slow$|^count_sync$|^mark$'";

class ProfMalloc : public proftest::Fixture {};

using proftest::stats;

TEST_F(ProfMalloc, TopNamesEachSiteWithItsShareAndRemoteFreesTakeItOut) {
  std::string go = pprofrun::find_go();
  if (go.empty()) GTEST_SKIP() << "go is not installed (Debian: golang-go; scripts/deps.sh test installs it)";
  ASSERT_EQ(ak_prof_option_set(AK_PROF_OPTION_SAMPLE, 128 * 1024), 0);
  ASSERT_EQ(ak_prof_start(), 0);
  void *(*const sites[3])(size_t) = {pm_site_sixty, pm_site_thirty, pm_site_ten};
  const size_t lo[3] = {16, 1024, 65536}, hi[3] = {1024, 16384, 1 << 20};
  const double want[3] = {60, 30, 10};
  std::vector<void *> kept[3];
  double bytes[3] = {0, 0, 0};
  // A thread of its own: its heap takes the profiler's countdown at its
  // first slow path, from the fixed seed.
  std::thread([&] {
    _ak_prof_seed(20261202);
    std::mt19937_64 rng(7);
    for (double total = 0; total < 192.0 * (1 << 20);) {
      int site = 0;  // the site furthest below its share allocates next
      for (int i = 1; i < 3; i++)
        if (bytes[i] / want[i] < bytes[site] / want[site]) site = i;
      size_t n = lo[site] + rng() % (hi[site] - lo[site]);
      void *p = sites[site](n);
      ASSERT_NE(p, nullptr);
      kept[site].push_back(p);
      bytes[site] += double(n);
      total += double(n);
    }
  }).join();
  EXPECT_GT(stats().live_samples, 1000u);
  double sum = bytes[0] + bytes[1] + bytes[2];
  const char *names[3] = {"pm_site_sixty", "pm_site_thirty", "pm_site_ten"};
  std::string profile = dir_ + "/all.pb";
  ASSERT_EQ(ak_prof_dump(profile.c_str()), 0) << ak_last_error();
  auto top = pprofrun::top(go, profile, kHide);
  ASSERT_FALSE(top.empty()) << "go tool pprof printed no table for " << profile;
  for (int i = 0; i < 3; i++) {
    ASSERT_TRUE(top.count(names[i])) << names[i] << " missing from pprof's -top";
    EXPECT_NEAR(top[names[i]], 100 * bytes[i] / sum, 5.0) << names[i];
  }
  // The 60 % site's blocks are freed by this thread: not their owner's.
  for (void *p : kept[0]) ak_free(p);
  std::string after = dir_ + "/after.pb";
  ASSERT_EQ(ak_prof_dump(after.c_str()), 0) << ak_last_error();
  top = pprofrun::top(go, after, kHide);
  EXPECT_LT(top.count(names[0]) ? top[names[0]] : 0.0, 1.0);
  EXPECT_NEAR(top[names[1]], 75, 6.0);  // 30 of the 40 % left
  EXPECT_NEAR(top[names[2]], 25, 6.0);
  for (int i = 1; i < 3; i++)
    for (void *p : kept[i]) ak_free(p);
  ak_prof_stats st = stats();
  EXPECT_EQ(st.live_samples, 0u) << "every sampled block was freed";
  EXPECT_EQ(st.unknown_frees, 0u);
}

TEST_F(ProfMalloc, EverySampleOfAPageIsForgottenEvenPastItsSlots) {
  // A period far below a page's bytes: many samples per page, most of
  // them past the page's two slots.
  ASSERT_EQ(ak_prof_option_set(AK_PROF_OPTION_SAMPLE, 1024), 0);
  ASSERT_EQ(ak_prof_start(), 0);
  std::vector<void *> blocks;
  std::thread([&] {
    for (int i = 0; i < 20000; i++) blocks.push_back(ak_malloc(64 + i % 200));
  }).join();
  ak_prof_stats st = stats();
  EXPECT_GT(st.live_samples, 500u);
  EXPECT_EQ(st.dropped_live, 0u);
  for (void *p : blocks) ak_free(p);
  st = stats();
  EXPECT_EQ(st.live_samples, 0u);
  EXPECT_EQ(st.inuse_bytes, 0u);
  EXPECT_EQ(st.unknown_frees, 0u);
}

// A page that holds a sampled block sends every free of the page off the
// fast path; the owner's frees of its other blocks (done beside the fast
// path) keep the sample, the page's blocks are handed out again, and the
// sampled block's own free forgets it and clears the page's flag.
TEST_F(ProfMalloc, FreesOfASampledPagesOtherBlocksKeepItsSample) {
  ASSERT_EQ(ak_prof_option_set(AK_PROF_OPTION_SAMPLE, 1 << 30), 0);  // the countdown samples nothing here
  ASSERT_EQ(ak_prof_start(), 0);
  std::thread([] {
    std::vector<void *> blocks;
    for (int i = 0; i < 200; i++) blocks.push_back(ak_malloc(48));
    void *kept = blocks[100];
    void *pg = pm_page_of(kept);
    pm_sample(kept, 48);
    ASSERT_EQ(stats().live_samples, 1u);
    ASSERT_TRUE(pm_page_marked(kept));
    for (int round = 0; round < 3; round++) {
      for (void *&p : blocks)
        if (p != kept && pm_page_of(p) == pg) {
          ak_free(p);
          p = nullptr;
        }
      EXPECT_EQ(stats().live_samples, 1u) << "a neighbour's free took the sample out";
      for (void *&p : blocks)
        if (!p) p = ak_malloc(48);  // from the page's free list again
    }
    EXPECT_EQ(stats().unknown_frees, 0u);
    ak_free(kept);
    EXPECT_EQ(stats().live_samples, 0u) << "the sampled block's free did not forget it";
    EXPECT_FALSE(pm_page_marked(kept)) << "the page stayed marked";
    for (void *p : blocks)
      if (p != kept) ak_free(p);
  }).join();
  EXPECT_EQ(stats().unknown_frees, 0u);
}

// Allocates blocks of 48 bytes on a thread of its own until the first
// sample, then hands `check` the sampled block (the one whose page is
// marked) and the others; frees them all after it. One block per look at
// the count: at a short period two samples may fall a few blocks apart.
template <class Check>
void until_first_sample(Check check) {
  std::thread([&] {
    std::vector<void *> blocks;
    while (stats().live_samples == 0 && blocks.size() < (1u << 22)) blocks.push_back(ak_malloc(48));
    ASSERT_EQ(stats().live_samples, 1u);
    void *kept = nullptr;
    int marked = 0;
    for (void *p : blocks)
      if (pm_page_marked(p)) {
        kept = p;
        marked++;
      }
    ASSERT_NE(kept, nullptr) << "the sampled block's page is not marked";
    int neighbours = 0;
    for (void *p : blocks)
      if (p != kept && pm_page_of(p) == pm_page_of(kept)) neighbours++;
    check(kept, marked, neighbours);
    for (void *p : blocks) ak_free(p);
    EXPECT_EQ(stats().live_samples, 0u);
    EXPECT_EQ(stats().unknown_frees, 0u);
  }).join();
}

// At the default period a sampled block of a size the fast path serves
// gets a page of its own, so that no other block's free leaves the fast
// path while it lives (the page's mark sends every free of the page off
// it). At a short period it stays in its class's page: a span each would
// cost more addresses than the bytes a sample stands for; so in the
// hardened build, whose spans end in a guard page (one more mapping each).
TEST_F(ProfMalloc, AtTheDefaultPeriodASampledSmallBlockHasAPageOfItsOwn) {
  ASSERT_EQ(ak_prof_option_set(AK_PROF_OPTION_SAMPLE, 512 * 1024), 0);
  ASSERT_EQ(ak_prof_start(), 0);
  until_first_sample([](void *kept, int marked, int neighbours) {
    if (pm_guards()) {
      EXPECT_GT(neighbours, 0) << "hardened: a span with a guard page for a sample";
      return;
    }
    EXPECT_EQ(marked, 1) << "only the sampled block's page is marked";
    EXPECT_EQ(neighbours, 0) << "the sampled block shares its page";
    EXPECT_GE(ak_usable_size(kept), 48u);
  });
}

TEST_F(ProfMalloc, AtAShortPeriodASampledBlockStaysInItsClassPage) {
  ASSERT_EQ(ak_prof_option_set(AK_PROF_OPTION_SAMPLE, 16 * 1024), 0);
  ASSERT_EQ(ak_prof_start(), 0);
  until_first_sample([](void *, int, int neighbours) { EXPECT_GT(neighbours, 0); });
}

TEST_F(ProfMalloc, AMovedLargeBlockStaysInTheProfileAtItsNewSize) {
  ASSERT_EQ(ak_prof_option_set(AK_PROF_OPTION_SAMPLE, 4096), 0);  // a large block is always sampled
  ASSERT_EQ(ak_prof_start(), 0);
  void *p = nullptr;
  std::thread([&] {
    void *warm = ak_malloc(64);  // the thread's first slow path takes the countdown
    ak_free(warm);
    p = ak_malloc(8 << 20);
  }).join();
  ASSERT_NE(p, nullptr);
  ak_prof_stats st = stats();
  ASSERT_GE(st.live_samples, 1u);
  size_t before = st.inuse_bytes;
  EXPECT_GE(before, size_t{8} << 20);
  p = ak_realloc(p, 32 << 20);
  ASSERT_NE(p, nullptr);
  st = stats();
  EXPECT_GE(st.live_samples, 1u);
  EXPECT_GE(st.inuse_bytes, size_t{32} << 20) << "the record follows the block to its new size";
  ak_free(p);
  st = stats();
  EXPECT_EQ(st.live_samples, 0u);
  EXPECT_EQ(st.unknown_frees, 0u);
}

TEST_F(ProfMalloc, NothingIsRecordedWhileOff) {
  ASSERT_EQ(ak_prof_option_set(AK_PROF_OPTION_SAMPLE, 1024), 0);
  std::thread([] {
    std::vector<void *> v;
    for (int i = 0; i < 10000; i++) v.push_back(ak_malloc(100));
    for (void *p : v) ak_free(p);
  }).join();
  EXPECT_EQ(stats().samples, 0u);
  ASSERT_EQ(ak_prof_start(), 0);
  ASSERT_EQ(ak_prof_stop(), 0);
  std::thread([] {
    std::vector<void *> v;
    for (int i = 0; i < 10000; i++) v.push_back(ak_malloc(100));
    for (void *p : v) ak_free(p);
  }).join();
  EXPECT_EQ(stats().samples, 0u) << "stopped: the heaps' countdowns mirror the profiler's off";
}

}  // namespace
