// SPDX-License-Identifier: MIT
// prof_arena_test.cpp - the heap profiler on the region arena: two named
// arenas filled from two call sites (tests/prof_arena_sites.c) through
// the inline fast path hold 70 % and 30 % of the bytes; `go tool pprof`
// names each site with its share, -tagfocus=arena=<name> keeps one
// arena's site, and after a clear (and a restore) the next profile no
// longer holds what they freed. Without go, the same is checked on the
// profiler's counters. Also: an arena started before the profiler picks
// it up at its next slow path; stopping restores the real limit (the
// fast path then takes the whole chunk).
#include <arenakit/arena.h>
#include <arenakit/prof.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>

#include "pprof_run.h"
#include "prof/prof_internal.h"
#include "prof_decode.h"
#include "prof_fixture.h"

extern "C" void *pa_site_parse(ak_arena *a, size_t n);
extern "C" void *pa_site_render(ak_arena *a, size_t n);
extern "C" unsigned _ak_track_mode(void);  // common/track.h: the annotation mode (0: none)

namespace {

const char *const kHide = "-hide='^_?ak_'";

class ProfArena : public proftest::Fixture {};

using proftest::stats;

// Fills `parse` and `render` to `total` bytes, 70 / 30, sizes 8..1024.
void fill(ak_arena *parse, ak_arena *render, double total, double *bytes) {
  std::mt19937_64 rng(11);
  for (double done = 0; done < total;) {
    bool p = bytes[0] / 70 <= bytes[1] / 30;
    size_t n = 8 + rng() % 1017;
    void *b = p ? pa_site_parse(parse, n) : pa_site_render(render, n);
    ASSERT_NE(b, nullptr);
    bytes[p ? 0 : 1] += double(n);
    done += double(n);
  }
}

TEST_F(ProfArena, LabelsNameEachArenaAndAClearTakesItsBlocksOut) {
  ASSERT_EQ(ak_prof_option_set(AK_PROF_OPTION_SAMPLE, 64 * 1024), 0);
  ASSERT_EQ(ak_prof_start(), 0);
  _ak_prof_seed(99);
  ak_arena_options po{}, ro{};
  po.name = "parse";
  ro.name = "render";
  ak_arena parse, render;
  ASSERT_EQ(ak_arena_init(&parse, &po), 0);
  ASSERT_EQ(ak_arena_init(&render, &ro), 0);
  double bytes[2] = {0, 0};
  fill(&parse, &render, 128.0 * (1 << 20), bytes);
  ak_prof_stats st = stats();
  EXPECT_GT(st.live_samples, 1000u);
  double inuse = double(st.inuse_bytes), sum = bytes[0] + bytes[1];
  EXPECT_NEAR(inuse / sum, 1.0, 0.1) << "the estimate of the bytes in use";
  std::string go = pprofrun::find_go();
  std::string all = dir_ + "/all.pb";
  ASSERT_EQ(ak_prof_dump(all.c_str()), 0) << ak_last_error();
  if (!go.empty()) {
    auto top = pprofrun::top(go, all, kHide);
    ASSERT_TRUE(top.count("pa_site_parse") && top.count("pa_site_render")) << "pprof's -top lacks a site";
    EXPECT_NEAR(top["pa_site_parse"], 70, 5.0);
    EXPECT_NEAR(top["pa_site_render"], 30, 5.0);
    top = pprofrun::top(go, all, std::string(kHide) + " -tagfocus=arena=render");
    EXPECT_TRUE(top.count("pa_site_render"));
    EXPECT_FALSE(top.count("pa_site_parse")) << "-tagfocus=arena=render kept the other arena's site";
  }
  // A restore to a mark taken halfway through a new batch, then a clear.
  ak_arena_mark m = ak_arena_save(&render);
  size_t live_before = stats().live_samples;
  for (int i = 0; i < 20000; i++) ASSERT_NE(pa_site_render(&render, 512), nullptr);
  EXPECT_GT(stats().live_samples, live_before);
  ak_arena_restore(&render, m);
  EXPECT_EQ(stats().live_samples, live_before) << "the restore forgot what it freed, and only that";
  ak_arena_clear(&parse);
  std::string after = dir_ + "/after.pb";
  ASSERT_EQ(ak_prof_dump(after.c_str()), 0) << ak_last_error();
  if (!go.empty()) {
    auto top = pprofrun::top(go, after, kHide);
    EXPECT_LT(top.count("pa_site_parse") ? top["pa_site_parse"] : 0.0, 1.0);
    EXPECT_GT(top["pa_site_render"], 95.0);
  }
  ak_arena_destroy(&render);
  ak_arena_destroy(&parse);
  st = stats();
  EXPECT_EQ(st.live_samples, 0u) << "destroy forgot every sampled block";
  EXPECT_EQ(st.unknown_frees, 0u);
}

TEST_F(ProfArena, AnArenaPicksUpAStartAndAStopAtItsNextSlowPath) {
  ASSERT_EQ(ak_prof_option_set(AK_PROF_OPTION_SAMPLE, 4096), 0);
  ak_arena a;
  ak_arena_options o{};
  o.first_chunk = 4 << 20;
  ASSERT_EQ(ak_arena_init(&a, &o), 0);
  ASSERT_NE(pa_site_parse(&a, 64), nullptr);  // maps the chunk; the profiler is off
  ASSERT_EQ(ak_prof_start(), 0);
  ASSERT_NE(ak_arena_alloc(&a, 8192, 8), nullptr);  // the slow path (above AK_ARENA_FAST_MAX) arms
  const bool annotated = _ak_track_mode() != 0;     // the fast path's limit is 0 anyway
  if (!annotated) {
    EXPECT_LT(a.limit - a.ptr, 100000u) << "sampling: the fast path stops at the countdown";
  }
  for (int i = 0; i < 10000; i++) ASSERT_NE(pa_site_parse(&a, 64), nullptr);
  EXPECT_GT(stats().live_samples, 20u);
  ASSERT_EQ(ak_prof_stop(), 0);
  ASSERT_NE(ak_arena_alloc(&a, 8192, 8), nullptr);
  if (!annotated) {
    EXPECT_GT(a.limit - a.ptr, 1000000u) << "stopped: the real limit again";
  }
  ak_arena_destroy(&a);
  EXPECT_EQ(stats().live_samples, 0u);
}

}  // namespace
