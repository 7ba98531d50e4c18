/* SPDX-License-Identifier: MIT */
/* prof_malloc_sites.c - the three call sites of prof_malloc_test.cpp:
 * each allocates through ak_malloc, so the heap profiler's hook in the
 * malloc's slow path samples it. In C for the reason given in
 * prof_pprof_sites.c (pprof's line-table lookup); noinline and no tail
 * call: each site is a frame of its own. Also what the test needs of the
 * malloc's internals, whose header is C only: a block's page, whether
 * the page is marked as holding a sample, marking a block sampled, and
 * whether spans have guard pages. */
#include <stdbool.h>
#include <stddef.h>

#include "arenakit/malloc.h"
#include "malloc/malloc_internal.h"

void *pm_page_of(void *p);
bool pm_page_marked(void *p);
void pm_sample(void *p, size_t n);
bool pm_guards(void);

/* Whether the build puts guard pages after spans (hardened). */
bool pm_guards(void) { return ak_harden_guards; }

void *pm_page_of(void *p) { return _ak_page_of(_ak_seg_of(p), p); }

bool pm_page_marked(void *p) {
  return (__atomic_load_n(&_ak_page_of(_ak_seg_of(p), p)->flags, __ATOMIC_RELAXED) & AK_PG_SAMPLED) != 0;
}

/* As the allocation slow path samples `p`, a block the calling thread
 * just allocated: recorded by the profiler and marked on its page. */
void pm_sample(void *p, size_t n) { _ak_malloc_prof_sampled(p, n); }

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
