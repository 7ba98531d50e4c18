/* SPDX-License-Identifier: MIT */
/* arenakit/pool.h - the fixed-size object pool, `ak_pool`.
 *
 * A pool hands out objects of one size from slabs (aligned blocks, 64 KiB
 * by default, header first: an object's slab is found by masking its
 * address); a free slot holds the link to the next, so objects carry no
 * overhead. Slabs with free slots are kept fullest-first. An empty slab is
 * a spare under the reclaim policy (arenakit/reclaim.h): reused first,
 * purged after 250 ms, unmapped after 1 s (`release_empty`: at once).
 *
 * Synchronisation is chosen per pool (ak_sync): zeroed options give
 * AK_SYNC_THREADS; AK_SYNC_NONE, the fastest, is single-threaded. Only
 * AK_SYNC_LOCKFREE's alloc and free serve signal handlers (see there).
 *
 * Errors: NULL with errno (EINVAL, ENOMEM, a file operation's errno) and
 * ak_last_error() naming the call, pool and reason. Misuse (double free, a
 * foreign pointer, the wrong pool) aborts with a message where detected:
 * where cheap, and always in the checked build (AK_CHECKED). */
#ifndef ARENAKIT_POOL_H
#define ARENAKIT_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "arenakit/common.h"
#include "arenakit/detail/pool.h" /* the inline paths' state: not API */

