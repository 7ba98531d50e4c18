/* SPDX-License-Identifier: MIT */
/* serial.h - the serial core (internal): one owner's lists of slabs, kept
 * fullest first, with exact counts. AK_SYNC_NONE uses it directly, its
 * current slab checked out to the inline paths (modes/none.c);
 * AK_SYNC_SPINLOCK under its lock, as the shared structure behind its
 * magazines (modes/spinlock.c). The caller serialises every call.
 *
 * Slabs with free slots are on `avail`, fullest first (the head serves
 * allocations), slabs without on `full`; a free into a full slab puts it
 * on `pending` (O(1), no walk; the inline paths free into it from then
 * on), and the pending slabs are placed by fullness in one batch when
 * `avail` runs dry; an empty slab goes to the spare set unless it is the
 * last one with free slots. Invariant (no slab checked out): live == the
 * sum of `used` over `avail`, `pending` and `full`. */
#ifndef AK_POOL_SERIAL_H
#define AK_POOL_SERIAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pool/placement.h"
#include "pool/slab/spares.h"

/** Whether the current slab is checked out to the inline paths, which
 * count nothing: in AK_SYNC_NONE unless a check, a tool or the
 * defragmenter (which must see every free to keep its order) needs the
 * slow path. */
static inline bool _ak_serial_inline(const _ak_pool_impl *p) {
  /* inline_ok: the caller's headers encode links exactly when this build
   * does (ak_pool_create_inline); otherwise their inline paths would
   * corrupt or misread the lists. */
  return p->sync == AK_SYNC_NONE && p->inline_ok && !_ak_config_checked && !p->tracked &&
         p->max_objects == 0 && !atomic_load_explicit(&p->defragment, memory_order_relaxed);
}

/** Live objects of the serial core. With the inline paths on, calls do
 *  not count, so the slabs are summed (the current slab's count is in the
 *  public head while it is checked out). */
size_t _ak_serial_live(const _ak_pool_impl *p);

/** Places the pending slabs on `avail` by fullness (the batch). */
static inline void _ak_serial_place_pending(_ak_pool_impl *p) {
  _ak_pool_pending_place(p, &p->serial.avail, &p->serial.pending);
}

/** `avail`'s head left it (full): the pending batch is placed if `avail`
 *  ran dry, with a slab of slack at its back if the batch was thin and the
 *  caller `may_grow` (placement.h). */
static inline void _ak_serial_head_left(_ak_pool_impl *p, bool may_grow) {
  if (p->serial.avail.n || !p->serial.pending.n) return;
  size_t slots = _ak_pool_pending_place(p, &p->serial.avail, &p->serial.pending);
  _ak_slab *s;
  if (may_grow && _ak_pool_batch_thin(p, slots) && (s = _ak_pool_slab_slack(p, &p->spares)) != NULL)
    _ak_slab_list_push_back(&p->serial.avail, s, AK_SLAB_AVAIL);
}

/** Pops slots for the serial core from the head of `avail` (fullest
 * first), or a spare or (if `may_grow`) new slab: one slot, or a run of up
 * to `max` never-used ones (_ak_slab_pop_run); *n gets the count, counted
 * in p->serial.live. No cap, no checks. */
