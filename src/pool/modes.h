/* SPDX-License-Identifier: MIT */
/* modes.h - what the sync modes share (internal): the mode instances, the
 * registry of per-thread state of the concurrent modes (modes/tls.c) and
 * the magazine front of SPINLOCK and LOCKFREE (modes/magazine/), which
 * reaches the shared structure behind it through the mode table (`take`,
 * `give`, `on_lists`). The files of modes/ include this header, never
 * each other's. */
#ifndef AK_POOL_MODES_H
#define AK_POOL_MODES_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pool/pool.h"

/** The modes (pool.c's mode table by ak_sync). */
extern const _ak_pool_mode _ak_mode_none, _ak_mode_spinlock, _ak_mode_lockfree, _ak_mode_threads;

/* ---- modes/tls.c: per-thread, per-pool state of THREADS, SPINLOCK, LOCKFREE ---- */

/** What a mode does with its per-thread state (a heap, a magazine): one
 *  static instance per mode, _ak_threads_tls and _ak_mag_tls. Lock order:
 *  the registry's g_mu, then the pool's `mu`, then its spinlock. */
struct _ak_tls_mode {
  /** Makes the calling thread's state for `p` and links it into the
   *  pool's list of states (under p->mu). NULL if out of memory. */
  void *(*create)(_ak_pool_impl *p);
  /** Thread exit, under g_mu, for each state of the thread whose pool is
   *  still registered: hands what the state holds back to `p` (under
   *  p->mu), unlinks it and frees it. */
  void (*thread_exit)(_ak_pool_impl *p, void *state);
  /** Pool destroy, under g_mu, once `p` left the registry (so no thread
   *  exit reaches its states): frees every thread's state of `p` and drops
   *  `p` from the mode's own cache of the calling thread (modes/tls.c drops
   *  it from _ak_pool_tcache). */
  void (*destroy)(_ak_pool_impl *p);
  /** Thread exit, after the walk: empties the mode's own thread-local
   *  cache, whose entries may point to freed states (NULL: the mode has
   *  none besides _ak_pool_tcache, which modes/tls.c empties). */
  void (*forget)(void);
};

/** Registers a new THREADS, SPINLOCK or LOCKFREE pool with its mode's
 *  hooks (sets p->tls_mode); makes the thread-exit key on first use. */
void _ak_tls_register(_ak_pool_impl *p, const _ak_tls_mode *mode);
/** Unregisters `p` (ak_pool_destroy): under g_mu, takes it out of the
 *  registry and calls its mode's `destroy`. Afterwards no thread exit
 *  touches `p`. */
void _ak_tls_unregister(_ak_pool_impl *p);
/** fork(): takes (releases) the registry's g_mu (registry.c's fork handlers,
 *  after g_pools_mu and before any pool's own locks). */
void _ak_tls_fork_lock(void);
void _ak_tls_fork_unlock(void);
/** The calling thread's state for `p` from the thread's table (the slow
 *  lookup behind each mode's cache). If there is none and `create`: makes
 *  room (pruning entries of destroyed pools, then growing), makes one with
 *  the mode's `create`, adds it and arms the thread-exit walk. NULL if none
 *  (or out of memory). */
void *_ak_tls_get(_ak_pool_impl *p, bool create);
/** A pool's key in _ak_pool_tcache (its `tkey` or `mkey` when its inline
 *  paths are on). */
static inline uint64_t _ak_pool_key(const _ak_pool_impl *p) { return p->id * AK_POOL_TCACHE_STEP; }
/** Stores the calling thread's _ak_pool_tcache entry of key `key` (a
 *  pool's _ak_pool_key): a signal handler that interrupts the store and runs an
 *  inline path finds the old entry or an empty one, never the key with
 *  another pool's state. */
void _ak_pool_tentry_store(uint64_t key, void *state);
/** Zeroed memory for a per-thread state of `size` bytes on cache lines of
 *  its own (the owner writes it on every call; another thread's state must
 *  not share a line); free() it. NULL if out of memory. */
