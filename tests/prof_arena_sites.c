/* SPDX-License-Identifier: MIT */
/* prof_arena_sites.c - the call sites of prof_arena_test.cpp: each
 * allocates from an arena through the inline fast path, whose limit the
 * heap profiler lowers to the thread's countdown. In C for the reason
 * given in prof_pprof_sites.c; noinline and no tail call: each site is a
 * frame of its own. */
#include <stddef.h>
#include <string.h>

#include "arenakit/arena.h"

void *pa_site_parse(ak_arena *a, size_t n);
void *pa_site_render(ak_arena *a, size_t n);

__attribute__((noinline)) void *pa_site_parse(ak_arena *a, size_t n) {
  void *p = ak_arena_alloc(a, n, 8);
  if (p) memset(p, 1, n < 64 ? n : 64);
  __asm__ volatile("" ::: "memory");
  return p;
}

__attribute__((noinline)) void *pa_site_render(ak_arena *a, size_t n) {
  void *p = ak_arena_alloc(a, n, 8);
  if (p) memset(p, 2, n < 64 ? n : 64);
  __asm__ volatile("" ::: "memory");
  return p;
}
