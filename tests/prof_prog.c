/* SPDX-License-Identifier: MIT */
/* prof_prog.c - a program for the heap profiler's tests: allocations
 * (simulated: fake block addresses, real sizes) at three call sites that
 * hold 60 %, 30 % and 10 % of the bytes, through the profiler's hooks, as
 * an allocator with the hooks in place would make them. It starts the
 * profiler only through the environment (AK_PROF=1, AK_PROF_SAMPLE, ...)
 * and dumps only at exit (AK_PROF_DUMP), so the tests of the environment
 * and of scripts/heap_profile.sh run it.
 *   prof_prog [MIB]   simulate MIB MiB (default 64); prints one line of
 *                     the profiler's state */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "arenakit/prof.h"
#include "prof/prof.h"

static uintptr_t next_block = (uintptr_t)1 << 36;

/* Inlined into each site at every -O level, so that the site itself
 * calls the hook and is the innermost frame of its stack. */
static inline __attribute__((always_inline)) void allocate(size_t n, const char *key, const char *value) {
  void *p = (void *)next_block;
  next_block += (n + 15) & ~(size_t)15;
  if (_ak_prof_sample_due(n)) _ak_prof_record(p, n, key, value);
}

/* The three sites; noinline and no tail call, so each is a frame. */
__attribute__((noinline)) void prog_site_sessions(size_t n) {
  allocate(n, "pool", "sessions");
  __asm__ volatile("" ::: "memory");
}
__attribute__((noinline)) void prog_site_cache(size_t n) {
  allocate(n, "pool", "cache");
  __asm__ volatile("" ::: "memory");
}
__attribute__((noinline)) void prog_site_parse(size_t n) {
  allocate(n, "arena", "parse");
  __asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv) {
  uint64_t total = (uint64_t)(argc > 1 ? atoi(argv[1]) : 64) << 20, done = 0, x = 88172645463325252ull;
  while (done < total) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    size_t n = 16 + (size_t)(x % 8192);
    unsigned r = (unsigned)(x >> 40) % 10;
    if (r < 6)
      prog_site_sessions(n);
    else if (r < 9)
      prog_site_cache(n);
    else
      prog_site_parse(n);
    done += n;
  }
  ak_prof_stats st;
  ak_prof_stats_get(&st);
  printf("prof_prog: active=%d samples=%zu sample_bytes=%zu stack=%d\n", (int)st.active, st.samples,
         st.sample_bytes, st.stack_method);
  return 0;
}