void *_ak_tls_state_alloc(size_t size);

/** The hooks of AK_SYNC_THREADS heaps (modes/threads/). */
extern const _ak_tls_mode _ak_threads_tls;

/* ---- modes/magazine/: the per-thread front of SPINLOCK and LOCKFREE ----------- */

/** A pool's batch (_ak_mag_state.batch): a magazine refills and spills
 *  this many objects at a time and caches at most twice as many, outside
 *  its stash. Small objects move in larger batches, so that a batch is
 *  about AK_MAG_BATCH_BYTES: fewer trips to the slow path and the shared
 *  structure per object, with no more bytes per batch than a pool of
 *  larger objects moves (_ak_mag_batch_for). AK_MAG_BATCH bounds every
 *  batch (its length is stored in 16 bits: pool/batch.h). */
#define AK_MAG_BATCH 256u
#define AK_MAG_BATCH_MIN 64u
#define AK_MAG_BATCH_BYTES 16384u
/** The batch of a pool of `slot`-byte slots: AK_MAG_BATCH_BYTES / slot,
 *  within [AK_MAG_BATCH_MIN, AK_MAG_BATCH]. */
static inline uint32_t _ak_mag_batch_for(size_t slot) {
  size_t b = slot ? AK_MAG_BATCH_BYTES / slot : AK_MAG_BATCH;
  return b < AK_MAG_BATCH_MIN ? AK_MAG_BATCH_MIN : b > AK_MAG_BATCH ? AK_MAG_BATCH : (uint32_t)b;
}

/** The hooks of SPINLOCK and LOCKFREE magazines (modes/tls.c); `destroy`
 *  frees every magazine of the pool (their objects die with the slabs). */
extern const _ak_tls_mode _ak_mag_tls;
/** The init of SPINLOCK and LOCKFREE pools: the inline paths off
 *  (_ak_pool_inline_off), and p->alloc the counting variant of
 *  _ak_mag_alloc where every call must be counted (max_objects, the
 *  checked build's and the tools' hooks). */
void _ak_mag_init(_ak_pool_impl *p);
/** ak_pool_alloc / ak_pool_free of SPINLOCK and LOCKFREE pools. */
void *_ak_mag_alloc(_ak_pool_impl *p);
void _ak_mag_free(_ak_pool_impl *p, void *o);
/** Tests only: when set, called where a slow path of the magazine holds
 *  its chain (a test raises a signal there). */
extern void (*_ak_mag_test_point)(void);
/** Hands the contents of every thread's magazine back to the shared
 *  structure now: marks them all taken, one barrier (membarrier(2)), waits
 *  out each owner at work on its magazine, then takes it. */
void _ak_mag_flush_all(_ak_pool_impl *p);
/** A drain of the stashes that was deferred, done once due (the mode's
 *  `tick`): when it wants to run again (UINT64_MAX: nothing deferred). */
uint64_t _ak_mag_tick(_ak_pool_impl *p);
/** fork() child: no magazine of `p` is at work or being taken. */
void _ak_mag_fork_child(_ak_pool_impl *p);
/** Objects allocated and not yet freed (exact when no call is running;
 *  else each magazine's count as of one instant) and their high-water
 *  mark (exact with max_objects, else sampled), as _ak_pool_mode.counts. */
void _ak_mag_counts(_ak_pool_impl *p, size_t *live, size_t *peak);

/* ---- calls nested in the calling thread's own call (a signal handler) ---- */

/** An allocation from a signal handler that interrupted the calling thread
 *  inside the pool's code (_ak_pool_inside raised, or its magazine marked
 *  busy): the mode's alloc_nested, which waits for nothing; a mode without
 *  one refuses it (NULL, EDEADLK): the interrupted call may hold the lock
 *  or the per-thread state that a plain call would wait for. */
