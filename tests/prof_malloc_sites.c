/* SPDX-License-Identifier: MIT */
/* prof_malloc_sites.c - the three call sites of prof_malloc_test.cpp:
 * each allocates through ak_malloc, so the heap profiler's hook in the
 * malloc's slow path samples it. In C for the reason given in
 * prof_pprof_sites.c (pprof's line-table lookup); noinline and no tail
 * call: each site is a frame of its own. */
#include <stddef.h>

#include "arenakit/malloc.h"

void *pm_site_sixty(size_t n);
void *pm_site_thirty(size_t n);
void *pm_site_ten(size_t n);

__attribute__((noinline)) void *pm_site_sixty(size_t n) {
  void *p = ak_malloc(n);
  __asm__ volatile("" ::: "memory");
  return p;
}

__attribute__((noinline)) void *pm_site_thirty(size_t n) {
  void *p = ak_malloc(n);
  __asm__ volatile("" ::: "memory");
  return p;
}

__attribute__((noinline)) void *pm_site_ten(size_t n) {
  void *p = ak_malloc(n);
  __asm__ volatile("" ::: "memory");
  return p;
}
