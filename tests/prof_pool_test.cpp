// SPDX-License-Identifier: MIT
// prof_pool_test.cpp - the heap profiler on the pool: two named pools
// filled from two call sites (tests/prof_pool_sites.c) hold 60 % and 40 %
// of the bytes; `go tool pprof` names each site with its share within 5
// points and -tagfocus=pool=<name> keeps one pool's site; after one pool's
// objects are freed (by another thread) the next profile holds it under
// 1 %. In every sync mode the profiler's live set empties when the objects
// are freed, and a destroy forgets the objects still live. A pool created
// while the profiler is off is not sampled. Without go, the counters are
// checked and the pprof part is skipped.
#include <arenakit/pool.h>
#include <arenakit/prof.h>
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "pprof_run.h"
#include "prof/prof_internal.h"
#include "prof_decode.h"
#include "prof_fixture.h"

extern "C" void *pp_site_sessions(ak_pool *p);
extern "C" void *pp_site_cache(ak_pool *p);

namespace {

const char *const kHide = "-hide='^_?ak_'";

class ProfPool : public proftest::Fixture {};

using proftest::stats;

ak_pool *make(const char *name, size_t size, ak_sync sync = AK_SYNC_THREADS) {
  ak_pool_options o{};
  o.object_size = size;
  o.name = name;
  o.sync = sync;
  return ak_pool_create(&o);
}

TEST_F(ProfPool, LabelsNameEachPoolAndFreesTakeItOut) {
  ASSERT_EQ(ak_prof_option_set(AK_PROF_OPTION_SAMPLE, 64 * 1024), 0);
  ASSERT_EQ(ak_prof_start(), 0);
  _ak_prof_seed(5);
  ak_pool *sessions = make("sessions", 96), *cache = make("cache", 256);
  ASSERT_TRUE(sessions && cache);
  std::vector<void *> a, b;
  // 60 % of the bytes in sessions, 40 % in cache.
  const size_t na = 600000, nb = na * 96 * 40 / 60 / 256;
  std::thread([&] {
    for (size_t i = 0, j = 0; i < na || j < nb;) {
      if (i < na && (j >= nb || i * nb <= j * na)) {
        a.push_back(pp_site_sessions(sessions));
        i++;
      } else {
        b.push_back(pp_site_cache(cache));
        j++;
      }
    }
  }).join();
  ak_prof_stats st = stats();
  EXPECT_GT(st.live_samples, 1000u);
  std::string go = pprofrun::find_go(), all = dir_ + "/all.pb";
  ASSERT_EQ(ak_prof_dump(all.c_str()), 0) << ak_last_error();
  if (!go.empty()) {
    auto top = pprofrun::top(go, all, kHide);
    ASSERT_TRUE(top.count("pp_site_sessions") && top.count("pp_site_cache")) << "pprof's -top lacks a site";
    EXPECT_NEAR(top["pp_site_sessions"], 60, 5.0);
    EXPECT_NEAR(top["pp_site_cache"], 40, 5.0);
    top = pprofrun::top(go, all, std::string(kHide) + " -tagfocus=pool=cache");
    EXPECT_TRUE(top.count("pp_site_cache"));
    EXPECT_FALSE(top.count("pp_site_sessions")) << "-tagfocus=pool=cache kept the other pool's site";
  }
  for (void *o : a) ak_pool_free(sessions, o);  // this thread: remote frees for THREADS
  std::string after = dir_ + "/after.pb";
  ASSERT_EQ(ak_prof_dump(after.c_str()), 0) << ak_last_error();
  if (!go.empty()) {
    auto top = pprofrun::top(go, after, kHide);
    EXPECT_LT(top.count("pp_site_sessions") ? top["pp_site_sessions"] : 0.0, 1.0);
    EXPECT_GT(top["pp_site_cache"], 95.0);
  }
  size_t cache_live = stats().live_samples;
  EXPECT_GT(cache_live, 0u);
  ak_pool_destroy(cache);  // its objects still live: the destroy forgets them
  ak_pool_destroy(sessions);
  st = stats();
  EXPECT_EQ(st.live_samples, 0u);
  EXPECT_EQ(st.unknown_frees, 0u);
}

class ProfPoolModes : public ProfPool, public ::testing::WithParamInterface<ak_sync> {};

TEST_P(ProfPoolModes, EverySampledObjectIsForgottenAtItsFree) {
  ASSERT_EQ(ak_prof_option_set(AK_PROF_OPTION_SAMPLE, 4096), 0);
  ASSERT_EQ(ak_prof_start(), 0);
  ak_pool *p = make("modes", 48, GetParam());
  ASSERT_NE(p, nullptr);
  std::vector<void *> v;
  for (int round = 0; round < 3; round++) {
    for (int i = 0; i < 20000; i++) v.push_back(pp_site_sessions(p));
    EXPECT_GT(stats().live_samples, 50u);
    for (size_t i = 0; i < v.size(); i += 2) ak_pool_free(p, v[i]);  // half, then the rest
    for (size_t i = 1; i < v.size(); i += 2) ak_pool_free(p, v[i]);
    v.clear();
    EXPECT_EQ(stats().live_samples, 0u) << "round " << round;
  }
  ak_pool_destroy(p);
  EXPECT_EQ(stats().unknown_frees, 0u);
}

INSTANTIATE_TEST_SUITE_P(AllSyncModes, ProfPoolModes,
                         ::testing::Values(AK_SYNC_THREADS, AK_SYNC_NONE, AK_SYNC_SPINLOCK,
                                           AK_SYNC_LOCKFREE));

TEST_F(ProfPool, APoolCreatedWhileOffIsNotSampled) {
  ASSERT_EQ(ak_prof_option_set(AK_PROF_OPTION_SAMPLE, 1024), 0);
  ak_pool *p = make("before", 64);
  ASSERT_EQ(ak_prof_start(), 0);
  std::vector<void *> v;
  for (int i = 0; i < 10000; i++) v.push_back(pp_site_sessions(p));
  EXPECT_EQ(stats().samples, 0u) << "its inline paths stay on: documented in arenakit/prof.h";
  for (void *o : v) ak_pool_free(p, o);
  ak_pool_destroy(p);
}

}  // namespace
