/* SPDX-License-Identifier: MIT */
/* threads/heap.h - AK_SYNC_THREADS' per-thread heap: what both files of
 * the mode use (threads.c allocates and frees through a heap, heaps.c
 * creates, abandons and destroys heaps and gives up a fork's orphans).
 * Calls go threads.c -> heaps.c, never back. */
#ifndef AK_POOL_MODES_THREADS_HEAP_H
#define AK_POOL_MODES_THREADS_HEAP_H

#include "common/reclaim.h"
#include "pool/modes.h"

struct _ak_pool_heap {
  _ak_pool_theap pub; /* first: what the inline paths use (owner writes) */
  _ak_pool_impl *pool;
  _ak_slab_list avail;   /* owner only: slabs with free slots, fullest first;
                            the head is the current slab */
  _ak_slab_list full;    /* owner only: slabs without local free slots, tagged */
  _ak_slab_list pending; /* owner only: slabs an owner's free took off `full`,
                            to be placed on `avail` by fullness (refill) */
  _ak_slab_list stash;   /* owner only: empty slabs this heap keeps (at most spare_limit) */
  /* The slabs this heap emptied, when spare_limit is 0 and the pool keeps
   * spares (not release_empty): under the reclaim policy as the pool's
   * set, but taken back by this heap only, so a thread that churns slabs
   * shares no lock and no slab with the others. Its own leaf lock (the
   * owner; the mode's tick, stats and trim under the pool's `mu`); its
   * slabs have `heap` NULL. */
  _ak_spare_set spares;
  atomic_int trim_req; /* another thread asked for a trim */
  size_t full_seen;    /* owner only: p->threads.full_epoch at the last walk of `full` */
  unsigned takes;      /* owner only: slabs taken (take_slab) */
  size_t peak_seen;    /* owner only: this heap's highest count at its samples of the peak */
  size_t hot_base;     /* pub.cur.hot_used when the current slab was checked out */
  _ak_dnode node;      /* on the pool's heap list (under mu) */
};

/* The pool's heaps in list order (under mu). */
static inline _ak_pool_heap *heap_of(_ak_dnode *n) { return _AK_DLIST_ENTRY(n, _ak_pool_heap, node); }
static inline _ak_pool_heap *heap_first(const _ak_pool_impl *p) { return heap_of(p->threads.heaps.head); }
static inline _ak_pool_heap *heap_next(const _ak_pool_heap *h) { return heap_of(h->node.next); }

/* The heap's live count: written by the owner only (relaxed, as the inline
 * paths do), read by stats from any thread. The inline paths count the
 * current slab's objects in `hot_used` alone: `live` counts the other
 * slabs', plus the current slab's at check-out (`hot_base`); heap_checkin
 * folds the difference in. Another thread reads a snapshot of three words,
 * exact when the owner is outside a call. */
static inline size_t live_get(_ak_pool_heap *h) {
  return __atomic_load_n(&h->pub.live, __ATOMIC_RELAXED) +
         __atomic_load_n(&h->pub.cur.hot_used, __ATOMIC_RELAXED) -
         __atomic_load_n(&h->hot_base, __ATOMIC_RELAXED);
}
static inline void live_add(_ak_pool_heap *h, size_t n) { _AK_POOL_STORE(h->pub.live, h->pub.live + n); }
static inline void live_sub(_ak_pool_heap *h, size_t n) { _AK_POOL_STORE(h->pub.live, h->pub.live - n); }

/* Checks the current slab back in: its free list and count return from the
 * inline state to the slab, so the slab layer sees it whole (owner only).
 * Returns the slab (NULL if none was checked out). */
static _ak_slab *heap_checkin(_ak_pool_heap *h) {
  if (h->pub.cur.hot_slab <= 1) return NULL;
  _ak_slab *s = _ak_pool_cur_writeback(&h->pub.cur);
  AK_ASSERT(s->heap == h);                        /* its own slab, checked out */
  live_add(h, h->pub.cur.hot_used - h->hot_base); /* see live_get */
  __atomic_store_n(&h->hot_base, 0, __ATOMIC_RELAXED);
  h->pub.cur.hot.first = NULL;
  __atomic_store_n(&h->pub.cur.hot_used, 0, __ATOMIC_RELAXED);
  h->pub.cur.hot_slab = 1;
  __atomic_thread_fence(__ATOMIC_RELEASE); /* unpublished before cleared (heap_out) */
  h->pub.cur.bump = h->pub.cur.bump_end = 0;
  return s;
}

/* The calling thread's heap for `p` (heaps.c); creates one if `create`. */
__attribute__((noinline)) _ak_pool_heap *_ak_threads_heap_find(_ak_pool_impl *p, bool create);

/* The calling thread's heap for `p`: one direct-mapped cache probe inline,
 * the search and creation out of line. */
static inline _ak_pool_heap *heap_get(_ak_pool_impl *p, bool create) {
  const _ak_pool_tentry *e = _ak_pool_tentry_of(_ak_pool_key(p));
  if (AK_LIKELY(e->key == _ak_pool_key(p))) return (_ak_pool_heap *)e->state.heap;
  return _ak_threads_heap_find(p, create);
}

/* heaps.c, under the locks each states: the abandoned slabs' remote lists
 * collected and the empty ones given back (released if `release`); the
 * pool's live objects; the mode's counts, stats, tick and fork hooks
 * (_ak_pool_mode). */
void _ak_threads_collect_abandoned(_ak_pool_impl *p, bool release);
size_t _ak_threads_live(_ak_pool_impl *p);
void _ak_threads_counts(_ak_pool_impl *p, size_t *live, size_t *peak);
void _ak_threads_stats(_ak_pool_impl *p, ak_pool_stats *out);
uint64_t _ak_threads_tick(_ak_pool_impl *p);
void _ak_threads_fork_lock(_ak_pool_impl *p);
void _ak_threads_fork_unlock(_ak_pool_impl *p);
void _ak_threads_fork_child(_ak_pool_impl *p);

#endif