static inline void *_ak_serial_pop_run(_ak_pool_impl *p, bool may_grow, uint32_t max, uint32_t *n) {
  AK_ASSERT(p->pub.cur.hot_slab <= 1); /* no slab checked out to the inline paths */
  _ak_slab *s = _ak_slab_first(&p->serial.avail);
  void *o = s ? _ak_slab_pop_run(s, max, n) : NULL;
  while (!o) {
    /* The inline path may have emptied the head slab's list: list it full. */
    if (s) {
      _ak_slab_list_remove(&p->serial.avail, s);
      _ak_slab_list_push_back(&p->serial.full, s, AK_SLAB_FULL);
    }
    _ak_serial_head_left(p, may_grow);
    s = _ak_slab_first(&p->serial.avail);
    if (!s) {
      if (_ak_serial_inline(p)) { /* sample the high-water mark as memory grows */
        size_t live = _ak_serial_live(p);
        if (live > p->serial.peak_live) p->serial.peak_live = live;
      }
      s = may_grow ? _ak_pool_slab_get(p) : _ak_pool_slab_spare(p, &p->spares);
      if (!s) return NULL;
      _ak_slab_list_push_front(&p->serial.avail, s, AK_SLAB_AVAIL);
    }
    o = _ak_slab_pop_run(s, max, n);
  }
  if (!s->head.free.first && s->bump == s->end) {
    AK_ASSERT(s->head.used == s->capacity); /* no free slot: every slot is out */
    AK_ASSERT(_ak_slab_validate(s, "_ak_serial_pop"));
    _ak_slab_list_remove(&p->serial.avail, s);
    _ak_slab_list_push_back(&p->serial.full, s, AK_SLAB_FULL);
    _ak_serial_head_left(p, may_grow);
  }
  p->serial.live += *n;
  if (p->serial.live > p->serial.peak_live) p->serial.peak_live = p->serial.live;
  return o;
}

/** Pops one slot (_ak_serial_pop_run's). */
static inline void *_ak_serial_pop(_ak_pool_impl *p, bool may_grow) {
  uint32_t n;
  return _ak_serial_pop_run(p, may_grow, 1, &n);
}

/** Pushes slot `o` of slab `s` back: re-places the slab, releases it when
 * empty. Catches the double frees a cheap check sees (and, hardened with
 * `search`, any on the slab's list; a SPINLOCK magazine searched when the
 * object was freed, see modes/spinlock.c, and its chain links would make
 * every object of a spilled batch look free). */
static inline void _ak_serial_push(_ak_pool_impl *p, _ak_slab *s, void *o, bool search) {
  AK_ASSERT(p->pub.cur.hot_slab <= 1 && s->head.pool == p); /* nothing checked out; a slab of p */
  if (AK_UNLIKELY(o == s->head.free.first) ||
      (ak_harden_double_free && search && _ak_slab_is_free(s, o, true)))
    _ak_pool_double_free(p, o);
  bool was_full = s->head.state == AK_SLAB_FULL;
  AK_ASSERT(was_full || s->head.state == AK_SLAB_AVAIL); /* a slab with live objects is listed */
  _ak_slab_push(s, o);
  AK_ASSERT(!was_full || _ak_slab_validate(s, "_ak_serial_push")); /* one free slot: a short walk */
  p->serial.live--;
  if (was_full) {
    _ak_slab_list_remove(&p->serial.full, s);
    _ak_pool_list_unfull(p, &p->serial.avail, &p->serial.pending, s);
  } else if (!(s->flags & AK_SLAB_F_PENDING)) {
    _ak_pool_list_settle(p, &p->serial.avail, s);
  }
  /* An empty slab goes back at once, unless it is the only one left to
   * allocate from (then alloc/free of one object does not map and unmap). */
  if (s->head.used == 0 && p->serial.avail.n + p->serial.pending.n > 1) {
    _ak_slab_list_remove(_ak_slab_avail_list(s, &p->serial.avail, &p->serial.pending), s);
    _ak_pool_slab_put(p, &p->spares, s);
  }
}

/** ak_pool_reserve: slabs onto `avail` until `n` objects fit without a
 *  new slab; 0 or an errno. */
int _ak_serial_reserve(_ak_pool_impl *p, size_t n);
/** ak_pool_trim: drains the spare set, releases the empty slabs. */
void _ak_serial_trim(_ak_pool_impl *p);
/** ak_pool_destroy: releases the slabs of both lists. */
void _ak_serial_release(_ak_pool_impl *p);
/** Live objects and their sampled high-water mark. */
void _ak_serial_counts(_ak_pool_impl *p, size_t *live, size_t *peak);

#endif /* AK_POOL_SERIAL_H */
