/* SPDX-License-Identifier: MIT */
/* stack_cost.c - the cost of one stack capture by each method of the heap
 * profiler (src/prof/stack.c), at several stack depths: the unwinder (its
 * fast walk of the CFI, src/prof/cfi.c), libgcc's _Unwind_Backtrace alone
 * (what the unwinder falls back to) and frame pointers. A chain of calls
 * DEPTH deep (built with frame pointers, so every method sees every frame)
 * captures its stack N times per method, in 10 batches; prints ns per
 * capture of the fastest batch (the machine is shared: a slower batch was
 * interrupted) and the frames each method returned. Built and run by
 * bench/prof/run.sh. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "prof/prof_internal.h"

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

typedef struct result {
  double ns;
  unsigned frames;
} result;

static result measure(int method, int iters) {
  enum { BATCHES = 10 };
  uintptr_t pcs[AK_PROF_MAX_DEPTH];
  unsigned n = 0;
  double best = 1e300;
  int per = iters / BATCHES > 0 ? iters / BATCHES : 1;
  for (int b = 0; b < BATCHES; b++) {
    double t0 = now_ns();
    for (int i = 0; i < per; i++) n = _ak_prof_capture(pcs, AK_PROF_MAX_DEPTH, method, 0);
    double ns = (now_ns() - t0) / per;
    best = ns < best ? ns : best;
  }
  return (result){best, n};
}

/* Recurses `depth` frames, then measures at the bottom. */
__attribute__((noinline)) static void descend(int depth, int iters, result out[3]) {
  if (depth > 0) {
    descend(depth - 1, iters, out);
    __asm__ volatile("" ::: "memory"); /* no tail call: keeps the frame */
    return;
  }
  out[0] = measure(AK_PROF_STACK_UNWIND, iters);
  out[1] = measure(AK_PROF_STACK_LIBGCC, iters);
  out[2] = measure(AK_PROF_STACK_FP, iters);
}

int main(int argc, char **argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 20000;
  if (_ak_prof_stack_setup(AK_PROF_STACK_UNWIND) != AK_PROF_STACK_UNWIND) {
    fprintf(stderr, "stack_cost: the unwinder (libgcc_s.so.1) could not be loaded\n");
    return 1;
  }
  printf("%-7s %18s %18s %18s\n", "depth", "unwinder ns (fr)", "libgcc ns (fr)", "frame ptr ns (fr)");
  static const int depths[] = {5, 10, 20, 40, 60};
  for (unsigned d = 0; d < sizeof depths / sizeof depths[0]; d++) {
    result r[3];
    descend(depths[d], iters, r);
    printf("%-7d %12.0f (%2u) %12.0f (%2u) %12.0f (%2u)\n", depths[d], r[0].ns, r[0].frames, r[1].ns,
           r[1].frames, r[2].ns, r[2].frames);
  }
  return 0;
}
