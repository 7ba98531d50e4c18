/* SPDX-License-Identifier: MIT */
/* registry.c - the live pools: their ids, the registry (with the fork
 * handlers that hold every pool's locks across fork()), the tombstones of
 * destroyed pools (checked and hardened builds) and the owner of an
 * address (error reports). */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/lifecycle.h"
#include "common/reclaim.h"
#include "common/wordlock.h"
#include "pool/modes.h"

/* ---- registry of all pools and their slabs (owns, checks) ---------------- */

static pthread_mutex_t g_pools_mu = PTHREAD_MUTEX_INITIALIZER;
static _ak_pool_impl *g_pools; /* every live pool, linked by next_pool (under g_pools_mu) */
static atomic_uint_least64_t g_next_id = 1;

/* Checked and hardened builds: the blocks of the last AK_POOL_GRAVES
 * destroyed pools, kept as tombstones (under g_pools_mu), so that a call
 * on a destroyed pool is reported instead of reading freed memory. */
#define AK_POOL_GRAVES 64
static _ak_pool_impl *g_graves[AK_POOL_GRAVES];
static size_t g_grave_next;

/* ---- fork ------------------------------------------------------------------ */

/* The atfork handlers take every lock of every pool, so that the child
 * finds none held by a thread that does not exist there. The order
 * (docs/design.md, "Fork"): g_pools_mu, modes/tls.c's g_mu, then for each
 * live pool in registry order its mutex `mu`, its mode's lock (SPINLOCK's), the file
 * backing's `file_mu`, the 64 shard locks of its slab table and the lock of
 * its spare set (the reclaim module's own handlers take its registry; its
 * background thread holds no lock while it waits for one of these). They run
 * before the malloc's (registered after them, at load: common/lifecycle.h),
 * as the pool's locks are taken around malloc calls and never inside them. The child's only thread is the one
 * that took them all, so it releases them as the parent does (default mutexes: no owner check). */
static void fork_prepare(void) {
  _ak_pool_lock(&g_pools_mu);
  _ak_tls_fork_lock();
  for (_ak_pool_impl *q = g_pools; q; q = q->next_pool) {
    _ak_pool_lock(&q->mu);
    if (q->mode->fork_lock) q->mode->fork_lock(q);
    _ak_word_lock(&q->file.mu);
    _ak_table_lock_all(&q->table);
    _ak_spare_set_lock(&q->spares);
  }
}

static void fork_release(void) {
  for (_ak_pool_impl *q = g_pools; q; q = q->next_pool) {
    _ak_spare_set_unlock(&q->spares);
    _ak_table_unlock_all(&q->table);
    _ak_word_unlock(&q->file.mu);
    if (q->mode->fork_unlock) q->mode->fork_unlock(q);
    _ak_pool_unlock(&q->mu);
  }
  _ak_tls_fork_unlock();
  _ak_pool_unlock(&g_pools_mu);
}

/* The child's heaps of THREADS pools: those of threads that do not exist
 * there are given up (modes/threads/heaps.c, through the mode table). */
static void fork_child(void) {
  fork_release();
  _ak_pool_lock(&g_pools_mu);
  for (_ak_pool_impl *q = g_pools; q; q = q->next_pool)
    if (q->mode->fork_child) q->mode->fork_child(q);
  _ak_pool_unlock(&g_pools_mu);
}

/* At load, after the malloc's handlers (common/lifecycle.h). */
__attribute__((constructor(AK_CTOR_POOL))) static void fork_register(void) {
  (void)pthread_atfork(fork_prepare, fork_release, fork_child);
}

uint64_t _ak_pools_new_id(void) {
  uint64_t id = atomic_fetch_add(&g_next_id, 1);
  AK_ASSERT(id != 0); /* 0 marks an empty cache entry: never a pool's id */
  return id;
}

/* The reclaim thread's pass (and ak_reclaim_collect) over the pools: each
 * live pool's own due steps (its mode's `tick`); the earliest time one
 * wants to run again. */
static uint64_t pools_tick(uint64_t now) {
  (void)now;
  uint64_t next = UINT64_MAX;
  _ak_pool_lock(&g_pools_mu);
  for (_ak_pool_impl *q = g_pools; q; q = q->next_pool) {
    uint64_t at = q->mode->tick ? q->mode->tick(q) : UINT64_MAX;
    if (at < next) next = at;
  }
  _ak_pool_unlock(&g_pools_mu);
  return next;
}

void _ak_pools_add(_ak_pool_impl *p) {
  if (p->mode->tick) _ak_reclaim_register_tick(pools_tick);
  _ak_pool_lock(&g_pools_mu);
  AK_ASSERT(p->next_pool == NULL && p != g_pools && !p->destroyed); /* added once, alive */
  p->next_pool = g_pools;
  g_pools = p;
  _ak_pool_unlock(&g_pools_mu);
}

void _ak_pools_remove(_ak_pool_impl *p) {
  _ak_pool_lock(&g_pools_mu);
  bool found = false;
  for (_ak_pool_impl **pp = &g_pools; *pp; pp = &(*pp)->next_pool) {
    if (*pp == p) {
      *pp = p->next_pool;
      found = true;
      break;
    }
  }
  AK_ASSERT(found); /* a live pool is registered (destroy checked for a tombstone) */
  (void)found;
  _ak_pool_unlock(&g_pools_mu);
}

_ak_pool_impl *_ak_pools_bury(_ak_pool_impl *p) {
  _ak_pool_lock(&g_pools_mu);
  AK_ASSERT(p->destroyed && g_grave_next < AK_POOL_GRAVES); /* a tombstone, in the ring */
  _ak_pool_impl *old = g_graves[g_grave_next];
  g_graves[g_grave_next] = p;
  g_grave_next = (g_grave_next + 1) % AK_POOL_GRAVES;
  _ak_pool_unlock(&g_pools_mu);
  AK_ASSERT(old == NULL || old->destroyed); /* only tombstones are freed here */
  return old;
}

const char *_ak_pools_owner_name(uintptr_t addr) {
  const char *name = NULL;
  _ak_pool_lock(&g_pools_mu);
  for (_ak_pool_impl *q = g_pools; q && !name; q = q->next_pool)
    if (_ak_table_has(&q->table, (uintptr_t)_ak_slab_of((const void *)addr, q->slab_size))) name = q->name;
  _ak_pool_unlock(&g_pools_mu);
  return name;
}
