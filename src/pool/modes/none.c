/* SPDX-License-Identifier: MIT */
/* none.c - AK_SYNC_NONE: the serial core (pool/serial.h) with no lock, its
 * current slab checked out to the inline paths in the pool's head.
 *
 * Call tree:
 *   ak_pool_alloc (inline)  pop `hot`, the current slab's free list
 *     -> ak_pool_alloc_slow -> none_alloc: cap check, _ak_serial_pop: head
 *          of `avail` (fullest first) or a spare or new slab, pop, full
 *          slabs move to `full`
 *   ak_pool_free (inline)   push `hot` when the slab is current
 *     -> ak_pool_free_slow -> none_free: the slab (_ak_pool_slab_find),
 *          checks, _ak_serial_push: push, full -> avail (placed by
 *          fullness), empty -> spare or backing
 * The current slab's free list and count are "checked out" into the
 * public head (`cur`); mirror_in/mirror_out move them back and forth
 * around every slow operation. */
#define _GNU_SOURCE
#include <errno.h>

#include "pool/modes.h"
#include "pool/serial.h"

/* Checks the current slab back in. If the inline free emptied it while
 * other slabs have free slots, it goes back now (fullest first). */
static void mirror_in(_ak_pool_impl *p) {
  if (p->pub.cur.hot_slab <= 1) return;
  _ak_slab *s = _ak_pool_cur_writeback(&p->pub.cur);
  /* The current slab is the head of `avail`, its state checked out. */
  AK_ASSERT(s->head.state == AK_SLAB_AVAIL && _ak_slab_first(&p->serial.avail) == s);
  p->pub.cur.hot.first = NULL;
  p->pub.cur.hot_slab = 0;
  p->pub.cur.bump = p->pub.cur.bump_end = 0;
  p->pub.alt = NULL; /* its list and count live in its header: nothing to copy */
  if (s->head.used == 0 && p->serial.avail.n + p->serial.pending.n > 1) {
    _ak_slab_list_remove(&p->serial.avail, s);
    _ak_pool_slab_put(p, &p->spares, s);
  }
  /* Slabs the inline allocations filled (the current one and `alt`) go on
   * `full` now, so that a slab a free gives a slot is placed against a
   * head with free slots (serial.h). */
  while ((s = _ak_slab_first(&p->serial.avail)) != NULL && !s->head.free.first && s->bump == s->end) {
    _ak_slab_list_remove(&p->serial.avail, s);
    _ak_slab_list_push_back(&p->serial.full, s, AK_SLAB_FULL);
    _ak_serial_head_left(p, true);
  }
  AK_ASSERT(p->pub.cur.hot_slab == 0 && p->pub.alt == NULL); /* nothing checked out */
}

static void mirror_out(_ak_pool_impl *p) {
  if (!_ak_serial_inline(p)) {
    _ak_pool_inline_off(p);
    return;
  }
  p->pub.cur.mask = _ak_slab_mask(p->slab_size);
  _ak_slab *s = _ak_slab_first(&p->serial.avail);
  if (s) {
    /* Never-used slots go out by address inline, unless they must be
     * shuffled: then they are carved into `hot` in random order. */
    bool shuffled = _ak_slab_shuffled(s);
    if (shuffled && !s->head.free.first && s->bump < s->end) _ak_slab_carve(s, AK_POOL_CARVE_BYTES);
    p->pub.cur.hot.first = s->head.free.first;
    p->pub.cur.hot_used = s->head.used;
    p->pub.cur.hot_slab = (uintptr_t)s;
    AK_ASSERT(s->head.state == AK_SLAB_AVAIL &&
              s->head.used <= s->capacity); /* the head of `avail` goes out */
    p->pub.cur.hot_key = s->head.key;       /* the links of `hot` are encoded with it */
    p->pub.cur.bump = s->bump;
    p->pub.cur.bump_end = shuffled ? s->bump : s->end;
    /* The next slab serves the inline allocations once this one is full
     * (allocation from the first two slabs): a working set that
     * straddles two slabs then takes no slow path for the slot it freed
     * in the other one. It stays on `avail`; the slow paths list it full
     * if the inline path emptied it (serial_pop). */
    p->pub.alt = (_ak_pool_slab_head *)_ak_slab_next(s);
    /* `alt` is listed with free slots too (the inline free's state test). */
    AK_ASSERT(!p->pub.alt || p->pub.alt->state == _AK_POOL_SLAB_AVAIL);
  } else {
    /* No current slab: 1, not 0, so that the inline free of NULL
     * (NULL & slab_mask == 0) never takes the current-slab branch. */
    p->pub.cur.hot.first = NULL;
    p->pub.cur.hot_used = 0;
    p->pub.cur.hot_slab = 1;
    p->pub.cur.bump = p->pub.cur.bump_end = 0;
    p->pub.alt = NULL;
  }
}

static void *none_alloc_locked(_ak_pool_impl *p) {
  if (p->max_objects && p->serial.live >= p->max_objects) {
    _ak_pool_error(p, ENOMEM, "ak_pool_alloc", "max_objects live objects already");
    return NULL;
  }
  void *o = _ak_serial_pop(p, true);
  AK_ASSERT(!o || !p->max_objects || p->serial.live <= p->max_objects); /* the cap holds */
  if (o && AK_UNLIKELY(p->debug)) {
    _ak_pool_mark_live(p, _ak_slab_of(o, p->slab_size), o);
    _ak_pool_track_alloc(p, o);
  }
  return o;
}

static void none_free_locked(_ak_pool_impl *p, void *o) {
  _ak_slab *s = _ak_pool_slab_find(p, o, "ak_pool_free");
  if (AK_UNLIKELY(p->debug)) {
    _ak_pool_mark_free(p, s, o, "ak_pool_free");
    _ak_pool_track_free(p, o);
  }
  _ak_serial_push(p, s, o, true);
}

static void *none_alloc(_ak_pool_impl *p) {
  _ak_spare_tick(&p->spares); /* spares due for the policy (one clock read) */
  mirror_in(p);
  void *o = none_alloc_locked(p);
  mirror_out(p);
  return o;
}

static void none_free(_ak_pool_impl *p, void *o) {
  _ak_spare_tick(&p->spares);
  mirror_in(p);
  none_free_locked(p, o);
  mirror_out(p);
}

static int none_reserve(_ak_pool_impl *p, size_t n) {
  mirror_in(p);
  int rc = _ak_serial_reserve(p, n);
  mirror_out(p);
  return rc;
}

static void none_trim(_ak_pool_impl *p) {
  mirror_in(p);
  _ak_serial_trim(p);
  mirror_out(p);
}

static void none_set_defragment(_ak_pool_impl *p, bool on) {
  mirror_in(p);
  /* The inline paths keep no count: recount before they may switch off
   * (with them off, stats and frees use p->serial.live). */
  p->serial.live = _ak_serial_live(p);
  _ak_serial_place_pending(p);
  atomic_store(&p->defragment, on);
  mirror_out(p);
}

const _ak_pool_mode _ak_mode_none = {
    .name = "none",
    .init = mirror_out,
    .alloc = none_alloc,
    .free = none_free,
    .reserve = none_reserve,
    .trim = none_trim,
    .set_defragment = none_set_defragment,
    .counts = _ak_serial_counts,
    .settle = mirror_in,
    .release = _ak_serial_release,
};
