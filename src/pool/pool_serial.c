/* SPDX-License-Identifier: MIT */
/* pool_serial.c - the serial core: slabs listed by the pool itself, used
 * by AK_SYNC_NONE (whose current slab is checked out to the inline paths
 * in the pool's head) and, under the spinlock, by AK_SYNC_SPINLOCK's
 * magazines (the shared structure behind them).
 *
 * Call tree:
 *   ak_pool_alloc (inline, NONE)  pop `hot`, the current slab's free list
 *     -> ak_pool_alloc_slow -> serial_alloc: cap check, serial_pop: head
 *          of `avail` (fullest first) or _ak_pool_slab_get (spare or new),
 *          pop, full slabs move to `full`
 *   ak_pool_free (inline, NONE)   push `hot` when the slab is current
 *     -> ak_pool_free_slow -> serial_free: slab by mask, checks,
 *          serial_push: push, full -> avail (placed by fullness), empty ->
 *          spare or backing
 *   SPINLOCK: _ak_mag_alloc (pool_magazine.c), when its magazine is empty,
 *          -> _ak_spin_take: up to 64 serial_pop under one lock; _ak_mag_free,
 *          when it is full, -> _ak_spin_give: serial_push of a batch
 * In AK_SYNC_NONE the current slab's free list and count are "checked out"
 * into the public head (`cur`); mirror_in/mirror_out move them back and
 * forth around every slow operation. */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/track.h"
#include "os/os_mem.h"
#include "pool/pool_internal.h"

/* ---- the serial core (AK_SYNC_NONE, AK_SYNC_SPINLOCK) ---------------------------- */

/* The inline paths are used in AK_SYNC_NONE unless a check, a tool or the
 * defragmenter (which must see every free to keep its order) needs the
 * slow path. */
static bool mirrored(const _ak_pool_impl *p) {
  /* inline_ok: the caller's headers encode links exactly when this build
   * does (ak_pool_create_inline); otherwise their inline paths would
   * corrupt or misread the lists. */
  return p->sync == AK_SYNC_NONE && p->inline_ok && !_ak_config_checked && !p->tracked &&
         p->max_objects == 0 && !atomic_load_explicit(&p->defragment, memory_order_relaxed);
}

/* Live objects of a serial-mode pool. With the inline paths on, calls do
 * not count, so the slabs are summed (the current slab's count is in the
 * public head while it is checked out). */
static size_t serial_live(const _ak_pool_impl *p) {
  if (!mirrored(p)) return p->live;
  size_t n = 0;
  for (const _ak_slab *s = _ak_slab_first(&p->avail); s; s = _ak_slab_next(s))
    n += (uintptr_t)s == p->pub.cur.hot_slab ? p->pub.cur.hot_used : s->used;
  for (const _ak_slab *s = _ak_slab_first(&p->full); s; s = _ak_slab_next(s)) n += s->used;
  AK_ASSERT(n <= (p->avail.n + p->full.n) * p->capacity);
  return n;
}

/* Checks the current slab back in. If the inline free emptied it while
 * other slabs have free slots, it goes back now (fullest first). */
static void mirror_in(_ak_pool_impl *p) {
  if (p->pub.cur.hot_slab <= 1) return;
  _ak_slab *s = _ak_pool_cur_writeback(&p->pub.cur);
  /* The current slab is the head of `avail`, its state checked out. */
  AK_ASSERT(s->list == AK_SLAB_AVAIL && _ak_slab_first(&p->avail) == s);
  p->pub.cur.hot.first = NULL;
  p->pub.cur.hot_slab = 0;
  p->pub.cur.bump = p->pub.cur.bump_end = 0;
  p->pub.alt = NULL; /* its list and count live in its header: nothing to copy */
  if (s->used == 0 && p->avail.n > 1) {
    _ak_slab_list_remove(&p->avail, s);
    _ak_pool_slab_put(p, s);
  }
}