#ifdef __cplusplus
extern "C" {
#endif

/** How a pool synchronises. */
typedef enum ak_sync AK_ENUM_INT {
  /** Default. Thread-owned slabs: a thread allocates from and frees to its
   *  own slabs without atomics or locks; a free from another thread is one
   *  atomic push. A thread's slabs are handed back when it exits. */
  AK_SYNC_THREADS = 0,
  AK_SYNC_NONE = 1, /**< no synchronisation: one thread at a time; inline fast paths */
  /** A spinlock (backoff, sched_yield()) behind per-thread magazines (two
   *  batches of 64-256 objects, ~16 KiB each; inline fast paths), a stash of
   *  the batches a thread freed, used first (another's only when the pool
   *  cannot grow); back at exit, trim, or emptying (paced: reclaim delays). */
  AK_SYNC_SPINLOCK = 2,
  /** A lock-free stack of batches of free objects (16-bit ABA
   *  tag on its head) behind magazines and stashes as in AK_SYNC_SPINLOCK.
   *  Slots >= 16 bytes; trimmed slabs are decommitted, never unmapped.
   *  Async-signal-safe alloc and free (README, "Signal handlers"): a call
   *  nested in its thread's own takes or gives a batch of the stack (a CAS;
   *  ENOMEM only if it is empty: ak_pool_reserve()); the other modes
   *  refuse it (NULL/EDEADLK; a free aborts with a message). */
  AK_SYNC_LOCKFREE = 3
} ak_sync;

/** Where slabs come from. */
typedef enum ak_backing AK_ENUM_INT {
  AK_BACKING_MMAP = 0, /**< anonymous memory from the OS layer (default) */
  AK_BACKING_HEAP = 1, /**< the C heap: aligned_alloc(slab_size, slab_size) */
  AK_BACKING_FILE = 2  /**< a MAP_SHARED mapping of the file at `path`, grown a
                            slab at a time, its blocks allocated (a full file
                            system gives NULL/ENOSPC, never SIGBUS); released
                            slabs are punched out, their offsets reused first */
} ak_backing;

/** Options for ak_pool_create(); zero means the default for every field. */
typedef struct ak_pool_options {
  size_t object_size; /**< bytes per object; required (> 0) */
  size_t align;       /**< power of two; 0 = natural alignment for the size
                           (largest power of two dividing it, max 16); a
                           slab's slots may be more aligned (up to 64) */
  size_t max_objects; /**< cap on live objects (0 = unlimited); past it,
                           ak_pool_alloc() returns NULL with ENOMEM */
  ak_sync sync;       /**< synchronisation; default AK_SYNC_THREADS */
  size_t slab_size;   /**< power of two >= page size; 0 = 64 KiB (grown to
                           hold at least 8 objects) */
  ak_backing backing; /**< default AK_BACKING_MMAP */
  const char *path;   /**< AK_BACKING_FILE: the file (created or truncated;
                           locked while the pool lives: EBUSY for another) */
  bool defragment;    /**< start with strict fullest-first ordering */
  size_t spare_slabs; /**< cap on the empty slabs kept for reuse (0: the
                           reclaim policy's delays only, a THREADS thread's
                           reused by it first); past it the oldest is unmapped.
                           release_empty: this many, undelayed. THREADS: each
                           thread also keeps this many, to ak_pool_trim/exit */
  const char *name;   /**< for messages and stats; copied; default "pool" */
  bool release_empty; /**< an emptied slab is unmapped at once, bar
                           `spare_slabs` kept until ak_pool_trim(), and no
                           slab of slack: lowest memory, churn faults again */
} ak_pool_options;

/** Statistics of one pool (ak_pool_stats_get()), version 2. */
typedef struct ak_pool_stats {
  unsigned version;      /**< AK_POOL_STATS_VERSION */
  size_t object_size;    /**< bytes per object as configured */
  size_t slot_size;      /**< bytes per slot (object size rounded) */
  size_t live;           /**< objects allocated, not yet freed (THREADS: remote
                              frees count until the owner collects them) */
  size_t peak_live;      /**< high-water mark of `live`: exact with max_objects, else sampled (off by
                              < 10 batches of 64-256 per thread in SPINLOCK and LOCKFREE, < one slab in
                              NONE; THREADS: < 8 slabs per thread past its own high, < 64 per other) */
  size_t slabs;          /**< slabs held (in use or spare) */
  size_t peak_slabs;     /**< high-water mark of `slabs`: exact while the pool
                              only grows, else sampled (at every stats call) */
  size_t bytes_reserved; /**< bytes of slabs held */
  size_t bytes_resident; /**< of those, resident (mincore; a file's: cached) */
  size_t slab_allocs;    /**< slabs obtained from the backing so far */
  size_t slab_releases;  /**< slabs given back so far */
  /* Version 2: the reclaim policy's view (arenakit/reclaim.h). */
  size_t bytes_committed; /**< bytes_reserved less purged spares' pages (a
                               purged slab keeps its header page) */
  size_t bytes_spare;     /**< bytes of empty slabs in the pool's spare set
                               (not THREADS' per-thread spares) */
  size_t bytes_purged;    /**< bytes of spares decommitted so far (cumulative) */
} ak_pool_stats;

#define AK_POOL_STATS_VERSION 2u

/** A pool. Opaque: its head, read by the inline paths, is not API. */
typedef struct ak_pool ak_pool;

/** Creates a pool, owned by the caller until ak_pool_destroy(). NULL with
 *  EINVAL if object_size is 0, align is not a power of two or exceeds the
 *  slab size, slab_size is not a power of two >= the page size, the object
 *  does not fit a slab, an enum is out of range, backing is FILE without a
 *  path (another with one) or the path is not a regular file; EBUSY if
 *  another pool has the file; the errno of open, ftruncate or a probe
 *  (ENODEV: /proc) if it cannot be mapped shared or allocated. Thread-safe. */
AK_API ak_pool *ak_pool_create(const ak_pool_options *opts);

/** ak_pool_create as these headers call it (`inline_abi` =
 *  AK_POOL_INLINE_ABI: their layout version and link encoding). Another
 *  layout version than the library's: NULL, EPROTO and a message to rebuild
 *  (inline paths never read a layout they were not compiled for); another
 *  link encoding: a pool whose calls all go to the library. */
AK_API ak_pool *ak_pool_create_inline(const ak_pool_options *opts, int inline_abi);
#define ak_pool_create(opts) ak_pool_create_inline((opts), AK_POOL_INLINE_ABI)

/** Destroys `p` and gives every slab back, live objects included (the checked
 *  build reports them). `p` must not be in use elsewhere. NULL is ignored. */
AK_API void ak_pool_destroy(ak_pool *p);

AK_API void *ak_pool_alloc_slow(ak_pool *p);          /* the slow paths of the */
AK_API void ak_pool_free_slow(ak_pool *p, void *obj); /* inline functions below */

/** Allocates one object, aligned to the pool's alignment, contents
 *  unspecified, owned by the caller until ak_pool_free() (valid until then
 *  or ak_pool_destroy()). NULL with ENOMEM when max_objects live objects
 *  exist or memory runs out. `p` must not be NULL. Thread-safety: as the
 *  pool's sync mode (signal handlers: AK_SYNC_LOCKFREE). Inline: the
 *  current slab's free list or never-used slots (AK_SYNC_NONE: the pool's,
 *  then the next slab's list; THREADS: the calling thread's heap's, no
 *  atomic operation; SPINLOCK, LOCKFREE: the thread's magazine: plain
 *  moves, no atomic exchange); else the library. */
AK_FAST_PATH AK_MALLOC_LIKE void *ak_pool_alloc(ak_pool *p) {
  void *o = _ak_pool_cur_pop_list(&p->cur, false);
  if (AK_LIKELY(o != NULL)) return o;
  /* Hardened: a corrupt link leaves `hot` set; the library reports it. */
  if (AK_POOL_INLINE_ENCODE && p->cur.hot.first != NULL) return ak_pool_alloc_slow(p);
  if (p->tkey) { /* AK_SYNC_THREADS: the thread's heap, if cached */
    const _ak_pool_tentry *e = _ak_pool_tentry_of(p->tkey);
    if (AK_LIKELY(e->key == p->tkey) &&
        AK_LIKELY((o = _ak_pool_cur_pop(&e->state.heap->cur, &p->slot, true)) != NULL))
      return o;
  } else if (p->cur.mask != 0) {
    /* AK_SYNC_NONE with the inline paths on (`mask` is 0 in every other
     * pool, which thus reaches the library after two tests): the current
     * slab's never-used slots, then the next slab's list. */
    if ((o = _ak_pool_cur_pop_bump(&p->cur, &p->slot, false)) != NULL) return o;
    if (p->alt != NULL && (o = _ak_pool_slab_pop(p->alt, p->cur.mask)) != NULL) return o;
  } else if ((o = _ak_pool_mag_alloc(p)) != NULL) { /* SPINLOCK, LOCKFREE: the thread's magazine */
    return o;
  }
  return ak_pool_alloc_slow(p);
}

/** Frees an object allocated from `p` (from any thread in the concurrent
 *  modes). NULL is ignored. Errors (docs/hardening.md, "Invalid
 *  pointers"): the checked and hardened builds abort with a message naming
 *  ak_pool_free, the pointer and the reason for any pointer `p` did not
 *  hand out (stack, static, another allocator's, interior, unmapped,
 *  another pool's object) and on one of the last 64 destroyed pools; in
 *  release builds such a pointer is undefined. Double free: every build
 *  aborts on a free of the object at the head of its free list or
 *  magazine; release builds miss others (the object is then handed out
 *  twice), the hardened build catches most, the checked build all.
 *  Inline: an object of the current slab (THREADS: of the calling thread's
 *  heap) or of another slab with free slots that keeps an object (THREADS:
 *  the heap's own); SPINLOCK, LOCKFREE: into the thread's magazine below
 *  its spill; else the library (ordering, spares, remote frees). */
AK_FAST_PATH void ak_pool_free(ak_pool *p, void *obj) {
  uintptr_t sb = (uintptr_t)obj & p->cur.mask;
  if (AK_LIKELY(sb == p->cur.hot_slab)) {
    if (AK_LIKELY(_ak_pool_cur_push(p, &p->cur, obj, false))) return;
  } else if (p->tkey) { /* AK_SYNC_THREADS: the thread's heap, if cached */
    const _ak_pool_tentry *e = _ak_pool_tentry_of(p->tkey);
    if (AK_LIKELY(e->key == p->tkey) && AK_LIKELY(_ak_pool_heap_free(p, e->state.heap, obj))) return;
  } else if (!AK_POOL_INLINE_ENCODE && p->mkey) { /* SPINLOCK, LOCKFREE: the thread's magazine */
    if (AK_LIKELY(_ak_pool_mag_free(p, obj))) return;
  } else if (AK_LIKELY(_ak_pool_slab_push(p, sb, obj, p->cur.mask, NULL))) {
    return;
  }
  ak_pool_free_slow(p, obj);
}

/** Makes sure `n` more objects can be allocated without asking the backing
 *  (spare slabs first, then new ones; in AK_SYNC_THREADS for the calling
 *  thread). A request beyond what the system can commit fails at once with
 *  ENOMEM, one beyond a file backing's free space with ENOSPC. Returns 0,
 *  or the errno (also set, message in ak_last_error()), with nothing
 *  reserved beyond what succeeded. Thread-safe. */
AK_API int ak_pool_reserve(ak_pool *p, size_t n);

/** True if `ptr` points to the start of a slot in one of `p`'s slabs
 *  (allocated or not). O(1) for mmap and file backings. Thread-safe. */
AK_API bool ak_pool_owns(const ak_pool *p, const void *ptr);

/** Gives cached and empty memory back now: spare and empty slabs, and
 *  those of exited threads. AK_SYNC_THREADS: the caller's slabs now, other
 *  threads' at their next slow path. SPINLOCK, LOCKFREE: every thread's
 *  magazine first (one membarrier(2)); LOCKFREE with no live object then
 *  decommits every slab (they stay mapped). Thread-safe. */
AK_API void ak_pool_trim(ak_pool *p);

/** Switches strict fullest-first ordering on or off at run time. In
 *  AK_SYNC_THREADS each thread follows at its next call that reaches the
 *  library. Thread-safe. */
AK_API void ak_pool_set_defragment(ak_pool *p, bool on);

/** Fills `out` after the reclaim policy's due steps on the pool's spares.
 *  Thread-safe. Exact when no other thread uses the pool; else `live` adds
 *  each thread's count as of one instant (a read retried up to 100 times). */
AK_API void ak_pool_stats_get(const ak_pool *p, ak_pool_stats *out);

/** Prints the stats of `p` in one readable block to `f` and flushes `f`.
 *  Returns 0 once the text is written, or -1 with errno from stdio (ENOSPC
 *  on a full device, EBADF on a read-only stream; EINVAL if `f` is NULL)
 *  and the reason in ak_last_error(). */
AK_API int ak_pool_stats_print(const ak_pool *p, FILE *f);

/** The pool's name (as given, or "pool"). */
AK_API const char *ak_pool_name(const ak_pool *p);

#ifdef __cplusplus
}
#endif

#endif /* ARENAKIT_POOL_H */