static inline void *_ak_pool_nested_alloc(_ak_pool_impl *p) {
  if (p->mode->alloc_nested) return p->mode->alloc_nested(p);
  _ak_pool_error(
      p, EDEADLK, "ak_pool_alloc",
      "called from a signal handler that interrupted a call of the pool's code on the same thread; "
      "only AK_SYNC_LOCKFREE pools serve such calls");
  return NULL;
}
/** The free of `o`, nested as _ak_pool_nested_alloc says: the mode's
 *  free_nested; a mode without one aborts with a message (the object
 *  cannot be given back without waiting, and a free has no error to
 *  return). */
static inline void _ak_pool_nested_free(_ak_pool_impl *p, void *o) {
  if (p->mode->free_nested) {
    p->mode->free_nested(p, o);
    return;
  }
  _ak_fatal(
      "ak_pool_free(%p): pool '%s': called from a signal handler that interrupted a call of the pool's "
      "code on the same thread; only AK_SYNC_LOCKFREE pools serve such calls",
      o, p->name);
}

/** Raises the high-water mark of magazine pools to `live` (any thread). */
static inline void _ak_mag_peak_raise(_ak_pool_impl *p, size_t live) {
  size_t peak = atomic_load_explicit(&p->mag.peak, memory_order_relaxed);
  while (live > peak && !atomic_compare_exchange_weak_explicit(&p->mag.peak, &peak, live,
                                                               memory_order_relaxed, memory_order_relaxed)) {
  }
}

/** Links of slots held by magazines and LOCKFREE batches: chains cross
 *  slabs, so each link is encoded with the key of the slab of the slot
 *  that stores it (_ak_slab_link of that slab). */
static inline void *_ak_chain_next(const _ak_pool_impl *p, const void *o) {
  return _ak_slab_link(_ak_slab_of(o, p->slab_size), o);
}
static inline void _ak_chain_set(const _ak_pool_impl *p, void *o, const void *next) {
  _ak_slab_set_link(_ak_slab_of(o, p->slab_size), o, next);
}

/** Hardened: could `next` be a slot of `p`? NULL, or within the address
 *  range of its slabs and on the slot grid of a slab; no memory is read (a
 *  wild value must not fault here). Inline: every magazine pop and free
 *  asks. The grid test is one multiplication (_ak_pool_on_grid's) where
 *  the slots span less than 2^32 bytes (slot_div), a division otherwise. */
static inline bool _ak_pool_plausible(const _ak_pool_impl *p, uintptr_t next) {
  if (next == 0) return true;
  uintptr_t lo = atomic_load_explicit(&p->mag.lo, memory_order_relaxed);
  if (next - lo >= atomic_load_explicit(&p->mag.hi, memory_order_relaxed) - lo) return false;
  uint64_t n = (uint64_t)((next & ~_ak_slab_mask(p->slab_size)) - p->pub.slot_first), div = p->pub.slot_div;
  if (AK_LIKELY(div != 0)) return n < p->pub.slot_span && n * div <= div - 1;
  return n < (uint64_t)p->capacity * p->slot && n % p->slot == 0;
}
/** Hardened: widens the address range of the slabs whose slots may be in
 *  chains to cover slab `s` (_ak_pool_plausible reads it). */
static inline void _ak_pool_note_slab(_ak_pool_impl *p, const _ak_slab *s) {
  if (!atomic_load(&p->mag.lo) || (uintptr_t)s < atomic_load(&p->mag.lo))
    atomic_store(&p->mag.lo, (uintptr_t)s);
  if ((uintptr_t)s + p->slab_size > atomic_load(&p->mag.hi))
    atomic_store(&p->mag.hi, (uintptr_t)s + p->slab_size);
  /* Under the mode's lock: `s` lies within the range now. */
  AK_ASSERT(atomic_load(&p->mag.lo) <= (uintptr_t)s &&
            (uintptr_t)s + p->slab_size <= atomic_load(&p->mag.hi));
}

#endif /* AK_POOL_MODES_H */