static void mirror_out(_ak_pool_impl *p) {
  if (!mirrored(p)) {
    _ak_pool_inline_off(p);
    return;
  }
  p->pub.cur.mask = ~(uintptr_t)(p->slab_size - 1);
  _ak_slab *s = _ak_slab_first(&p->avail);
  if (s) {
    /* Never-used slots go out by address inline, unless they must be
     * shuffled: then they are carved into `hot` in random order. */
    bool shuffled = _ak_slab_shuffled(s);
    if (shuffled && !s->free && s->bump < s->end) _ak_slab_carve(s, AK_POOL_CARVE_BYTES);
    p->pub.cur.hot.first = s->free;
    p->pub.cur.hot_used = s->used;
    p->pub.cur.hot_slab = (uintptr_t)s;
    p->pub.cur.hot_key = s->key; /* the links of `hot` are encoded with it */
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

/* Pops one slot for the serial core: the head of `avail` (fullest first),
 * or a spare or (if `may_grow`) new slab; counts it in p->live. No cap, no
 * checks. */
static inline void *serial_pop(_ak_pool_impl *p, bool may_grow) {
  _ak_slab *s = _ak_slab_first(&p->avail);
  void *o = s ? _ak_slab_pop(s) : NULL;
  while (!o) {
    /* The inline path may have emptied the head slab's list: list it full. */
    if (s) {
      _ak_slab_list_remove(&p->avail, s);
      _ak_slab_list_push_back(&p->full, s, AK_SLAB_FULL);
    }
    s = _ak_slab_first(&p->avail);
    if (!s) {
      if (mirrored(p)) { /* sample the high-water mark as memory grows */
        size_t live = serial_live(p);
        if (live > p->peak_live) p->peak_live = live;
      }
      s = may_grow ? _ak_pool_slab_get(p) : _ak_pool_slab_spare(p);
      if (!s) return NULL;
      _ak_slab_list_push_front(&p->avail, s, AK_SLAB_AVAIL);
    }
    o = _ak_slab_pop(s);
  }
  if (!s->free && s->bump == s->end) {
    AK_ASSERT(s->used == s->capacity); /* no free slot: every slot is out */
    _ak_slab_list_remove(&p->avail, s);
    _ak_slab_list_push_back(&p->full, s, AK_SLAB_FULL);
  }
  p->live++;
  if (p->live > p->peak_live) p->peak_live = p->live;
  return o;
}

static void *serial_alloc(_ak_pool_impl *p) {
  if (p->max_objects && p->live >= p->max_objects) {
    _ak_pool_error(p, ENOMEM, "ak_pool_alloc", "max_objects live objects already");
    return NULL;
  }
  void *o = serial_pop(p, true);
  if (o && AK_UNLIKELY(p->debug)) {
    _ak_pool_mark_live(p, (_ak_slab *)((uintptr_t)o & ~(uintptr_t)(p->slab_size - 1)), o);
    _ak_pool_track_alloc(p, o);
  }
  return o;
}

/* Pushes slot `o` of slab `s` back: re-places the slab, releases it when
 * empty. Catches the double frees a cheap check sees (and, hardened with
 * `search`, any on the slab's list; a SPINLOCK magazine searched when the
 * object was freed, see _ak_spin_on_lists, and its chain links would make
 * every object of a spilled batch look free). */
static inline void serial_push(_ak_pool_impl *p, _ak_slab *s, void *o, bool search) {
  if (AK_UNLIKELY(o == s->free) || (ak_harden_double_free && search && _ak_slab_is_free(s, o, true)))
    _ak_pool_double_free(p, o);
  bool was_full = s->list == AK_SLAB_FULL;
  AK_ASSERT(was_full || s->list == AK_SLAB_AVAIL); /* a slab with live objects is listed */
  _ak_slab_push(s, o);
  p->live--;
  if (was_full) {
    _ak_slab_list_remove(&p->full, s);
    s->list = AK_SLAB_AVAIL;
    _ak_pool_list_place(p, &p->avail, s);
  } else {
    _ak_pool_list_settle(p, &p->avail, s);
  }
  /* An empty slab goes back at once, unless it is the only one left to
   * allocate from (then alloc/free of one object does not map and unmap). */
  if (s->used == 0 && p->avail.n > 1) {
    _ak_slab_list_remove(&p->avail, s);
    _ak_pool_slab_put(p, s);
  }
}

static void serial_free(_ak_pool_impl *p, void *o) {
  _ak_slab *s = _ak_pool_slab_fast(p, o, "ak_pool_free");
  if (AK_UNLIKELY(p->debug)) {
    _ak_pool_mark_free(p, s, o, "ak_pool_free");
    _ak_pool_track_free(p, o);
  }
  serial_push(p, s, o, true);
}

/* ---- the shared structure behind SPINLOCK magazines (pool_magazine.c) ---------- */

uint32_t _ak_spin_take(_ak_pool_impl *p, void **chain, uint32_t n) {
  void *head = NULL;
  uint32_t got = 0;
  _ak_slab *noted = NULL; /* hardened: the slab last added to the address range */
  _ak_spin_lock(p);
  for (; got < n; got++) {
    /* A new slab only for the first object: a failure of the backing then
     * fails the very call that needed the memory (the rest of a batch is
     * taken from the slabs there are). */
    void *o = serial_pop(p, got == 0);
    if (!o) break;
    if (p->tracked) AK_TRACK_INTERNAL(o, sizeof(void *)); /* a fresh slot holds a link now */
    if (ak_harden_links && _ak_pool_slab_base(p, o) != noted) {
      noted = _ak_pool_slab_base(p, o);
      _ak_pool_note_slab(p, noted);
    }
    _ak_chain_set(p, o, head);
    head = o;
  }
  _ak_spin_unlock(p);
  *chain = head;
  return got;
}

bool _ak_spin_on_lists(_ak_pool_impl *p, _ak_slab *s, void *o) {
  _ak_spin_lock(p);
  bool found = _ak_slab_is_free(s, o, true);
  _ak_spin_unlock(p);
  return found;
}

size_t _ak_spin_give(_ak_pool_impl *p, void *chain) {
  size_t n = 0;
  _ak_spin_lock(p);
  while (chain) {
    void *next = _ak_chain_next(p, chain);
    serial_push(p, _ak_pool_slab_base(p, chain), chain, false);
    chain = next;
    n++;
  }
  _ak_spin_unlock(p);
  return n;
}

/* ---- the serial core's reserve, trim and counts (NONE; SPINLOCK under its lock) ---- */

int _ak_serial_reserve(_ak_pool_impl *p, size_t n) {
  mirror_in(p);
  size_t room = 0;
  for (_ak_slab *s = _ak_slab_first(&p->avail); s; s = _ak_slab_next(s)) room += s->capacity - s->used;
  int rc = 0;
  while (room < n) {
    /* Spares are taken onto `avail`, not counted: the reclaim policy could
     * release them before they are used. */
    _ak_slab *s = _ak_pool_slab_spare(p);
    if (!s) s = _ak_pool_slab_new(p, "ak_pool_reserve");
    if (!s) {
      rc = errno ? errno : ENOMEM;
      break;
    }
    _ak_slab_list_push_back(&p->avail, s, AK_SLAB_AVAIL);
    room += p->capacity;
  }
  mirror_out(p);
  return rc;
}

void _ak_serial_trim(_ak_pool_impl *p) {
  mirror_in(p);
  _ak_spare_drain(&p->spares);
  for (_ak_slab *s = _ak_slab_first(&p->avail), *next; s; s = next) {
    next = _ak_slab_next(s);
    if (s->used == 0) {
      _ak_slab_list_remove(&p->avail, s);
      _ak_pool_slab_release(p, s);
    }
  }
  mirror_out(p);
}

void _ak_serial_counts(_ak_pool_impl *p, size_t *live, size_t *peak) {
  *live = serial_live(p);
  if (*live > p->peak_live) p->peak_live = *live;
  *peak = p->peak_live;
}

/* ---- AK_SYNC_NONE ------------------------------------------------------------------- */

static void *none_alloc(_ak_pool_impl *p) {
  _ak_spare_tick(&p->spares); /* spares due for the policy (one clock read) */
  mirror_in(p);
  void *o = serial_alloc(p);
  mirror_out(p);
  return o;
}

static void none_free(_ak_pool_impl *p, void *o) {
  _ak_spare_tick(&p->spares);
  mirror_in(p);
  serial_free(p, o);
  mirror_out(p);
}

static void none_set_defragment(_ak_pool_impl *p, bool on) {
  mirror_in(p);
  /* The inline paths keep no count: recount before they may switch off
   * (with them off, stats and frees use p->live). */
  p->live = serial_live(p);
  atomic_store(&p->defragment, on);
  mirror_out(p);
}

const _ak_pool_mode _ak_mode_none = {
    .name = "none",
    .init = mirror_out,
    .alloc = none_alloc,
    .free = none_free,
    .reserve = _ak_serial_reserve,
    .trim = _ak_serial_trim,
    .set_defragment = none_set_defragment,
    .counts = _ak_serial_counts,
    .settle = mirror_in,
};
