/* SPDX-License-Identifier: MIT */
/* stash.c - the stash of a SPINLOCK or LOCKFREE magazine: whole batches
 * the thread spilled, kept for its own next allocations (a lock-free
 * stack of pool/batch.h per magazine).
 *
 * Why: with one shared structure behind the magazines, the batches a
 * thread frees go to whichever thread takes next, and two threads on two
 * cores then trade cache lines on every object they touch. With a stash,
 * the objects a thread freed go back to that thread first: a refill pops
 * its own stash, then takes from the shared structure (AK_MAG_TAKE
 * objects at once, in whole batches, the rest stashed in order), and only when the pool is
 * out of memory another thread's stash. A spilled batch goes to the stash
 * while the stash holds no more than the thread took (`owed`), so a
 * thread that frees what others allocated passes the excess on, and the
 * stashes hold at most what each thread used at its peak.
 *
 * The owner pushes and pops its stash with a CAS on the tagged head (no
 * lock, async-signal-safe); another thread pops one batch (steal, under
 * p->mu, which keeps the magazine listed) or takes the whole stack with
 * one exchange (thread exit, trim, a drain), so no barrier is needed
 * against the owner. Stashes are off where a batch cannot be stacked
 * (one-word slots) and in the hardened double-free build, whose search
 * looks for a spilled object in the shared structure. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>

#include "common/reclaim.h"
#include "pool/modes/magazine/magazine.h"

/* A drain (the calling thread freed the pool's last live object) gives
 * the stash back at most once per release delay of the reclaim policy
 * (ak_reclaim_set_delays; -1: never), the first drain always: a loop that
 * empties the pool on every round takes its stash again on the next round,
 * and giving it to SPINLOCK's slabs costs one push per object. A stash so
 * waits no longer than an empty slab waits before it is unmapped. A
 * deferred drain is done by the next call or reclaim pass that finds it
 * due (_ak_stash_drain_due); thread exit and ak_pool_trim give the stash
 * back whatever the clock says. */
static long drain_period(void) {
  long release;
  ak_reclaim_get_delays(NULL, &release);
  return release;
}

/* Objects a stashing magazine asks the shared structure for at once (in
 * whole batches: AK_MAG_TAKE / batch of them, at least one): the
 * thread then allocates from memory that no other thread's take cut into
 * (a SPINLOCK take pops them in address order), so its accesses stay one
 * stream for the hardware prefetcher. */
#define AK_MAG_TAKE 2048u

void _ak_stash_init(_ak_pool_impl *p, _ak_pool_mag *m) {
  m->stashes = _ak_batch_ok(p) && !ak_harden_double_free;
}

/* Pops one batch of `v`'s stash (the owner, or a thief under p->mu). */
static uint32_t stash_pop(_ak_pool_impl *p, _ak_pool_mag *v, void **chain) {
  uint32_t n = _ak_batch_pop(p, &v->stash, chain);
  if (n) atomic_fetch_sub_explicit(&v->stash_n, (intptr_t)n, memory_order_relaxed);
  AK_ASSERT(n <= p->mag.batch && (n == 0) == (*chain == NULL)); /* one batch or none */
  return n;
}

size_t _ak_stash_give_all(_ak_pool_impl *p, _ak_pool_mag *v) {
  size_t total = 0;
  for (void *b = _ak_batch_take_all(&v->stash); b;) {
    uintptr_t w = _ak_batch_read(b);
    void *next = _ak_batch_next(p, b, w);
    uint32_t n = _ak_batch_len(w);
    if (AK_UNLIKELY(n == 0 || n > p->mag.batch) ||
        (ak_harden_links && AK_UNLIKELY(!_ak_pool_plausible(p, (uintptr_t)next))))
      _ak_batch_corrupt(p, b, next);
    _ak_mag_shared_give(p, b, n);
    total += n;
    b = next;
  }
  atomic_fetch_sub_explicit(&v->stash_n, (intptr_t)total, memory_order_relaxed);
  return total;
}

