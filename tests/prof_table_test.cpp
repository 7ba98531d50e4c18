// SPDX-License-Identifier: MIT
// prof_table_test.cpp - the heap profiler's tables (src/prof/stack_table.c,
// live.c): each bound (distinct stacks, call-tree nodes, labels, live
// blocks) holds and counts what it turns away while the totals stay
// right; forget takes back exactly what record added; 10,000 distinct
// stacks shaped like an interpreter's take under 2 MiB, and unshared
// stacks stay within the bounds' memory; the hash heads grow with the
// tables; the capture starts at the caller; the validator sees a broken
// chain.
#include <arenakit/prof.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "prof/prof_internal.h"

namespace {

class ProfTable : public ::testing::Test {
 protected:
  void SetUp() override { _ak_prof_reset(nullptr); }
  void TearDown() override { _ak_prof_reset(nullptr); }
  void start(const _ak_prof_limits &l) {
    _ak_prof_reset(&l);
    ASSERT_EQ(ak_prof_start(), 0);
  }
  static ak_prof_stats stats() {
    ak_prof_stats s;
    ak_prof_stats_get(&s);
    return s;
  }
};

// A fake block address (never dereferenced by the profiler).
void *block(uint64_t i) { return reinterpret_cast<void *>(uintptr_t{0x100000000} + i * 64); }

// A stack of `depth` frames unique to `i` (no frame shared with another i).
std::vector<uintptr_t> unique_stack(uint64_t i, unsigned depth) {
  std::vector<uintptr_t> s(depth);
  for (unsigned d = 0; d < depth; d++) s[d] = 0x400000 + (i * 64 + d) * 16;
  return s;
}

TEST_F(ProfTable, TheStackBoundCountsWhatItTurnsAway) {
  start({100, 0, 0, 0});
  for (uint64_t i = 0; i < 150; i++) {
    auto s = unique_stack(i, 8);
    EXPECT_TRUE(_ak_prof_record_stack(block(i), 1000, s.data(), 8, nullptr, nullptr));
  }
  ak_prof_stats st = stats();
  EXPECT_EQ(st.stacks, 100u);
  EXPECT_EQ(st.dropped_stacks, 50u);
  EXPECT_EQ(st.samples, 150u);
  EXPECT_EQ(st.live_samples, 150u);  // a dropped stack still counts, on the empty stack
  EXPECT_EQ(st.inuse_bytes, 150 * (_ak_prof_weight(1000, AK_PROF_DEFAULT_SAMPLE) * 1000 / AK_PROF_OBJ_ONE));
  _ak_prof_check();
  // A stack already kept is still found at the bound.
  auto s = unique_stack(5, 8);
  EXPECT_TRUE(_ak_prof_record_stack(block(1000), 1000, s.data(), 8, nullptr, nullptr));
  EXPECT_EQ(stats().dropped_stacks, 50u);
}

TEST_F(ProfTable, TheNodeAndFrameBoundsHold) {
  start({0, 100, 0, 0});
  for (uint64_t i = 0; i < 20; i++) {
    auto s = unique_stack(i, 16);
    _ak_prof_record_stack(block(i), 64, s.data(), 16, nullptr, nullptr);
  }
  ak_prof_stats st = stats();
  EXPECT_LE(st.nodes, 100u);
  EXPECT_EQ(st.stacks, 6u);  // 6 * 16 = 96 nodes; the 7th stops part way
  EXPECT_EQ(st.dropped_stacks, 14u);
  _ak_prof_check();
  start({0, 0, 40, 0});
  for (uint64_t i = 0; i < 5; i++) {
    auto s = unique_stack(i, 16);
    _ak_prof_record_stack(block(i), 64, s.data(), 16, nullptr, nullptr);
  }
  EXPECT_LE(stats().frames, 40u);
  EXPECT_EQ(stats().dropped_stacks, 3u);
  _ak_prof_check();
}

TEST_F(ProfTable, TheLabelBoundHolds) {
  start({});
  auto s = unique_stack(0, 4);
  for (int i = 0; i < 300; i++) {
    std::string name = "pool-" + std::to_string(i);
    _ak_prof_record_stack(block(uint64_t(i)), 64, s.data(), 4, "pool", name.c_str());
  }
  ak_prof_stats st = stats();
  EXPECT_EQ(st.labels, size_t(AK_PROF_MAX_LABELS - 1));
  EXPECT_EQ(st.dropped_labels, 300u - (AK_PROF_MAX_LABELS - 1));
  EXPECT_EQ(st.samples, 300u);
  // Text past the kept length is cut, so two names equal that far are one.
  std::string long_a(100, 'a'), long_b = long_a + "b";
  _ak_prof_reset(nullptr);
  ASSERT_EQ(ak_prof_start(), 0);
  _ak_prof_record_stack(block(1), 64, s.data(), 4, "arena", long_a.c_str());
  _ak_prof_record_stack(block(2), 64, s.data(), 4, "arena", long_b.c_str());
  EXPECT_EQ(stats().labels, 1u);
}

TEST_F(ProfTable, TheLiveBoundCountsAndRecordSaysSo) {
  start({0, 0, 0, 10});
  auto s = unique_stack(0, 4);
  for (uint64_t i = 0; i < 15; i++)
    EXPECT_EQ(_ak_prof_record_stack(block(i), 4096, s.data(), 4, nullptr, nullptr), i < 10) << i;
  ak_prof_stats st = stats();
  EXPECT_EQ(st.live_samples, 10u);
  EXPECT_EQ(st.dropped_live, 5u);
  EXPECT_EQ(st.samples, 15u);
  _ak_prof_forget(block(3));
  EXPECT_TRUE(_ak_prof_record_stack(block(20), 4096, s.data(), 4, nullptr, nullptr));  // its record is reused
  _ak_prof_forget(block(12));                                                          // never kept
  EXPECT_EQ(stats().unknown_frees, 1u);
  _ak_prof_check();
}

TEST_F(ProfTable, ForgetTakesBackExactlyWhatRecordAdded) {
  start({});
  std::mt19937_64 rng(5);
  std::vector<uint64_t> live;
  for (uint64_t i = 0; i < 5000; i++) {
    auto s = unique_stack(rng() % 50, 1 + unsigned(rng() % 40));
    ASSERT_TRUE(_ak_prof_record_stack(block(i), 1 + rng() % 100000, s.data(), unsigned(s.size()), "pool",
                                      (i & 1) ? "a" : "b"));
    live.push_back(i);
    if (rng() % 3 == 0) {
      size_t k = rng() % live.size();
      _ak_prof_forget(block(live[k]));
      live.erase(live.begin() + long(k));
    }
  }
  _ak_prof_check();
  EXPECT_EQ(stats().live_samples, live.size());
  for (uint64_t b : live) _ak_prof_forget(block(b));
  ak_prof_stats st = stats();
  EXPECT_EQ(st.live_samples, 0u);
  EXPECT_EQ(st.inuse_bytes, 0u);
  EXPECT_GT(st.alloc_bytes, 0u);
  EXPECT_EQ(st.unknown_frees, 0u);
  _ak_prof_check();
}

TEST_F(ProfTable, ABlockRecordedTwiceIsLiveOnce) {
  start({});
  auto s = unique_stack(1, 3);
  _ak_prof_record_stack(block(7), 100, s.data(), 3, nullptr, nullptr);
  _ak_prof_record_stack(block(7), 200, s.data(), 3, nullptr, nullptr);
  EXPECT_EQ(stats().live_samples, 1u);
  EXPECT_EQ(stats().samples, 2u);
  _ak_prof_forget(block(7));
  EXPECT_EQ(stats().inuse_bytes, 0u);
  _ak_prof_check();
}

// Stacks shaped like the ones the unwinder takes in Debian's python3 (its
// test modules, bench/prof/run.sh: mean depth 61.6, 12.2 new call-tree
// nodes per distinct stack, 3,288 distinct return addresses for 22,600
// stacks): 64 frames, the outer 40 shared by all (the start of the
// program and the interpreter's loop), the next 12 one of 800 paths
// (Python-level callers), the inner 12 a path of the stack's own; every
// frame below the outer 40 one of 4,000 return addresses.
std::vector<uintptr_t> interpreter_stack(uint64_t i) {
  std::mt19937_64 mid(i % 800), inner(1000003 + i);
  std::vector<uintptr_t> s(64);
  for (unsigned d = 0; d < 12; d++) s[d] = 0x555500000000 + (inner() % 4000) * 0x140;
  for (unsigned d = 12; d < 24; d++) s[d] = 0x555500000000 + (mid() % 4000) * 0x140;
  for (unsigned d = 24; d < 64; d++) s[d] = 0x555600000000 + d * 0x100;
  return s;
}

TEST_F(ProfTable, TenThousandInterpreterStacksTakeUnderTwoMiB) {
  start({});
  for (uint64_t i = 0; i < 10000; i++) {
    auto s = interpreter_stack(i);
    ASSERT_TRUE(_ak_prof_record_stack(block(i), 256, s.data(), 64, "pool", (i % 3) ? "sessions" : "cache"));
  }
  ak_prof_stats st = stats();
  EXPECT_EQ(st.stacks, 10000u);
  EXPECT_EQ(st.dropped_stacks + st.dropped_live + st.dropped_labels, 0u);
  EXPECT_EQ(st.live_samples, 10000u);
  std::printf(
      "10,000 stacks of 64 frames: %zu nodes (%.1f per stack), %zu frames, %zu bytes mapped (%.0f per "
      "stack)\n",
      st.nodes, double(st.nodes) / 1e4, st.frames, st.memory, double(st.memory) / 1e4);
  EXPECT_LE(st.memory, size_t{2} << 20);
  _ak_prof_check();
}

TEST_F(ProfTable, UnsharedStacksStayWithinTheBounds) {
  start({});
  for (uint64_t i = 0; i < 10000; i++) {
    auto s = unique_stack(i, 64);
    _ak_prof_record_stack(block(i), 256, s.data(), 64, nullptr, nullptr);
  }
  ak_prof_stats st = stats();
  EXPECT_GT(st.dropped_stacks, 0u);
  EXPECT_LE(st.nodes, size_t{AK_PROF_MAX_NODES});
  EXPECT_LE(st.frames, size_t{AK_PROF_MAX_FRAMES});
  std::printf("10,000 unshared stacks of 64 frames: %zu kept, %zu dropped, %zu bytes mapped\n", st.stacks,
              st.dropped_stacks, st.memory);
  EXPECT_LE(st.memory, size_t{6} << 20);
  _ak_prof_check();
}

// The hash heads start at a system page each and grow with their tables:
// a profile of a few stacks maps little (the heads were mapped at the
// bounds' size before), the heads double as their tables fill, and every
// entry is found again after they did (the validator walks every chain;
// the forgets look each block up).
TEST_F(ProfTable, TheHashHeadsGrowWithTheTables) {
  start({});
  auto one = interpreter_stack(0);
  ASSERT_TRUE(_ak_prof_record_stack(block(0), 256, one.data(), 64, nullptr, nullptr));
  const size_t small = stats().memory;
  std::printf("one stack of 64 frames: %zu bytes mapped\n", small);
  EXPECT_LE(small, size_t{192} << 10);
  const _ak_prof_tables &t = _ak_prof_g.t;
  const uint32_t rec_buckets = t.rec_heads.mask + 1, node_buckets = t.node_heads.mask + 1;
  // Past the record heads' second doubling.
  const uint64_t n = uint64_t{4} * AK_PROF_CHAIN_SITE * rec_buckets + 1;
  for (uint64_t i = 1; i < n; i++) {
    auto s = interpreter_stack(i % 5000);
    ASSERT_TRUE(_ak_prof_record_stack(block(i), 256, s.data(), 64, nullptr, nullptr));
  }
  _ak_prof_check();
  EXPECT_GE(t.rec_heads.mask + 1, 4 * rec_buckets);
  EXPECT_GT(t.node_heads.mask + 1, node_buckets);
  for (uint64_t i = 0; i < n; i++) ASSERT_TRUE(_ak_prof_forget_if_kept(block(i))) << i;
  ak_prof_stats st = stats();
  EXPECT_EQ(st.live_samples, 0u);
  EXPECT_EQ(st.inuse_bytes, 0u);
  EXPECT_EQ(st.unknown_frees, 0u);
  _ak_prof_check();
}

TEST_F(ProfTable, NothingIsRecordedWhileOff) {
  auto s = unique_stack(0, 4);
  EXPECT_FALSE(_ak_prof_record_stack(block(0), 64, s.data(), 4, nullptr, nullptr));
  EXPECT_FALSE(_ak_prof_record(block(0), 64, nullptr, nullptr));
  ASSERT_EQ(ak_prof_start(), 0);
  ASSERT_EQ(ak_prof_stop(), 0);
  EXPECT_FALSE(_ak_prof_record(block(0), 64, nullptr, nullptr));
  EXPECT_EQ(stats().samples, 0u);
}

__attribute__((noinline)) unsigned capture_here(int method, uintptr_t *pcs) {
  unsigned n = _ak_prof_capture(pcs, AK_PROF_MAX_DEPTH, method, 0);
  __asm__ volatile("" ::: "memory");  // no tail call: this frame stays
  return n;
}

TEST_F(ProfTable, ACaptureStartsAtItsCaller) {
  ASSERT_EQ(_ak_prof_stack_setup(AK_PROF_STACK_UNWIND), AK_PROF_STACK_UNWIND) << "libgcc_s.so.1 not loaded";
  for (int method : {AK_PROF_STACK_UNWIND, AK_PROF_STACK_FP}) {
    uintptr_t pcs[AK_PROF_MAX_DEPTH];
    unsigned n = capture_here(method, pcs);
    ASSERT_GE(n, 1u) << method;
    uintptr_t fn = reinterpret_cast<uintptr_t>(&capture_here);
    EXPECT_GT(pcs[0], fn) << method;
    EXPECT_LT(pcs[0], fn + 256) << method;
    if (method == AK_PROF_STACK_UNWIND) {
      EXPECT_GE(n, 3u);  // the test body, gtest, main...
    }
  }
}

// The two halves of the unwinder at the same place: the fast walk into
// pcs[0], libgcc's into pcs[1]; their counts into n[].
struct TwoCaptures {
  uintptr_t pcs[2][AK_PROF_MAX_DEPTH];
  unsigned n[2];
};

// Frames of three shapes, chosen by depth: a frame addressed from rsp, a
// frame whose size is known only at run time (alloca: addressed from rbp)
// and a large frame; each level calls the next, the last captures twice.
__attribute__((noinline)) void nest(int depth, TwoCaptures *c);

__attribute__((noinline)) void nest_alloca(int depth, TwoCaptures *c) {
  volatile char *v = static_cast<volatile char *>(__builtin_alloca(16 + depth % 7));
  v[0] = 1;
  nest(depth - 1, c);
  c->n[0] += v[0] - 1U;
}

__attribute__((noinline)) void nest_big(int depth, TwoCaptures *c) {
  volatile char big[5000];
  big[depth] = 1;
  nest(depth - 1, c);
  c->n[0] += big[depth] - 1U;  // read after the call: the frame is live across it
}

__attribute__((noinline)) void nest(int depth, TwoCaptures *c) {
  if (depth <= 0) {
    c->n[0] = _ak_prof_capture(c->pcs[0], AK_PROF_MAX_DEPTH, AK_PROF_STACK_CFI, 0);
    c->n[1] = _ak_prof_capture(c->pcs[1], AK_PROF_MAX_DEPTH, AK_PROF_STACK_LIBGCC, 0);
  } else if (depth % 3 == 0) {
    nest_alloca(depth, c);
  } else if (depth % 3 == 1) {
    nest_big(depth, c);
  } else {
    nest(depth - 1, c);
  }
  __asm__ volatile("" ::: "memory");  // no tail calls: every frame stays
}

// The unwinder's fast walk (the CFI of .eh_frame, rules cached per return
// address) finds the same frames as libgcc's _Unwind_Backtrace, for
// frames addressed from rsp and from rbp, and twice in a row (the second
// time from its cache), in this thread and in another. Frame 0 is each
// capture's own call site in nest().
// Where the fast walk is built (cfi.c): x86-64 with glibc 2.35 or later.
#if defined(__x86_64__) && defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))
constexpr bool kFastWalk = true;
#else
constexpr bool kFastWalk = false;
#endif

TEST_F(ProfTable, TheFastWalkFindsTheFramesLibgccFinds) {
  if (!kFastWalk) GTEST_SKIP() << "no fast walk on this platform (x86-64 with glibc 2.35 or later)";
  ASSERT_EQ(_ak_prof_stack_setup(AK_PROF_STACK_UNWIND), AK_PROF_STACK_UNWIND) << "libgcc_s.so.1 not loaded";
  auto compare = [](int depth) {
    for (int round = 0; round < 2; round++) {
      TwoCaptures c{};
      nest(depth, &c);
      ASSERT_GT(c.n[0], 0u) << "the fast walk gave up at depth " << depth;
      ASSERT_EQ(c.n[0], c.n[1]) << "depth " << depth << " round " << round;
      EXPECT_GE(c.n[0], std::min(static_cast<unsigned>(depth) + 3, unsigned{AK_PROF_MAX_DEPTH}))
          << "depth " << depth;  // the nest()s, the test, gtest
      for (unsigned i = 1; i < c.n[0]; i++)
        EXPECT_EQ(c.pcs[0][i], c.pcs[1][i]) << "frame " << i << " of depth " << depth;
    }
  };
  for (int depth : {0, 1, 2, 3, 5, 8, 20, 40, 70}) compare(depth);
  std::thread([&] {
    for (int depth : {0, 4, 30}) compare(depth);
  }).join();
  // The rule cache, once used, counts in the profiler's memory.
  EXPECT_GE(stats().memory, _ak_prof_mapped() + 4096 * 20);
}

// In a signal handler the stack goes through the kernel's signal frame,
// whose CFA the fast walk does not model (a DWARF expression): it gives
// up there, and the unwinder then takes libgcc's walk, which does.
TwoCaptures g_in_handler[2];
void capture_in_handler(int) {
  g_in_handler[0].n[0] = _ak_prof_capture(g_in_handler[0].pcs[0], AK_PROF_MAX_DEPTH, AK_PROF_STACK_CFI, 0);
  g_in_handler[1].n[0] = _ak_prof_capture(g_in_handler[1].pcs[0], AK_PROF_MAX_DEPTH, AK_PROF_STACK_UNWIND, 0);
  g_in_handler[1].n[1] = _ak_prof_capture(g_in_handler[1].pcs[1], AK_PROF_MAX_DEPTH, AK_PROF_STACK_LIBGCC, 0);
}

TEST_F(ProfTable, InASignalHandlerTheUnwinderFallsBackToLibgcc) {
  if (!kFastWalk) GTEST_SKIP() << "no fast walk on this platform (x86-64 with glibc 2.35 or later)";
  ASSERT_EQ(_ak_prof_stack_setup(AK_PROF_STACK_UNWIND), AK_PROF_STACK_UNWIND) << "libgcc_s.so.1 not loaded";
  struct sigaction sa {
  }, old{};
  sa.sa_handler = capture_in_handler;
  ASSERT_EQ(sigaction(SIGUSR1, &sa, &old), 0);
  raise(SIGUSR1);
  sigaction(SIGUSR1, &old, nullptr);
  EXPECT_EQ(g_in_handler[0].n[0], 0u) << "the fast walk went through the signal frame";
  const TwoCaptures &c = g_in_handler[1];
  EXPECT_GE(c.n[1], 4u);  // the handler, the signal frame, raise, the test...
  ASSERT_EQ(c.n[0], c.n[1]);
  for (unsigned i = 1; i < c.n[0]; i++) EXPECT_EQ(c.pcs[0][i], c.pcs[1][i]) << "frame " << i;
}

TEST_F(ProfTable, TheValidatorSeesABrokenChain) {
  start({});
  auto s = unique_stack(0, 8);
  _ak_prof_record_stack(block(0), 64, s.data(), 8, nullptr, nullptr);
  _ak_prof_check();
  EXPECT_DEATH(
      {
        _ak_prof_frame *f = static_cast<_ak_prof_frame *>(_ak_prof_vec_at(&_ak_prof_g.t.frames, 3));
        f->pc_lo ^= 0x40;  // moves it out of its bucket
        _ak_prof_check();
      },
      "arenakit: prof: frame 3 .* is not on its hash chain");
}

}  // namespace
