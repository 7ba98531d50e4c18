/* SPDX-License-Identifier: MIT */
/* stack_probe.c - do the heap profiler's stack methods give usable stacks
 * in a program we did not build? An LD_PRELOAD library: every malloc call
 * after PROBE_BYTES (default 64 KiB) more bytes captures the caller's
 * stack with the unwinder, with frame pointers, and with the unwinder's
 * two halves alone - its fast walk (src/prof/cfi.c) and libgcc's
 * _Unwind_Backtrace (the profiler's own code, src/prof/stack.c) - times
 * them, compares them, and feeds the unwinder's stacks to a call tree
 * like the profiler's. At exit it prints: samples, mean depth of each
 * method, how often the frame-pointer stack equals the unwinder's, the
 * mean number of leading frames they share, how often the fast walk gave
 * up and how often its stack equals libgcc's, ns per capture, distinct
 * stacks and call-tree nodes. libgcc's walk is the reference: it reads
 * the unwind tables the compiler writes for every function. Built and run
 * by bench/prof/run.sh. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "prof/prof_internal.h"

extern void *__libc_malloc(size_t);

static __thread int inside;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static size_t period = 65536, countdown, samples, full_match, depth_sum[2], shared_sum, short_fp,
              distinct_depth, fast_gave_up, fast_match;
static double ns_sum[4]; /* unwinder, frame pointers, fast walk, libgcc */
static _ak_prof_tables tables;
static int ready;

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

__attribute__((constructor)) static void probe_init(void) {
  inside = 1;
  const char *p = getenv("PROBE_BYTES");
  if (p) period = strtoul(p, NULL, 10);
  ready =
      _ak_prof_stack_setup(AK_PROF_STACK_UNWIND) == AK_PROF_STACK_UNWIND &&
      _ak_prof_tables_init(&tables, &(_ak_prof_limits){1u << 20, (1u << 22) - 2, (1u << 20) - 2, 16}) == 0;
  inside = 0;
}

/* `from`: the return address into the program (the caller of malloc). */
static void probe(uintptr_t from) {
  uintptr_t a[AK_PROF_MAX_DEPTH], b[AK_PROF_MAX_DEPTH];
  double t0 = now_ns();
  unsigned na = _ak_prof_capture(a, AK_PROF_MAX_DEPTH, AK_PROF_STACK_UNWIND, from);
  double t1 = now_ns();
  unsigned nb = _ak_prof_capture(b, AK_PROF_MAX_DEPTH, AK_PROF_STACK_FP, from);
  double t2 = now_ns();
  uintptr_t c[AK_PROF_MAX_DEPTH], d[AK_PROF_MAX_DEPTH];
  unsigned nc = _ak_prof_capture(c, AK_PROF_MAX_DEPTH, AK_PROF_STACK_CFI, from);
  double t3 = now_ns();
  unsigned nd = _ak_prof_capture(d, AK_PROF_MAX_DEPTH, AK_PROF_STACK_LIBGCC, from);
  double t4 = now_ns();
  bool same = nc == nd && memcmp(c, d, nc * sizeof c[0]) == 0;
  unsigned shared = 0;
  while (shared < na && shared < nb && a[shared] == b[shared]) shared++;
  pthread_mutex_lock(&mu);
  samples++;
  ns_sum[0] += t1 - t0;
  ns_sum[1] += t2 - t1;
  ns_sum[2] += t3 - t2;
  ns_sum[3] += t4 - t3;
  fast_gave_up += nc == 0;
  fast_match += nc != 0 && same;
  depth_sum[0] += na;
  depth_sum[1] += nb;
  shared_sum += shared;
  full_match += (na == nb && shared == na);
  short_fp += nb <= 2;
  size_t before = tables.stacks;
  (void)_ak_prof_stack_intern(&tables, a, na);
  if (tables.stacks != before) distinct_depth += na;
  pthread_mutex_unlock(&mu);
}

void *malloc(size_t n) {
  if (!inside && ready) {
    size_t c = __atomic_add_fetch(&countdown, n, __ATOMIC_RELAXED);
    if (c >= period) {
      __atomic_store_n(&countdown, 0, __ATOMIC_RELAXED);
      inside = 1;
      probe((uintptr_t)__builtin_return_address(0));
      inside = 0;
    }
  }
  return __libc_malloc(n);
}

__attribute__((destructor)) static void probe_report(void) {
  if (!samples) return;
  char line[768];
  double s = (double)samples;
  int n = snprintf(
      line, sizeof line,
      "stack_probe: %zu samples; mean depth: unwinder %.1f, frame pointers %.1f; fp stack == unwinder "
      "stack: %.1f%%; leading frames shared: %.1f; fp depth <= 2: %.1f%%; fast walk gave up: %.1f%%, "
      "its stack == libgcc's: %.1f%%; ns/capture: unwinder %.0f, fp %.0f, fast walk %.0f, libgcc %.0f; "
      "%zu distinct stacks of mean depth %.1f: %u call-tree nodes (%.1f per stack), %u distinct "
      "frames; %.0f bytes of frames and nodes per stack\n",
      samples, (double)depth_sum[0] / s, (double)depth_sum[1] / s, 100.0 * (double)full_match / s,
      (double)shared_sum / s, 100.0 * (double)short_fp / s, 100.0 * (double)fast_gave_up / s,
      100.0 * (double)fast_match / s, ns_sum[0] / s, ns_sum[1] / s, ns_sum[2] / s, ns_sum[3] / s,
      tables.stacks, (double)distinct_depth / (double)(tables.stacks ? tables.stacks : 1), tables.nodes.n - 1,
      (double)(tables.nodes.n - 1) / (double)(tables.stacks ? tables.stacks : 1), tables.frames.n - 1,
      (double)((tables.nodes.n - 1) * sizeof(_ak_prof_node) +
               (tables.frames.n - 1) * sizeof(_ak_prof_frame)) /
          (double)(tables.stacks ? tables.stacks : 1));
  (void)!write(2, line, (size_t)n);
}
