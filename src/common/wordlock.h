/* SPDX-License-Identifier: MIT */
/* wordlock.h - a lock in one atomic int (internal, base layer).
 *
 * A test-and-test-and-set lock: one exchange when the lock is free, else
 * a load loop with exponential backoff (the CPU's spin-wait hint), then
 * sched_yield, so that it survives more threads than cores. For critical
 * sections of a few dozen instructions that never block: no fairness, no
 * recursion, no sleeping holder. The word is 0 when free, 1 when held. It
 * may be used by any component (the pool's slab table, its file backing
 * and AK_SYNC_SPINLOCK take it). Not async-signal-safe: a handler that
 * takes a lock its thread holds spins forever. */
#ifndef AK_WORDLOCK_H
#define AK_WORDLOCK_H

#include <stdatomic.h>

#include "arenakit/common.h"

/** The contended path of _ak_word_lock (out of line). */
void _ak_word_lock_slow(atomic_int *l);

/** Takes lock `l`; spins until it is free. */
static inline void _ak_word_lock(atomic_int *l) {
  if (AK_LIKELY(!atomic_exchange_explicit(l, 1, memory_order_acquire))) return;
  _ak_word_lock_slow(l);
}

/** Releases lock `l`, which the caller holds. */
static inline void _ak_word_unlock(atomic_int *l) { atomic_store_explicit(l, 0, memory_order_release); }

#endif /* AK_WORDLOCK_H */
