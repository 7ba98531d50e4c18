/* SPDX-License-Identifier: MIT */
/* count.c - a magazine's net into the pool's count (a flush), and the
 * reader of the pool's live objects (count.h has the owner's side). */
#define _GNU_SOURCE
#include "pool/modes/magazine/count.h"

#include <sched.h>
#include <stdbool.h>

/* Adds the magazine's count to the pool's and samples the high-water mark
 * (slow paths only: once per batch). */
void _ak_mag_net_flush(_ak_pool_impl *p, _ak_pool_mag *m) {
  intptr_t net = _ak_mag_net(m);
  _ak_mag_count_begin(m);
  _ak_mag_base_set(m, (intptr_t)_ak_mag_n(m));
  size_t live = atomic_fetch_add_explicit(&p->mag.live, (size_t)net, memory_order_release) + (size_t)net;
  _ak_mag_count_end(m);
  m->live_seen = live;
  if (net > 0) _ak_mag_peak_raise(p, live);
  AK_ASSERT(_ak_mag_net(m) == 0); /* the magazine's count is the pool's now */
}

/* A refill or spill adds the count to the pool's once it is AK_MAG_SETTLE
 * batches off: a thread cycling through its own stash touches the shared
 * line once per AK_MAG_SETTLE batches. The sampled peak misses at most
 * that, plus the batch the fast paths move before the next slow path. */
#define AK_MAG_SETTLE 8
void _ak_mag_net_settle(_ak_pool_impl *p, _ak_pool_mag *m) {
  intptr_t net = _ak_mag_net(m), bound = AK_MAG_SETTLE * (intptr_t)p->mag.batch;
  if (net >= bound || net <= -bound) _ak_mag_net_flush(p, m);
  AK_ASSERT(_ak_mag_net(m) < bound && _ak_mag_net(m) > -bound); /* settled within the bound */
}

/* A reader: `m`'s net as of one instant, in *net, and adds its count to
 * *seqs. False if a change was under way or came in between. */
static bool net_read(_ak_pool_mag *m, intptr_t *net, unsigned *seqs) {
  unsigned s = atomic_load_explicit(&m->seq, memory_order_acquire);
  *net = _ak_mag_net(m);
  atomic_thread_fence(memory_order_acquire); /* the reads above before the check */
  *seqs += s;
  return !(s & 1) && atomic_load_explicit(&m->seq, memory_order_relaxed) == s;
}

/* The sum of the magazines' counts (acquire: after the mag.live read). */
static unsigned seqs_now(_ak_pool_impl *p) {
  unsigned seqs = 0;
  for (_ak_pool_mag *m = _ak_mag_first(p); m; m = _ak_mag_next(m))
    seqs += atomic_load_explicit(&m->seq, memory_order_acquire);
  return seqs;
}

/* The pool's live objects: mag.live plus every magazine's net, taken as of
 * one instant per magazine. Each read net is checked against its count
 * (net_read), mag.live is read next, and the counts are summed again: a
 * count only grows, so an equal sum means no magazine changed base or
 * flushed between its read and the mag.live read. A flush counted in both
 * (net read before it, its add seen) changed its count in between; one
 * counted in neither (net read after it, its add not seen) cannot happen,
 * as the net was read first. The fast paths change n alone, which is a
 * real allocation or free. Owners that keep changing their counts leave
 * the last sum after AK_MAG_READ_TRIES tries (stats are then approximate
 * by the batches in flight; the drain checks only compare with 0). Under
 * p->mu (the list is fixed; a thread exit's transfer waits). */
#define AK_MAG_READ_TRIES 100
size_t _ak_mag_live(_ak_pool_impl *p) {
  _ak_pool_lock(&p->mu);
  intptr_t live = 0;
  for (int tries = 0; tries < AK_MAG_READ_TRIES; tries++) {
    if (tries > 8) sched_yield(); /* an owner preempted inside a change */
    bool whole = true;
    unsigned seqs = 0;
    intptr_t sum = 0;
    for (_ak_pool_mag *m = _ak_mag_first(p); m; m = _ak_mag_next(m)) {
      intptr_t net;
      whole &= net_read(m, &net, &seqs);
      sum += net;
    }
    live = sum + (intptr_t)atomic_load_explicit(&p->mag.live, memory_order_acquire);
    if (whole && seqs_now(p) == seqs) break;
  }
  _ak_pool_unlock(&p->mu);
  return live < 0 ? 0 : (size_t)live;
}

size_t _ak_mag_peak(_ak_pool_impl *p) {
  size_t live = _ak_mag_live(p), peak = atomic_load(&p->mag.peak);
  return live > peak ? live : peak;
}
