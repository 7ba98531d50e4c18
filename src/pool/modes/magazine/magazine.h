/* SPDX-License-Identifier: MIT */
/* magazine.h - the per-thread magazine of AK_SYNC_SPINLOCK and
 * AK_SYNC_LOCKFREE (internal to modes/magazine/): its fields, the pool's
 * list of them, the shared structure behind them (through the mode
 * table), and the stash of whole batches (stash.c) that keeps the objects
 * a thread freed for that thread. magazine.c is the front (alloc, free,
 * thread exit, trim), count.h and count.c keep the counts; stash.c calls
 * nothing of magazine.c. */
#ifndef AK_POOL_MODES_MAGAZINE_H
#define AK_POOL_MODES_MAGAZINE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "pool/batch.h"
#include "pool/modes.h"

struct _ak_pool_mag {
  /* The owner's line. The inline paths' part (arenakit/detail/pool.h):
   * - list: at most a batch (pool->mag.batch) of objects; read and written by the owner
   *   while it is marked (busy), by a taker once it has waited the owner
   *   out (steal_chain), both with __atomic builtins (list_take, list_put);
   * - n: owner stores, stats read: the length of `list` as the owner last
   *   left it (stale once a thief took the chain: the owner then finds
   *   `list` NULL and drops it, see claim_lost);
   * - hi: owner: a free that finds n >= hi takes the slow path
   *   (free_slow): the spill at a batch, the drain check, and every
   *   free of a counted magazine (hi 0). Recomputed by every slow path
   *   (set_hi). */
  _ak_pool_maghead head;
  _Atomic(void *) full; /* NULL or a spilled batch of full_n objects */
  uint32_t full_n;      /* owner: length of `full` (pool->mag.batch) */
  /* The stash: whole batches the thread spilled, kept for its own next
   * allocations (pool/batch.h's lock-free stack: the owner pushes and
   * pops, another thread pops one (steal) or takes all (flush) with a CAS). */
  _Atomic uint64_t stash;
  atomic_intptr_t stash_n; /* objects in the stash (the owner adds after its push; a taker
                              subtracts after its pop, so it may be briefly below 0) */
  size_t owed;             /* owner: objects taken from the shared structure (or stolen)
                              minus objects given back: the stash holds at most this many */
  bool stashes;            /* the pool's batches fit its slots and no hardened search needs
                              spilled batches in the shared structure (stash_on) */
  uint32_t takes;          /* owner: batches taken from the shared structure since the
                              last drain_self (see there) */
  bool counted;            /* owner: every call takes the slow path (max_objects: the
                              exact count; checked or tracked builds: the hooks) */
  size_t live_seen;        /* owner: mag.live as of its last flush */
  /* Owner stores, stats read: net + n, where net (allocations minus frees
   * not yet added to mag.live) is base - n. A fast path changes n by one
   * and net by the opposite one, so base changes only on slow paths: the
   * fast paths keep no count of their own. */
  _Atomic intptr_t base;
  /* Owner stores, stats read: a sequence count with one writer around
   * every slow-path change of base (count.h): odd while one is under
   * way, so that a reader gets net and mag.live as of one instant
   * (_ak_mag_live). The fast paths change n alone: no count. */
  atomic_uint seq;
  _ak_pool_impl *pool;
  _ak_dnode node; /* on the pool's magazine list (under mu) */
};

/* The pool's magazines in list order (under mu). */
static inline _ak_pool_mag *_ak_mag_of(const _ak_dnode *n) {
  return _AK_DLIST_ENTRY((_ak_dnode *)(uintptr_t)n, _ak_pool_mag, node);
}
static inline _ak_pool_mag *_ak_mag_first(const _ak_pool_impl *p) { return _ak_mag_of(p->mag.list.head); }
static inline _ak_pool_mag *_ak_mag_next(const _ak_pool_mag *m) { return _ak_mag_of(m->node.next); }

/* ---- the shared structure of each mode (the mode table's take and give) ---- */

static inline uint32_t _ak_mag_shared_take(_ak_pool_impl *p, void **chain, uint32_t want) {
  uint32_t n = p->mode->take(p, chain, want);
  AK_ASSERT(n <= want && (n == 0 || *chain != NULL)); /* at most `want`, as a chain */
  return n;
}

/* `n`: the chain's length if known (at most a batch), else 0. */
static inline void _ak_mag_shared_give(_ak_pool_impl *p, void *chain, uint32_t n) {
  if (!chain) return;
  AK_ASSERT(n <= p->mag.batch); /* a known length is at most one batch */
  p->mode->give(p, chain, n);
}

/* Owner: `n` objects went back to the shared structure. */
static inline void _ak_mag_owed_sub(_ak_pool_mag *m, size_t n) { m->owed = m->owed > n ? m->owed - n : 0; }

/* ---- stash.c: the thread's own batches first ---- */

/** Sets whether `m` (new, of pool `p`) stashes its batches. */
void _ak_stash_init(_ak_pool_impl *p, _ak_pool_mag *m);
/** Owner: one batch for `m` from its stash, else the shared structure,
 *  else (out of memory) another thread's stash, as a chain; its length
 *  (0: none, errno set). */
uint32_t _ak_stash_take(_ak_pool_impl *p, _ak_pool_mag *m, void **chain);
/** Owner: batch `c` (n objects, n known) leaves the magazine: into the
 *  stash, or to the shared structure past what the thread took. */
void _ak_stash_keep(_ak_pool_impl *p, _ak_pool_mag *m, void *c, uint32_t n);
/** Gives `v`'s whole stash to the shared structure (the owner, or another
 *  thread: one CAS takes it); the number of objects. */
size_t _ak_stash_give_all(_ak_pool_impl *p, _ak_pool_mag *v);
/** Every magazine's stash back to the shared structure (takes p->mu). */
void _ak_stash_flush_all(_ak_pool_impl *p);
/** A drain that found the pool empty: whether it gives its stash back now
 *  (at most once per reclaim release delay); if not, the pool's deferred drain is
 *  set, which _ak_stash_drain_due reports once it is due. */
bool _ak_stash_drain_now(_ak_pool_impl *p);
/** Whether a deferred drain is due now (and clears it); if one is
 *  deferred and not due, *at is when it will be. */
bool _ak_stash_drain_due(_ak_pool_impl *p, uint64_t *at);

#endif /* AK_POOL_MODES_MAGAZINE_H */
