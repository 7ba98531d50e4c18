/* SPDX-License-Identifier: MIT */
/* spinlock.c - AK_SYNC_SPINLOCK: per-thread magazines (modes/magazine/)
 * in front of the serial core (pool/serial.h) under one word lock
 * (common/wordlock.h), taken once per batch of objects (p->mag.batch).
 *
 *   _ak_mag_alloc, its magazine and stash empty -> spin_take: up to
 *       `want` _ak_serial_pop under one lock, handed back as a chain
 *   _ak_mag_free, its magazine full   -> spin_give: _ak_serial_push of each
 *       object of a chain under one lock
 * Lock order: the pool's `mu` (the magazine list), then this lock, then
 * the leaf locks (slab table, spare set, file backing). */
#define _GNU_SOURCE
#include <errno.h>

#include "common/track.h"
#include "common/wordlock.h"
#include "pool/modes.h"
#include "pool/serial.h"

static inline void spin_lock(_ak_pool_impl *p) { _ak_word_lock(&p->mag.spin); }
static inline void spin_unlock(_ak_pool_impl *p) { _ak_word_unlock(&p->mag.spin); }

static uint32_t spin_take(_ak_pool_impl *p, void **chain, uint32_t want) {
  const uint32_t n = want;
  void *head = NULL, *tail = NULL;
  uint32_t got = 0;
  _ak_slab *noted = NULL; /* hardened: the slab last added to the address range */
  spin_lock(p);
  for (; got < n; got++) {
    /* A new slab only for the first object: a failure of the backing then
     * fails the very call that needed the memory (the rest of a batch is
     * taken from the slabs there are). */
    void *o = _ak_serial_pop(p, got == 0);
    if (!o) break;
    if (p->tracked) AK_TRACK_INTERNAL(o, sizeof(void *)); /* a fresh slot holds a link now */
    if (ak_harden_links && _ak_slab_of(o, p->slab_size) != noted) {
      noted = _ak_slab_of(o, p->slab_size);
      _ak_pool_note_slab(p, noted);
    }
    /* In the order popped (a fresh slab's address order): the magazine
     * hands them out in that order, so a batch continues the previous
     * one's memory stream instead of walking back over it. */
    if (tail)
      _ak_chain_set(p, tail, o);
    else
      head = o;
    tail = o;
  }
  if (tail) _ak_chain_set(p, tail, NULL);
  spin_unlock(p);
  AK_ASSERT(got <= n && (got == 0) == (head == NULL)); /* a chain of `got` objects */
  *chain = head;
  return got;
}

/* Hardened: true if slot `o` of slab `s` is on the slab's free lists. The
 * magazine's double-free search asks it when a freed object's first word
 * looks like a link, so that spilled batches need no search. */
static bool spin_on_lists(_ak_pool_impl *p, _ak_slab *s, void *o) {
  spin_lock(p);
  bool found = _ak_slab_is_free(s, o, true);
  spin_unlock(p);
  return found;
}

static void spin_give(_ak_pool_impl *p, void *chain, uint32_t batch) {
  size_t n = 0;
  spin_lock(p);
  while (chain) {
    void *next = _ak_chain_next(p, chain);
    _ak_serial_push(p, _ak_slab_of(chain, p->slab_size), chain, false);
    chain = next;
    n++;
  }
  spin_unlock(p);
  AK_ASSERT(batch == 0 || n == batch); /* a full batch is one */
}

static int spin_reserve(_ak_pool_impl *p, size_t n) {
  spin_lock(p);
  int rc = _ak_serial_reserve(p, n);
  spin_unlock(p);
  return rc;
}

static void spin_trim(_ak_pool_impl *p) {
  _ak_mag_flush_all(p); /* every thread's magazine back to the slabs first */
  spin_lock(p);
  _ak_serial_trim(p);
  spin_unlock(p);
}

const _ak_pool_mode _ak_mode_spinlock = {
    .name = "spinlock",
    .tls = &_ak_mag_tls,
    .init = _ak_mag_init,
    .alloc = _ak_mag_alloc,
    .free = _ak_mag_free,
    .reserve = spin_reserve,
    .trim = spin_trim,
    .release = _ak_serial_release,
    .counts = _ak_mag_counts,
    .tick = _ak_mag_tick,
    .take = spin_take,
    .give = spin_give,
    .on_lists = spin_on_lists,
    .fork_lock = spin_lock,
    .fork_unlock = spin_unlock,
    .fork_child = _ak_mag_fork_child,
};
