/* SPDX-License-Identifier: MIT */
/* spinlock.c - AK_SYNC_SPINLOCK: per-thread magazines (modes/magazine/)
 * in front of the serial core (pool/serial.h) under one word lock
 * (common/wordlock.h).
 *
 *   _ak_mag_alloc, its magazine and stash empty -> spin_take: one
 *       critical section pops up to `want` slots, never-used ones as runs
 *       of addresses (_ak_serial_pop_run) that are linked into the chain
 *       after the unlock
 *   _ak_mag_free, its magazine full   -> spin_give: the chain read into
 *       an array of pointers outside the lock, then each slot pushed
 *       under it, at most AK_MAG_BATCH per critical section
 *
 * So no chain is walked under the lock, and a fresh slab's pages are
 * faulted in by the taker after its unlock, not while the other threads
 * wait. One take is one critical section: the slots it takes from a
 * fresh slab are contiguous, and no other thread's take cuts into them.
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

/* A take's runs of never-used slots, linked after the unlock. */
#define AK_SPIN_RUNS 8
typedef struct spin_run {
  char *first;
  uint32_t n;
} spin_run;

/* Appends `o` to the chain head..tail. */
static inline void chain_append(_ak_pool_impl *p, void **head, void **tail, void *o) {
  if (p->tracked) AK_TRACK_INTERNAL(o, sizeof(void *)); /* a fresh slot holds a link now */
  if (*tail)
    _ak_chain_set(p, *tail, o);
  else
    *head = o;
  *tail = o;
}

static uint32_t spin_take(_ak_pool_impl *p, void **chain, uint32_t want) {
  spin_run runs[AK_SPIN_RUNS];
  uint32_t nruns = 0, got = 0;
  void *head = NULL, *tail = NULL;
  _ak_slab *noted = NULL; /* hardened: the slab last added to the address range */
  spin_lock(p);
  while (got < want && nruns < AK_SPIN_RUNS) {
    /* A new slab only for the first object: a failure of the backing then
     * fails the very call that needed the memory (the rest of a take comes
     * from the slabs there are). */
    uint32_t k;
    void *o = _ak_serial_pop_run(p, got == 0, want - got, &k);
    if (!o) break;
    if (ak_harden_links && _ak_slab_of(o, p->slab_size) != noted) {
      noted = _ak_slab_of(o, p->slab_size);
      _ak_pool_note_slab(p, noted);
    }
    if (k > 1) /* never-used slots: linked after the unlock */
      runs[nruns++] = (spin_run){o, k};
    else /* a slot off a free list (its line was just read): linked now */
      chain_append(p, &head, &tail, o);
    got += k;
  }
  spin_unlock(p);
  /* Runs in address order: the magazine hands them out in that order, so
   * a batch continues the previous one's memory stream. The first write
   * to each slot (a fresh page's fault) happens here, outside the lock. */
  for (uint32_t r = 0; r < nruns; r++)
    for (uint32_t i = 0; i < runs[r].n; i++)
      chain_append(p, &head, &tail, runs[r].first + (size_t)i * p->slot);
  if (tail) _ak_chain_set(p, tail, NULL);
  AK_ASSERT(got <= want && (got == 0) == (head == NULL)); /* a chain of `got` objects */
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
  void *v[AK_MAG_BATCH];
  size_t n = 0;
  while (chain) {
    uint32_t k = 0;
    for (; chain && k < AK_MAG_BATCH; k++) { /* the links are read outside the lock */
      v[k] = chain;
      chain = _ak_chain_next(p, chain);
    }
    spin_lock(p);
    for (uint32_t i = 0; i < k; i++) _ak_serial_push(p, _ak_slab_of(v[i], p->slab_size), v[i], false);
    spin_unlock(p);
    n += k;
  }
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