void _ak_stash_keep(_ak_pool_impl *p, _ak_pool_mag *m, void *c, uint32_t n) {
  if (!c) return;
  AK_ASSERT(n > 0 && n <= p->mag.batch); /* a whole batch of known length */
  if (m->stashes && (size_t)atomic_load_explicit(&m->stash_n, memory_order_relaxed) + n <= m->owed) {
    _ak_batch_push(p, &m->stash, c, c, n);
    atomic_fetch_add_explicit(&m->stash_n, (intptr_t)n, memory_order_relaxed);
    return;
  }
  _ak_mag_shared_give(p, c, n);
  _ak_mag_owed_sub(m, n);
}

/* The shared structure is out of memory: one batch from another thread's
 * stash. Not before: taking another thread's batches while it still
 * allocates leaves it short, and the shortfall would then pass from
 * thread to thread, each batch moving its cache lines across cores. */
static uint32_t steal(_ak_pool_impl *p, _ak_pool_mag *m, void **chain) {
  uint32_t n = 0;
  *chain = NULL;
  _ak_pool_lock(&p->mu);
  for (_ak_pool_mag *v = _ak_mag_first(p); v && !n; v = _ak_mag_next(v))
    if (v != m && atomic_load_explicit(&v->stash_n, memory_order_relaxed) > 0) n = stash_pop(p, v, chain);
  _ak_pool_unlock(&p->mu);
  return n;
}

/* Owner: `c` (n > one batch of objects, just taken): the objects after the
 * first batch go to the stash, in order; the first batch's length. */
static uint32_t stash_rest(_ak_pool_impl *p, _ak_pool_mag *m, void *c, uint32_t n) {
  void *o = c;
  for (uint32_t i = 1; i < p->mag.batch; i++) o = _ak_chain_next(p, o);
  void *rest = _ak_chain_next(p, o);
  _ak_chain_set(p, o, NULL);
  size_t stashed = _ak_batch_push_chain(p, &m->stash, rest);
  AK_ASSERT(stashed == n - p->mag.batch); /* the chain held n objects */
  atomic_fetch_add_explicit(&m->stash_n, (intptr_t)stashed, memory_order_relaxed);
  return p->mag.batch;
}

uint32_t _ak_stash_take(_ak_pool_impl *p, _ak_pool_mag *m, void **chain) {
  uint32_t n = 0;
  if (m->stashes && (n = stash_pop(p, m, chain)) != 0) return n;
  uint32_t b = p->mag.batch, want = m->stashes && AK_MAG_TAKE > b ? AK_MAG_TAKE / b * b : b;
  n = _ak_mag_shared_take(p, chain, want);
  if (!n && m->stashes) {
    int err = errno;
    if ((n = steal(p, m, chain)) == 0) errno = err;
  }
  m->owed += n;
  return n > b ? stash_rest(p, m, *chain, n) : n;
}

void _ak_stash_flush_all(_ak_pool_impl *p) {
  _ak_pool_lock(&p->mu);
  for (_ak_pool_mag *m = _ak_mag_first(p); m; m = _ak_mag_next(m)) (void)_ak_stash_give_all(p, m);
  _ak_pool_unlock(&p->mu);
}

bool _ak_stash_drain_now(_ak_pool_impl *p) {
  long period = drain_period();
  if (period < 0) return false; /* the policy never releases: neither does a drain */
  uint64_t last = atomic_load_explicit(&p->mag.drained, memory_order_relaxed), now = _ak_reclaim_now();
  if (last != 0 && now - last < (uint64_t)period) {
    atomic_store_explicit(&p->mag.drain_at, last + (uint64_t)period, memory_order_relaxed);
    return false;
  }
  atomic_store_explicit(&p->mag.drained, now ? now : 1, memory_order_relaxed);
  atomic_store_explicit(&p->mag.drain_at, 0, memory_order_relaxed);
  return true;
}

bool _ak_stash_drain_due(_ak_pool_impl *p, uint64_t *next) {
  uint64_t at = atomic_load_explicit(&p->mag.drain_at, memory_order_relaxed);
  if (AK_LIKELY(at == 0)) return false;
  uint64_t now = _ak_reclaim_now();
  if (now < at) {
    *next = at;
    return false;
  }
  if (!atomic_compare_exchange_strong(&p->mag.drain_at, &at, 0)) return false;
  atomic_store_explicit(&p->mag.drained, now ? now : 1, memory_order_relaxed);
  return true;
}
