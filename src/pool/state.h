/* SPDX-License-Identifier: MIT */
/* state.h - the state each sync mode keeps in its pool (internal): the
 * members of the union in _ak_pool_impl (pool/pool.h). A pool holds the
 * state of its own mode only; the file that owns each part is named. */
#ifndef AK_POOL_STATE_H
#define AK_POOL_STATE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/list.h"
#include "pool/slab/slab.h"

/** The serial core (pool/serial.h): AK_SYNC_NONE, and AK_SYNC_SPINLOCK
 *  under its lock. */
typedef struct _ak_serial_state {
  _ak_slab_list avail;    /* slabs with free slots, fullest first */
  _ak_slab_list full;     /* slabs without free slots */
  _ak_slab_list pending;  /* slabs a free took off `full`, placed on `avail`
                             by fullness in one batch when it runs dry */
  size_t live, peak_live; /* exact, unless NONE's inline paths are on (_ak_serial_live) */
} _ak_serial_state;

/** AK_SYNC_LOCKFREE's slabs (modes/lockfree.c); its stack head is on the
 *  magazines' shared line (_ak_mag_state). */
typedef struct _ak_lockfree_state {
  _ak_slab_list full;  /* every slab carved onto the stack (trim, destroy) */
  _ak_slab_list spare; /* slabs taken down by a trim, their pages given back */
} _ak_lockfree_state;

/** The magazine front of AK_SYNC_SPINLOCK and AK_SYNC_LOCKFREE
 *  (modes/magazine/) and the shared words behind it. */
typedef struct _ak_mag_state {
  /* The shared words, all on one cache line (the pool is allocated
   * 64-aligned). A magazine touches them together once per batch (flush
   * its count, then lock or pop/push), so a batch costs one transfer of
   * this line between cores, not one per word; no fast path reads them. */
  _Alignas(64) atomic_int spin; /* SPINLOCK: the word lock around the serial core */
  _Atomic uint64_t lf_head;     /* LOCKFREE: tag << 48 | first slot of the top batch */
  /* LOCKFREE: slots outside the stack: in magazines, live, or being
   * popped (a popper adds a whole batch before its CAS and gives back the
   * excess). Never below the true count, so 0 proves that every slot is
   * on the stack (trim). */
  atomic_size_t lf_out;
  /* LOCKFREE: the reclaim clock (ms) when the stack was last taken down
   * for address order (0: never). */
  _Atomic uint64_t lf_reordered;
  /* live = this + the `net` of every magazine (exact when no thread is
   * inside a call; _ak_mag_live reads each net and this as of one
   * instant); with max_objects every call updates it, so it is exact at
   * all times and the cap is enforced with it. */
  atomic_size_t live, peak;
  /* Bookkeeping, off the contended line. */
  _Alignas(64) _ak_dlist list; /* magazines of live threads (under the pool's mu) */
  _Atomic uint64_t drained;    /* the reclaim clock (ms) when a drain last gave the stashes back */
  _Atomic uint64_t drain_at;   /* when a deferred drain is due (0: none; modes/magazine/stash.c) */
  atomic_uintptr_t lo, hi;     /* hardened: address range of the slabs in chains */
  uint32_t batch;              /* objects per batch (_ak_mag_batch_for), set at init */
} _ak_mag_state;

/** AK_SYNC_THREADS' shared state (modes/threads/); the rest is in each
 *  thread's heap. */
typedef struct _ak_threads_state {
  _ak_slab_list abandoned;               /* slabs of exited threads (under mu) */
  _ak_dlist heaps;                       /* live heaps of this pool (under mu) */
  _Alignas(64) atomic_size_t live, peak; /* only when max_objects != 0 */
  /* Bumped when a remote free may have given a slot to a slab on its
   * owner's full list: the owners walk their full lists only when it
   * changed (full_push). */
  atomic_size_t full_epoch;
  atomic_bool adoptable; /* set when a slab is abandoned; cleared under mu when none is */
  size_t gone_purged;    /* bytes the spare sets of exited heaps decommitted (under mu) */
} _ak_threads_state;

#endif /* AK_POOL_STATE_H */
