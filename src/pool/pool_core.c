/* SPDX-License-Identifier: MIT */
/* pool_core.c - the pool's core, below every sync mode: the registry of
 * live pools (with the fork handlers that hold their locks), the slab
 * lists kept fullest-first, and getting and putting slabs (a spare under
 * the reclaim policy first, else a new one from the backing). */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/lifecycle.h"
#include "common/track.h"
#include "os/os_mem.h"
#include "pool/pool_internal.h"

/* The inline paths read these fields of _ak_slab as _ak_pool_slab_head:
 * the layouts must agree. */
_Static_assert(offsetof(_ak_slab, free) == offsetof(_ak_pool_slab_head, free) &&
                   offsetof(_ak_slab, used) == offsetof(_ak_pool_slab_head, used) &&
                   offsetof(_ak_slab, list) == offsetof(_ak_pool_slab_head, state) &&
                   offsetof(_ak_slab, owner) == offsetof(_ak_pool_slab_head, owner) &&
                   offsetof(_ak_slab, key) == offsetof(_ak_pool_slab_head, key) &&
                   offsetof(_ak_slab, magic) == offsetof(_ak_pool_slab_head, magic) &&
                   offsetof(_ak_slab, pool) == offsetof(_ak_pool_slab_head, pool),
               "_ak_slab must begin with _ak_pool_slab_head");
/* The headers' names for the state and the mitigation bits they read. */
_Static_assert(_AK_POOL_SLAB_AVAIL == AK_SLAB_AVAIL, "the inline paths' list state");
_Static_assert(AK_CONFIG_HARDEN_LINKS == AK_HARDEN_LINKS &&
                   AK_CONFIG_HARDEN_DOUBLE_FREE == AK_HARDEN_DOUBLE_FREE,
               "the headers' hardening bits");

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
 * (docs/design.md, "Fork"): g_pools_mu, pool_tls.c's g_mu, then for each
 * live pool in registry order its mutex `mu`, its spinlock `spin`, the file
 * backing's `file_mu`, the 64 shard locks of its slab table and the lock of
 * its spare set (the reclaim module's own handlers take its registry; its
 * background thread holds no lock while it waits for one of these). They run
 * before the malloc's (registered after them, at load: common/lifecycle.h),
 * as the pool's locks are taken around malloc calls and never inside them. The child's only thread is the one
 * that took them all, so it releases them as the parent does (default mutexes: no owner check). */
static void fork_prepare(void) {
  pthread_mutex_lock(&g_pools_mu);
  _ak_tls_fork_lock();
  for (_ak_pool_impl *q = g_pools; q; q = q->next_pool) {
    pthread_mutex_lock(&q->mu);
    _ak_word_lock(&q->spin);
    _ak_word_lock(&q->file_mu);
    _ak_table_lock_all(&q->table);
    _ak_spare_set_lock(&q->spares);
  }
}

static void fork_release(void) {
  for (_ak_pool_impl *q = g_pools; q; q = q->next_pool) {
    _ak_spare_set_unlock(&q->spares);
    _ak_table_unlock_all(&q->table);
    _ak_word_unlock(&q->file_mu);
    _ak_word_unlock(&q->spin);
    pthread_mutex_unlock(&q->mu);
  }
  _ak_tls_fork_unlock();
  pthread_mutex_unlock(&g_pools_mu);
}

/* The child's heaps of THREADS pools: those of threads that do not exist
 * there are given up (pool_threads.c, through the mode table). */
static void fork_child(void) {
  fork_release();
  pthread_mutex_lock(&g_pools_mu);
  for (_ak_pool_impl *q = g_pools; q; q = q->next_pool)
    if (q->mode->fork_child) q->mode->fork_child(q);
  pthread_mutex_unlock(&g_pools_mu);
}

/* At load, after the malloc's handlers (common/lifecycle.h). */
__attribute__((constructor(AK_CTOR_POOL))) static void fork_register(void) {
  (void)pthread_atfork(fork_prepare, fork_release, fork_child);
}

uint64_t _ak_pools_new_id(void) { return atomic_fetch_add(&g_next_id, 1); }

void _ak_pools_add(_ak_pool_impl *p) {
  pthread_mutex_lock(&g_pools_mu);
  p->next_pool = g_pools;
  g_pools = p;
  pthread_mutex_unlock(&g_pools_mu);
}

void _ak_pools_remove(_ak_pool_impl *p) {
  pthread_mutex_lock(&g_pools_mu);
  for (_ak_pool_impl **pp = &g_pools; *pp; pp = &(*pp)->next_pool) {
    if (*pp == p) {
      *pp = p->next_pool;
      break;
    }
  }
  pthread_mutex_unlock(&g_pools_mu);
}

_ak_pool_impl *_ak_pools_bury(_ak_pool_impl *p) {
  pthread_mutex_lock(&g_pools_mu);
  _ak_pool_impl *old = g_graves[g_grave_next];
  g_graves[g_grave_next] = p;
  g_grave_next = (g_grave_next + 1) % AK_POOL_GRAVES;
  pthread_mutex_unlock(&g_pools_mu);
  return old;
}

const char *_ak_pools_owner_name(uintptr_t addr) {
  const char *name = NULL;
  pthread_mutex_lock(&g_pools_mu);
  for (_ak_pool_impl *q = g_pools; q && !name; q = q->next_pool)
    if (_ak_table_has(&q->table, addr & ~(uintptr_t)(q->slab_size - 1))) name = q->name;
  pthread_mutex_unlock(&g_pools_mu);
  return name;
}

