/* SPDX-License-Identifier: MIT */
/* placement.h - where a slab that gained a free slot goes, for the owners
 * of slab lists (the serial core of NONE and SPINLOCK, THREADS' heaps):
 * `avail` kept fullest first, `pending` for slabs that left `full`, placed
 * in one batch when `avail` runs dry; the defragmenter keeps `avail`
 * strictly sorted on every free. */
#ifndef AK_POOL_PLACEMENT_H
#define AK_POOL_PLACEMENT_H

#include "pool/pool.h"

/* The place is called for each pending slab in a batch (serial.h, the
 * heaps of modes/threads/) and, with the defragmenter, on every free into
 * a full slab; the settle is one load and a branch without the
 * defragmenter. */
/** Inserts `s` (just gained a free slot) into `list` by fullness: strictly
 *  sorted with the defragmenter, else within the first three positions
 *  (a bounded walk). */
static inline void _ak_pool_list_place(_ak_pool_impl *p, _ak_slab_list *list, _ak_slab *s) {
  AK_ASSERT(s->head.used < s->capacity); /* it has a free slot */
  bool strict = atomic_load_explicit(&p->defragment, memory_order_relaxed);
  _ak_slab *at = _ak_slab_first(list);
  /* Fullest first: skip slabs holding more objects. The walk is limited
   * to the first three positions; the defragmenter sorts exactly. */
  for (int depth = 0; at && at->head.used > s->head.used && (strict || depth < 2); depth++)
    at = _ak_slab_next(at);
  _ak_slab_list_insert_before(list, at, s, s->head.state ? s->head.state : AK_SLAB_AVAIL);
  /* Fullest first: strictly, every slab before `s` holds more objects. */
  AK_ASSERT(!strict || !_ak_slab_next(s) || _ak_slab_next(s)->head.used <= s->head.used);
}

/** `s` just left `full` by its owner's free: on `pending` (one list
 *  operation), or placed on `avail` at once with the defragmenter, which
 *  keeps `avail` sorted. Never made the current slab here: a slab that
 *  took the current slab's place on every free into a full slab would be
 *  filled again by the next allocation, and every free would be slow. */
static inline void _ak_pool_list_unfull(_ak_pool_impl *p, _ak_slab_list *avail, _ak_slab_list *pending,
                                        _ak_slab *s) {
  if (AK_UNLIKELY(atomic_load_explicit(&p->defragment, memory_order_relaxed)))
    _ak_pool_list_place(p, avail, s);
  else
    _ak_slab_pending_push(pending, s);
}

/** Places every pending slab on `avail` by fullness: the batch, run when
 *  `avail` has run dry (and by trim and reserve). A slab waits on
 *  `pending` for one batch of `avail` at least, gathering the owner's
 *  frees inline, so it comes back with many free slots, not one. Returns
 *  the free slots the batch placed. */
static inline size_t _ak_pool_pending_place(_ak_pool_impl *p, _ak_slab_list *avail, _ak_slab_list *pending) {
  size_t slots = 0;
  for (_ak_slab *s; (s = _ak_slab_first(pending)) != NULL;) {
    _ak_slab_list_remove(pending, s);
    slots += s->capacity - s->head.used;
    _ak_pool_list_place(p, avail, s);
  }
  AK_ASSERT(pending->n == 0); /* every pending slab placed */
  return slots;
}

/** Whether an owner whose `avail` ran dry has too few free slots left,
 *  `slots` in all: fewer than one slab holds. (The serial core counts its
 *  batch, which holds them all in NONE; SPINLOCK's magazines hold more, a
 *  bounded number, so its slack is bounded too. A THREADS heap counts the
 *  slots of its slabs less its live count, in which objects other threads
 *  freed and it has not collected still count, so their slabs take no
 *  slack.)
 *  A steady live count keeps the number of free slots as it is, so with a
 *  few of them spread over many slabs a slab fills again after a few
 *  allocations, and nearly every allocation and free takes the slow path
 *  (a slab leaves `avail` full, the next free into it takes it off
 *  `full`). The owner then adds one empty slab of slack at the back of
 *  `avail` (_ak_pool_slab_slack): from then on the batches hold a slab's
 *  worth of free slots, and the rule does not fire again while the live
 *  count holds. Not with release_empty (lowest memory, the user's
 *  choice). */
static inline bool _ak_pool_batch_thin(const _ak_pool_impl *p, size_t slots) {
  return slots < p->capacity && !p->release_empty;
}

/** After `s` lost an object: keeps a defragmented list sorted. */
static inline void _ak_pool_list_settle(_ak_pool_impl *p, _ak_slab_list *list, _ak_slab *s) {
  if (!atomic_load_explicit(&p->defragment, memory_order_relaxed)) return;
  AK_ASSERT(s->head.state != 0); /* on `list` */
  _ak_slab *at = _ak_slab_next(s);
  if (!at || at->head.used <= s->head.used) return;
  uint32_t which = s->head.state;
  _ak_slab_list_remove(list, s);
  while (at && at->head.used > s->head.used) at = _ak_slab_next(at);
  _ak_slab_list_insert_before(list, at, s, which);
  AK_ASSERT(!at || at->head.used <= s->head.used); /* sorted again around `s` */
}

#endif /* AK_POOL_PLACEMENT_H */
