/* SPDX-License-Identifier: MIT */
/* count.h - the counts of a SPINLOCK or LOCKFREE magazine (internal to
 * modes/magazine/): `n` (the length of `list`), `base` (net + n) and
 * `seq`, and the owner's changes of them. count.c adds a magazine's net
 * to the pool's count (a flush) and reads the pool's live objects.
 *
 * Net, the magazine's allocations minus frees not yet in mag.live, is
 * base - n: a fast path changes n alone (a real allocation or free), so
 * base changes only on slow paths. Every slow-path change of base (with
 * or without n) lies inside _ak_mag_count_begin and _ak_mag_count_end:
 * `seq` is a sequence count with one writer, the owner, odd while a
 * change is under way; a reader that finds it even and unchanged around
 * its reads of base and n read them as of one instant (_ak_mag_live). */
#ifndef AK_POOL_MODES_MAGAZINE_COUNT_H
#define AK_POOL_MODES_MAGAZINE_COUNT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/assert.h"
#include "pool/modes/magazine/magazine.h"

static inline uint32_t _ak_mag_n(_ak_pool_mag *m) { return __atomic_load_n(&m->head.n, __ATOMIC_RELAXED); }
static inline void _ak_mag_n_set(_ak_pool_mag *m, uint32_t v) {
  __atomic_store_n(&m->head.n, v, __ATOMIC_RELAXED);
}
static inline intptr_t _ak_mag_base(_ak_pool_mag *m) {
  return atomic_load_explicit(&m->base, memory_order_relaxed);
}
static inline void _ak_mag_base_set(_ak_pool_mag *m, intptr_t v) {
  atomic_store_explicit(&m->base, v, memory_order_relaxed);
}
/* Allocations minus frees not yet in mag.live (exact from the owner or with no call running). */
static inline intptr_t _ak_mag_net(_ak_pool_mag *m) { return _ak_mag_base(m) - (intptr_t)_ak_mag_n(m); }

/* Owner: opens a change of base (`seq` odd). The release fence orders the
 * odd count before the change's stores: a reader that sees one of them,
 * or the mag.live a flush adds to, then sees the count changed. */
static inline void _ak_mag_count_begin(_ak_pool_mag *m) {
  unsigned s = atomic_load_explicit(&m->seq, memory_order_relaxed);
  AK_ASSERT((s & 1) == 0); /* changes do not nest */
  atomic_store_explicit(&m->seq, s + 1, memory_order_relaxed);
  atomic_thread_fence(memory_order_release);
}
/* Owner: closes the change (`seq` even again, after its stores). */
static inline void _ak_mag_count_end(_ak_pool_mag *m) {
  unsigned s = atomic_load_explicit(&m->seq, memory_order_relaxed);
  AK_ASSERT(s & 1); /* opened by _ak_mag_count_begin */
  atomic_store_explicit(&m->seq, s + 1, memory_order_release);
}

/* Owner: `list` now holds `n` objects, net unchanged (a batch came or went). */
static inline void _ak_mag_n_move(_ak_pool_mag *m, uint32_t n) {
  AK_ASSERT(n <= m->pool->mag.batch); /* `list` holds at most one batch */
  _ak_mag_count_begin(m);
  _ak_mag_base_set(m, _ak_mag_base(m) + (intptr_t)n - (intptr_t)_ak_mag_n(m));
  _ak_mag_n_set(m, n);
  _ak_mag_count_end(m);
}

/** Owner: adds `m`'s net to the pool's count and samples the high-water
 *  mark (slow paths only). */
void _ak_mag_net_flush(_ak_pool_impl *p, _ak_pool_mag *m);
/** Owner, at a refill or spill: flushes once net is AK_MAG_SETTLE batches off. */
void _ak_mag_net_settle(_ak_pool_impl *p, _ak_pool_mag *m);
/** The pool's live objects: mag.live plus each magazine's net as of one
 *  instant (takes p->mu). */
size_t _ak_mag_live(_ak_pool_impl *p);
/** The high-water mark of the live objects, raised to the live count now. */
size_t _ak_mag_peak(_ak_pool_impl *p);

#endif