void _ak_pool_inline_off(_ak_pool_impl *p) {
  /* In the concurrent modes other threads read these in the inline paths
   * without the lock, and they never change: store only what differs, so
   * a trim does not race with those reads. */
  if (p->pub.cur.hot.first != NULL) p->pub.cur.hot.first = NULL;
  if (p->pub.cur.hot_used != 0) p->pub.cur.hot_used = 0;
  if (p->pub.cur.hot_slab != 1) p->pub.cur.hot_slab = 1; /* no slab lives at address 1 */
  if (p->pub.cur.mask != 0) p->pub.cur.mask = 0;
  if (p->pub.cur.hot_key != 0) p->pub.cur.hot_key = 0;
  if (p->pub.cur.bump != 0) p->pub.cur.bump = 0;
  if (p->pub.cur.bump_end != 0) p->pub.cur.bump_end = 0;
  if (p->pub.alt != NULL) p->pub.alt = NULL;
  AK_ASSERT(p->pub.cur.hot_slab == 1 && p->pub.cur.mask == 0); /* nothing inline matches */
}

/* ---- slab lists ------------------------------------------------------------ */

/* The slab whose header holds spare-set node `n`. */
static _ak_slab *spare_slab(_ak_spare *n) { return (_ak_slab *)((char *)n - offsetof(_ak_slab, spare)); }

/* A spare slab (LOCKFREE's taken-down list first, then the spare set), or
 * NULL; `*failed` when a punched-out file spare cannot get its blocks back
 * (error reported; a taken-down LOCKFREE slab stays listed, a purged spare
 * is released: put back, it would pass for a committed one). */
static _ak_slab *spare_take(_ak_pool_impl *p, bool *failed) {
  *failed = false;
  _ak_slab *s = _ak_slab_first(&p->spare);
  bool cold = true, listed = s != NULL;
  if (!s) {
    _ak_spare *n = _ak_spare_take(&p->spares, &cold);
    if (!n) return NULL;
    s = spare_slab(n);
  }
  /* A file spare that was punched out (_ak_pool_slab_decommit) has its
   * blocks allocated again before a slot is written. */
  if (cold && p->backing == AK_BACKING_FILE && _ak_os_file_alloc(p->fd, s->file_offset, p->slab_size) != 0) {
    int e = errno;
    if (!listed) _ak_pool_slab_release(p, s);
    _ak_pool_file_error(p, e, "allocate", s->file_offset);
    *failed = true;
    return NULL;
  }
  if (listed) _ak_slab_list_remove(&p->spare, s);
  AK_ASSERT(!_ak_dnode_linked(&s->node) && s->used == 0); /* an empty slab on no list */
  return s;
}

_ak_slab *_ak_pool_slab_spare(_ak_pool_impl *p) {
  bool failed;
  return spare_take(p, &failed);
}

_ak_slab *_ak_pool_slab_get(_ak_pool_impl *p) {
  bool failed;
  _ak_slab *s = spare_take(p, &failed);
  return s || failed ? s : _ak_pool_slab_new(p, "ak_pool_alloc");
}

void _ak_pool_slab_decommit(_ak_pool_impl *p, _ak_slab *s) {
  size_t ps = _ak_os_page_size();
  uintptr_t from = (s->start + ps - 1) & ~(uintptr_t)(ps - 1);
  uintptr_t to = (uintptr_t)s + p->slab_size;
  if (to <= from) return;
  if (p->backing == AK_BACKING_FILE)
    (void)_ak_os_file_decommit(p->fd, (void *)from, s->file_offset + (from - (uintptr_t)s), to - from);
  else
    (void)_ak_os_decommit((void *)from, to - from);
}

void _ak_pool_slab_release(_ak_pool_impl *p, _ak_slab *s) {
  AK_ASSERT(!_ak_dnode_linked(&s->node)); /* taken off its list first */
  _ak_table_del(&p->table, (uintptr_t)s);
  if (p->tracked) AK_TRACK_INTERNAL((void *)s, p->slab_size);
  s->magic = 0;
  _ak_pool_backing_put(p, s, s->file_offset);
}

void _ak_pool_slab_reset(_ak_slab *s) {
  /* A reused slab starts from scratch: carving is lazy again (no slot is
   * touched before it is handed out, and no cold list is chased). */
  s->free = NULL;
  s->bump = s->start;
  s->used = 0;
  s->flags |= AK_SLAB_F_REUSED;
}

void _ak_pool_slab_put(_ak_pool_impl *p, _ak_slab *s) {
  AK_ASSERT(!_ak_dnode_linked(&s->node)); /* on no list: the spare set holds it by `spare` */
  _ak_pool_slab_reset(s);
  s->list = AK_SLAB_SPARE;
  _ak_spare_put(&p->spares, &s->spare, p->slab_size);
}

/* The spare set's view of a pool's slabs (common/reclaim.h). Decommit
 * keeps the header page, where the set's node lives. */
static void spare_decommit(_ak_spare *n, void *ctx) { _ak_pool_slab_decommit(ctx, spare_slab(n)); }
static void spare_release(_ak_spare *n, void *ctx) { _ak_pool_slab_release(ctx, spare_slab(n)); }
const _ak_spare_ops _ak_pool_spare_ops = {spare_decommit, spare_release};
