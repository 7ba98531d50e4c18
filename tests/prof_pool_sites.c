/* SPDX-License-Identifier: MIT */
/* prof_pool_sites.c - the call sites of prof_pool_test.cpp: each
 * allocates from a pool through ak_pool_alloc (inline, then the library's
 * slow path, where a sampled pool counts down). In C for the reason given
 * in prof_pprof_sites.c; noinline and no tail call: each site is a frame
 * of its own. */
#include "arenakit/pool.h"

void *pp_site_sessions(ak_pool *p);
void *pp_site_cache(ak_pool *p);

__attribute__((noinline)) void *pp_site_sessions(ak_pool *p) {
  void *o = ak_pool_alloc(p);
  __asm__ volatile("" ::: "memory");
  return o;
}

__attribute__((noinline)) void *pp_site_cache(ak_pool *p) {
  void *o = ak_pool_alloc(p);
  __asm__ volatile("" ::: "memory");
  return o;
}
