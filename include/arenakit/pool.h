/* SPDX-License-Identifier: MIT */
/* arenakit/pool.h - the fixed-size object pool, `ak_pool` (seeds 000, 002,
 * 004).
 *
 * A pool hands out objects of one size from slabs: aligned blocks
 * (64 KiB by default) whose header sits at the start, so the slab of any
 * object is found by masking its address. A free slot holds the link to
 * the next free slot, so objects carry zero bytes of overhead. Slabs with
 * free slots are kept fullest-first (Netdata ARAL's policy, or a strictly
 * sorted order with ak_pool_set_defragment()). A slab that becomes
 * entirely free is kept as a spare under the reclaim policy
 * (arenakit/reclaim.h): reused first, its pages given back after the purge
 * delay (250 ms by default), unmapped after the release delay (1 s), so a
 * program that churns objects does not fault pages in again and one that
 * stops gets its memory back. ARAL's policy (an empty slab goes back at
 * once) is the option `release_empty`.
 *
 * Synchronisation is chosen per pool (ak_sync). A zeroed options struct
 * gives AK_SYNC_THREADS, which is safe and scales with threads; the fastest
 * mode, AK_SYNC_NONE, is single-threaded and must be asked for.
 *
 * Errors: NULL with errno (EINVAL for bad options, ENOMEM when max_objects
 * or the system refuses, or the errno of a failing file operation);
 * ak_last_error() names the call, the pool and the reason. Misuse (double
 * free, a foreign pointer, the wrong pool) is detected where cheap, and
 * always in the checked build (AK_CHECKED), with a message and abort().
 */
#ifndef ARENAKIT_POOL_H
#define ARENAKIT_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "arenakit/common.h"

#if defined(__has_include)
#if __has_include("arenakit/config.h")
#include "arenakit/config.h"
#endif
#endif
#ifndef AK_CONFIG_HARDENED
#define AK_CONFIG_HARDENED 0
#endif
/** 1 when these headers belong to a hardened library whose free-list links
 *  are encoded (the links or double-free mitigation): the inline paths
 *  below then decode, check and encode as the library does. */
#define AK_POOL_INLINE_ENCODE ((AK_CONFIG_HARDENED & 9) != 0)

#ifdef __cplusplus
extern "C" {
#endif

/** How a pool synchronises. */
typedef enum ak_sync {
  /** Default. Thread-owned slabs: each thread allocates from slabs it owns
   *  and frees to them without atomics; a free from another thread pushes
   *  onto the slab's remote list with one atomic operation. No lock on any
   *  fast path. A thread's slabs are handed back when it exits. */
  AK_SYNC_THREADS = 0,
  /** No synchronisation: one thread at a time. Inline fast paths. */
  AK_SYNC_NONE = 1,
  /** A test-and-test-and-set spinlock with exponential backoff and
   *  sched_yield(), so it survives many more threads than cores. Each
   *  thread keeps a magazine of up to 128 free objects and takes or gives
   *  them 64 at a time under the lock, so the lock is taken once per 64
   *  calls; the magazine goes back when the thread exits, at
   *  ak_pool_trim(), and when the pool's last object is freed. */
  AK_SYNC_SPINLOCK = 2,
  /** A lock-free stack (Treiber stack) of batches of up to 64 free objects,
   *  whose head carries a 16-bit tag beside a 48-bit pointer, so a CAS
   *  never succeeds on a recycled head (ABA-safe unless one thread is
   *  preempted for exactly 65536 pops of the same head). Each thread keeps
   *  a magazine of up to 128 free objects in front of it (as in
   *  AK_SYNC_SPINLOCK), so the head is touched once per 64 calls. Slots are
   *  at least 16 bytes. Slabs of this mode are decommitted, not unmapped,
   *  when trimmed, so a stale read never faults. */
  AK_SYNC_LOCKFREE = 3
} ak_sync;

/** Where slabs come from. */
typedef enum ak_backing {
  AK_BACKING_MMAP = 0, /**< anonymous memory from the OS layer (default) */
  AK_BACKING_HEAP = 1, /**< the C heap: aligned_alloc(slab_size, slab_size) */
  AK_BACKING_FILE = 2  /**< a MAP_SHARED mapping of the file at `path`,
                            grown by one slab at a time; each slab's
                            blocks are allocated for real when it is
                            added (posix_fallocate), so a full file
                            system gives NULL/ENOSPC naming the file,
                            never SIGBUS; released slabs are punched
                            out and their offsets reused first */
} ak_backing;

/** Options for ak_pool_create(); zero means the default for every field. */
typedef struct ak_pool_options {
  size_t object_size; /**< bytes per object; required (> 0) */
  size_t align;       /**< power of two; 0 = natural alignment for the size
                           (the largest power of two dividing it, max 16).
                           Slots may be more aligned: a slab's first slot
                           sits on the largest power of two dividing the
                           slot size, up to 64, so that no slot straddles
                           a cache line it could fit in */
  size_t max_objects; /**< cap on live objects (0 = unlimited); past it,
                           ak_pool_alloc() returns NULL with ENOMEM */
  ak_sync sync;       /**< synchronisation; default AK_SYNC_THREADS */
  size_t slab_size;   /**< power of two >= page size; 0 = 64 KiB (grown to
                           hold at least 8 objects) */
  ak_backing backing; /**< default AK_BACKING_MMAP */
  const char *path;   /**< AK_BACKING_FILE: the file (created, or truncated);
                           locked (flock) while the pool lives: a path
                           another live pool holds is refused with EBUSY */
  bool defragment;    /**< start with strict fullest-first ordering */
  size_t spare_slabs; /**< a cap on the empty slabs kept for reuse (0: no
                           cap but the reclaim policy's delays). By
                           default spares are reused newest first,
                           decommitted once unused for the purge delay and
                           unmapped after the release delay
                           (arenakit/reclaim.h); past the cap the oldest
                           is unmapped. With release_empty: up to this
                           many are kept, with no delay (0: none). In
                           AK_SYNC_THREADS each thread also keeps up to
                           this many of the slabs it emptied, reused by it
                           without a lock and kept until ak_pool_trim()
                           or the thread's exit. The current slab stays
                           while it is the only one with free slots */
  const char *name;   /**< for messages and stats; copied; default "pool" */
  bool release_empty; /**< ARAL's policy, chosen explicitly: a slab that
                           becomes empty goes back to the backing at once
                           (unmapped), apart from `spare_slabs` spares,
                           which are kept until ak_pool_trim(). Lowest
                           memory at every moment; a churning program
                           maps and faults its slabs again each time
                           (default false: the reclaim policy) */
} ak_pool_options;

/** Statistics of one pool (ak_pool_stats_get()). Version 2 (added
 *  bytes_committed, bytes_spare, bytes_purged). */
typedef struct ak_pool_stats {
  unsigned version;   /**< AK_POOL_STATS_VERSION */
  size_t object_size; /**< bytes per object as configured */
  size_t slot_size;   /**< bytes per slot (object size rounded) */
  size_t live;        /**< objects allocated and not yet freed; in
                           AK_SYNC_THREADS an object freed by a thread
                           other than its slab's owner counts until the
                           owner collects it (when it needs a slot, or
                           at ak_pool_trim) */
  size_t peak_live;   /**< high-water mark of `live`: exact with
                           max_objects; otherwise sampled: in SPINLOCK
                           and LOCKFREE whenever a thread's magazine
                           takes or gives a batch (off by < 128 per
                           thread), in AK_SYNC_NONE whenever the pool
                           takes a slab (off by < one slab), in
                           AK_SYNC_THREADS whenever a thread takes one
                           of the pool's spare or abandoned slabs and at
                           every 8th other slab of a thread (new or its
                           own spare; off by < 8 slabs per thread) */
  size_t slabs;       /**< slabs held (in use or spare) */
  /** High-water mark of `slabs`, sampled: exact while the pool only grows;
   *  once slabs are also given back, a peak is recorded when part of the
   *  slab table (1/64 of it, by address) reaches a new high of its own and
   *  at every stats call, so a brief peak between samples can be missed
   *  (an exact count would be one word written by every thread on every
   *  slab). Never below `slabs`. */
  size_t peak_slabs;
  size_t bytes_reserved; /**< bytes of slabs held */
  size_t bytes_resident; /**< bytes of those that are resident (mincore;
                              for a file, its pages in the page cache) */
  size_t slab_allocs;    /**< slabs obtained from the backing so far */
  size_t slab_releases;  /**< slabs given back so far */

  /* Version 2: the reclaim policy's view (arenakit/reclaim.h). */
  size_t bytes_committed; /**< bytes of slabs held whose pages are not
                               decommitted (bytes_reserved less the
                               purged spares'; a purged slab keeps its
                               header page) */
  size_t bytes_spare;     /**< bytes of empty slabs kept for reuse in the
                               pool's spare set (committed or purged; not
                               the per-thread spare_slabs of
                               AK_SYNC_THREADS) */
  size_t bytes_purged;    /**< bytes of spares decommitted by the reclaim
                               policy so far (cumulative) */
} ak_pool_stats;

#define AK_POOL_STATS_VERSION 2u

/** The first fields of every slab header (the rest is internal): what the
 *  inline paths of AK_SYNC_NONE need for a slab other than the current one
 *  (the free, and the allocation from the next slab, `alt`). Never touch
 *  it. */
typedef struct ak_pool_slab_head {
  void *free;      /**< the slab's free list */
  uint32_t used;   /**< live objects in the slab */
  uint32_t state;  /**< 1 while the slab is on the pool's (AK_SYNC_THREADS:
                        its owner heap's) list of slabs with free slots
                        (others need the slow path) */
  uintptr_t owner; /**< AK_SYNC_THREADS: the owning heap (0: none); read
                        atomically, since other threads may change it */
  uintptr_t key;   /**< hardened: links are stored as next ^ key */
  uint64_t magic;  /**< identifies a slab header */
  void *pool;      /**< the owning pool (the ak_pool *) */
} ak_pool_slab_head;

/** A thread's heap of an AK_SYNC_THREADS pool: the part the inline paths
 *  use. Never touch it. Only the owning thread writes it. Invariants: `hot`
 *  is the free list of the heap's current slab at `hot_slab` (1: none), a
 *  slab this heap owns; `hot_used` is that slab's live count; `live` counts
 *  the heap's live objects outside the current slab (and the current
 *  slab's as they were when it became current: the calls on it change
 *  only `hot_used`); stats read both from other threads, so they are
 *  stored atomically; `mask` is ~(slab_size - 1), or 0 while every free
 *  must reach the library (the defragmenter keeps its order there). */
typedef struct ak_pool_theap {
  void *hot;          /**< next free slot of the current slab */
  size_t hot_used;    /**< live objects in the current slab */
  uintptr_t hot_slab; /**< address of the current slab (1: none) */
  uintptr_t mask;     /**< ~(slab_size - 1), 0: frees go to the library */
  uintptr_t hot_key;  /**< hardened: links on `hot` are stored as next ^ hot_key */
  size_t live;        /**< live objects of this heap outside `hot_used`'s changes */
  uintptr_t bump;     /**< the current slab's never-used slots: [bump, bump_end) */
  uintptr_t bump_end; /**< == bump when there are none (or they must be shuffled) */
} ak_pool_theap;

/** An entry of the calling thread's cache of heaps: the heap of the pool
 *  whose `tkey` equals `key` (pool ids are never reused, so an entry of a
 *  destroyed pool never matches). Never touch it. */
typedef struct ak_pool_tentry {
  uint64_t key;        /**< the pool's tkey; 0: empty */
  ak_pool_theap *heap; /**< this thread's heap of that pool */
} ak_pool_tentry;

/** Entries of the thread cache (a power of two); a pool uses entry
 *  `tkey % AK_POOL_TCACHE`. */
#define AK_POOL_TCACHE 16

/** The calling thread's cache of AK_SYNC_THREADS heaps, read by the inline
 *  paths (initial-exec TLS: one %fs-relative access, no call). Written only
 *  by the library, on the thread it belongs to. Never touch it. */
AK_API extern __thread ak_pool_tentry ak_pool_tcache[AK_POOL_TCACHE]
    __attribute__((tls_model("initial-exec")));

/** The public head of a pool: what the inline fast paths read (AK_SYNC_NONE
 *  all of it, AK_SYNC_THREADS `tkey` and `slot`). Never touch it.
 *  Invariants: `hot` is the free list of the slab at `hot_slab` (every slot
 *  on it lies in that slab); `hot_used` is that slab's live count. `alt` is
 *  NULL or the next slab with free slots after the current one (fullest
 *  first), whose own header keeps its list and count. The inline paths keep
 *  no pool-wide count: a pool with max_objects runs every call through the
 *  library, which counts. When the inline paths are off (any mode other
 *  than AK_SYNC_NONE, max_objects, the defragmenter, checked or tracked
 *  builds) `hot` and `alt` are NULL, `hot_slab` is 1 and `slab_mask` is 0,
 *  so every call reaches the library. */
typedef struct ak_pool {
  void *hot;              /**< next free slot of the current slab */
  size_t hot_used;        /**< live objects in the current slab */
  uintptr_t hot_slab;     /**< address of the current slab (1: none, so that
                               NULL never matches it) */
  uintptr_t slab_mask;    /**< ~(slab_size - 1), 0 when the inline paths are off */
  uintptr_t hot_key;      /**< hardened: links on `hot` are stored as next ^ hot_key */
  uint64_t tkey;          /**< AK_SYNC_THREADS with inline paths: the pool's id,
                               its key in ak_pool_tcache; 0 otherwise */
  uintptr_t bump;         /**< the current slab's never-used slots, handed out
                               in address order after `hot`: [bump, bump_end) */
  uintptr_t bump_end;     /**< == bump when there are none (or they must be
                               shuffled: the library carves them) */
  size_t slot;            /**< slot size: the step of `bump` */
  ak_pool_slab_head *alt; /**< the next slab to allocate from once the
                               current one is full (NULL: none) */
  /* Hardened inline frees: the slot grid (ak_pool_on_grid_). */
  uintptr_t slot_first; /**< offset of a slab's first slot */
  uintptr_t slot_span;  /**< bytes of slots in a slab (0: every free goes to the library) */
  uint64_t slot_div;    /**< UINT64_MAX / slot + 1 (see ak_pool_on_grid_) */
} ak_pool;

/** Creates a pool. Returns NULL with EINVAL if object_size is 0, align is
 *  not a power of two or exceeds the slab size, slab_size is not a power of
 *  two >= the page size, the object does not fit a slab, backing is FILE
 *  without a path or another backing with one, or an enum is out of range;
 *  with the errno of open/ftruncate if the file cannot be created (message
 *  naming the path); ENOMEM if memory runs out. Thread-safe. */
AK_API ak_pool *ak_pool_create(const ak_pool_options *opts);

/** ak_pool_create for code compiled with headers whose inline paths encode
 *  links (`inline_encode` = AK_POOL_INLINE_ENCODE). The library turns a
 *  pool's inline paths on only when they match its own build, so code
 *  compiled against the other kind of headers stays correct (every call
 *  then goes to the library). Hardened headers route ak_pool_create here. */
AK_API ak_pool *ak_pool_create_inline(const ak_pool_options *opts, int inline_encode);
#if AK_POOL_INLINE_ENCODE
#define ak_pool_create(opts) ak_pool_create_inline((opts), 1)
#endif

/** Destroys `p` and gives every slab back, live objects included (the
 *  checked build reports how many were still live). `p` must not be in use
 *  by other threads. NULL is ignored. */
AK_API void ak_pool_destroy(ak_pool *p);

/** Slow paths of the inline functions below; call those instead. */
AK_API void *ak_pool_alloc_slow(ak_pool *p);
AK_API void ak_pool_free_slow(ak_pool *p, void *obj);

/* The free link in a free slot's first word. The inline paths reach it
 * through this struct, not a bare void **, so that the compiler knows a
 * link never aliases the pool's own fields (`hot` and the counts) and can
 * keep a free followed by an allocation in registers. */
typedef struct ak_pool_link {
  void *next;
} ak_pool_link;

/* Hardened: the library's map of slab addresses (src/pool/pool_table.c):
 * one bit per 4 KiB granule at which a live slab of some pool starts, a
 * leaf of 2^18 bits per GiB of address, NULL until a slab lies there. The
 * inline frees read a header other than the current slab's only where the
 * map knows a slab, so a pointer no pool handed out (stack, static, another
 * allocator's, unmapped) is never dereferenced inline. Never touch it. */
#define AK_POOL_MAP_GRAN_BITS 12
#define AK_POOL_MAP_LEAF_BITS 18
#define AK_POOL_MAP_ADDR_BITS (UINTPTR_MAX > 0xffffffffu ? 48 : 32)
AK_API extern uint64_t *ak_pool_slab_map_[];

/* Hardened: whether a live slab of some pool starts at `sb` (two loads).
 * False beyond the map's range: the library then looks in the pool. */
AK_FAST_PATH bool ak_pool_known_slab_(uintptr_t sb) {
  uintptr_t g = sb >> AK_POOL_MAP_GRAN_BITS;
  if (g >> (AK_POOL_MAP_ADDR_BITS - AK_POOL_MAP_GRAN_BITS)) return false;
  const uint64_t *leaf = __atomic_load_n(&ak_pool_slab_map_[g >> AK_POOL_MAP_LEAF_BITS], __ATOMIC_ACQUIRE);
  uintptr_t i = g & (((uintptr_t)1 << AK_POOL_MAP_LEAF_BITS) - 1);
  return leaf && ((__atomic_load_n(&leaf[i / 64], __ATOMIC_ACQUIRE) >> (i % 64)) & 1);
}

/* Hardened: true if `obj` is the start of a slot of slab `sb` of `p`: its
 * offset from the first slot is below the slots' span and a multiple of the
 * slot size (one multiplication: n % d == 0 iff n * (UINT64_MAX / d + 1)
 * <= UINT64_MAX / d, for n < 2^32; Lemire, Kaser, Kurz 2019). An interior
 * pointer goes to the library, which names it. */
AK_FAST_PATH bool ak_pool_on_grid_(const ak_pool *p, const void *obj, uintptr_t sb) {
  uint64_t n = (uint64_t)((uintptr_t)obj - sb - p->slot_first);
  return n < p->slot_span && n * p->slot_div <= p->slot_div - 1;
}

#if AK_POOL_INLINE_ENCODE
/* Hardened: an encoded link (next ^ key), reached through a struct for the
 * same reason as ak_pool_link: a uintptr_t store through a bare pointer
 * could alias the pool's counts and addresses (size_t, uintptr_t). */
typedef struct ak_pool_elink {
  uintptr_t next;
} ak_pool_elink;

/* Hardened: true if the first word of `obj` (a slot of slab `sb`), decoded
 * with `key`, does not look like a free link (NULL or a slot of the same
 * slab), so that pushing it inline cannot hide a double free. */
AK_FAST_PATH bool ak_pool_not_free_(const void *obj, uintptr_t key, uintptr_t sb, uintptr_t mask) {
  uintptr_t w = ((const ak_pool_elink *)obj)->next ^ key;
  return w != 0 && (w & mask) != sb;
}
#endif

/* Relaxed atomic access to fields that other threads may read (or, for a
 * slab's owner, write) while the inline paths run: plain moves on x86-64,
 * but race-free for the language and for TSan. */
#define AK_POOL_LOAD_(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define AK_POOL_STORE_(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

/** Allocates one object: aligned to the pool's alignment, contents
 *  unspecified. The object belongs to the caller until ak_pool_free(); it
 *  stays valid until then or ak_pool_destroy(). Returns NULL with ENOMEM
 *  when max_objects live objects exist or memory runs out. `p` must not be
 *  NULL: the inline path reads it first (ak_pool_alloc_slow(NULL) returns
 *  NULL with EINVAL). Thread-safety: as the pool's sync mode.
 *
 *  Fast paths: AK_SYNC_NONE (5 instructions) pops the current slab's free
 *  list; the invariant that every slot on `hot` lies in `hot_slab` means no
 *  slab lookup is needed. When the list is empty, the slab's never-used
 *  slots are handed out by address ([bump, bump_end)), so a fresh slab
 *  needs no free list built through its memory. When the current slab is
 *  full, the next slab's free list is popped (`alt`: ARAL allocates from
 *  the first two pages), so a working set that straddles two slabs does
 *  not switch the current slab back and forth. AK_SYNC_THREADS does the
 *  same on the calling thread's heap, found in the thread cache
 *  (ak_pool_tcache) by the pool's key; only that thread touches the heap's
 *  current slab, so no atomic operation is needed. Anything else is a plain
 *  call of ak_pool_alloc_slow (an ordinary ABI call: correct under every
 *  link mode, lazy binding and dynamic linker). */
AK_FAST_PATH AK_MALLOC_LIKE void *ak_pool_alloc(ak_pool *p) {
  void *o = p->hot;
#if AK_POOL_INLINE_ENCODE
  /* Hardened: the link is decoded and must stay in the current slab (the
   * library reports a corrupted one); the handed-out slot holds no stale
   * link, so freeing it untouched does not look like a double free. */
  if (AK_LIKELY(o != NULL)) {
    uintptr_t next = ((ak_pool_elink *)o)->next ^ p->hot_key;
    if (AK_LIKELY(next == 0 || (next & p->slab_mask) == p->hot_slab)) {
      p->hot = (void *)next;
      p->hot_used++;
      ((ak_pool_elink *)o)->next = 0;
      return o;
    }
  } else if (p->bump < p->bump_end) { /* a never-used slot (as below) */
    o = (void *)p->bump;
    p->bump += p->slot;
    p->hot_used++;
    ((ak_pool_elink *)o)->next = 0;
    return o;
  } else if (p->tkey) {
    ak_pool_tentry *e = &ak_pool_tcache[p->tkey & (AK_POOL_TCACHE - 1)];
    ak_pool_theap *h = e->heap;
    if (AK_LIKELY(e->key == p->tkey)) {
      if (AK_LIKELY((o = h->hot) != NULL)) {
        uintptr_t next = ((ak_pool_elink *)o)->next ^ h->hot_key;
        if (AK_LIKELY(next == 0 || (next & h->mask) == h->hot_slab)) {
          h->hot = (void *)next;
          AK_POOL_STORE_(h->hot_used, h->hot_used + 1);
          ((ak_pool_elink *)o)->next = 0;
          return o;
        }
      } else if (h->bump < h->bump_end) {
        o = (void *)h->bump;
        h->bump += p->slot;
        AK_POOL_STORE_(h->hot_used, h->hot_used + 1);
        ((ak_pool_elink *)o)->next = 0;
        return o;
      }
    }
  } else if (p->alt != NULL) { /* the next slab's list (as below), decoded with its key */
    ak_pool_slab_head *a = p->alt;
    if ((o = a->free) != NULL) {
      uintptr_t next = ((ak_pool_elink *)o)->next ^ a->key;
      if (AK_LIKELY(next == 0 || (next & p->slab_mask) == (uintptr_t)a)) {
        a->free = (void *)next;
        a->used++;
        ((ak_pool_elink *)o)->next = 0;
        return o;
      }
    }
  }
#else
  if (AK_LIKELY(o != NULL)) {
    p->hot = ((ak_pool_link *)o)->next;
    p->hot_used++;
    return o;
  }
  /* Invariant: [bump, bump_end) are never-used slots of the current slab,
   * checked out with it (empty when they must be shuffled or the inline
   * paths are off): no link to read, no slab lookup. */
  if (p->bump < p->bump_end) {
    o = (void *)p->bump;
    p->bump += p->slot;
    p->hot_used++;
    return o;
  }
  if (p->tkey) { /* AK_SYNC_THREADS: the thread's heap, if cached */
    ak_pool_tentry *e = &ak_pool_tcache[p->tkey & (AK_POOL_TCACHE - 1)];
    if (AK_LIKELY(e->key == p->tkey)) {
      ak_pool_theap *h = e->heap;
      o = h->hot;
      if (AK_LIKELY(o != NULL)) {
        h->hot = ((ak_pool_link *)o)->next;
        AK_POOL_STORE_(h->hot_used, h->hot_used + 1);
        return o;
      }
      if (h->bump < h->bump_end) {
        o = (void *)h->bump;
        h->bump += p->slot;
        AK_POOL_STORE_(h->hot_used, h->hot_used + 1);
        return o;
      }
    }
  } else if (p->alt != NULL) {
    /* AK_SYNC_NONE, the current slab full: pop the next slab's list.
     * Invariant: `alt` is on the pool's list of slabs with free slots and
     * is not the current slab, so its own header holds its list and count
     * (as for the inline free below); the library re-reads them. */
    ak_pool_slab_head *a = p->alt;
    o = a->free;
    if (AK_LIKELY(o != NULL)) {
      a->free = ((ak_pool_link *)o)->next;
      a->used++;
      return o;
    }
  }
#endif
  return ak_pool_alloc_slow(p);
}

/** Frees an object allocated from `p` (from any thread in the concurrent
 *  modes). NULL is ignored.
 *
 *  Errors (docs/hardening.md, "Invalid pointers"): the checked and hardened
 *  builds abort with one message naming ak_pool_free, the pointer and the
 *  reason for any pointer `p` did not hand out (stack, static, another
 *  allocator's or the arena's memory, an interior pointer, an unmapped
 *  address, an object of another pool) and for a call on one of the last
 *  64 destroyed pools: the slab map is consulted before any slab header is
 *  read. In release builds such a pointer is undefined (the inline path
 *  reads the header at its slab-aligned address: it may crash or corrupt
 *  the pool). Double free, every build: a free of the object at the head
 *  of its slab's free list or of the thread's magazine (a double free with
 *  no free into that list between the two) aborts, at the cost of one
 *  compare. Release builds do not detect a double free with other frees
 *  into the same list in between, nor one whose second free comes from
 *  another thread (AK_SYNC_THREADS remote free, or another thread's
 *  magazine): the object is then handed out twice. The hardened build
 *  catches most of those (the first-word check and a search; its limits are
 *  in docs/hardening.md), the checked build all (a bit per slot).
 *
 *  Fast paths: an object of the current slab goes back on `hot` (in
 *  AK_SYNC_THREADS: of the calling thread's heap, so the object is the
 *  thread's own); an object of another slab with free slots that does not
 *  become empty goes on that slab's list (in AK_SYNC_THREADS only if the
 *  thread's heap owns the slab); anything else (a full slab gaining a slot,
 *  a slab becoming empty, a free from another thread) goes to the slow
 *  path, which keeps slabs ordered, gives empty ones to the spares and pushes remote
 *  frees. */
AK_FAST_PATH void ak_pool_free(ak_pool *p, void *obj) {
  uintptr_t sb = (uintptr_t)obj & p->slab_mask;
#if AK_POOL_INLINE_ENCODE
  /* Hardened: the same cases, but only if the object's first word does not
   * decode like a free link (else the library searches the lists for a
   * double free); links are stored encoded with the slab's key. */
  ak_pool_slab_head *s = (ak_pool_slab_head *)sb;
  if (AK_LIKELY(sb == p->hot_slab)) {
    if (AK_LIKELY(ak_pool_on_grid_(p, obj, sb) && ak_pool_not_free_(obj, p->hot_key, sb, p->slab_mask))) {
      ((ak_pool_elink *)obj)->next = (uintptr_t)p->hot ^ p->hot_key;
      p->hot = obj;
      p->hot_used--;
      return;
    }
  } else if (p->tkey) {
    ak_pool_tentry *e = &ak_pool_tcache[p->tkey & (AK_POOL_TCACHE - 1)];
    if (AK_LIKELY(e->key == p->tkey)) {
      ak_pool_theap *h = e->heap;
      sb = (uintptr_t)obj & h->mask;
      s = (ak_pool_slab_head *)sb;
      if (AK_LIKELY(sb == h->hot_slab)) {
        if (AK_LIKELY(ak_pool_on_grid_(p, obj, sb) && ak_pool_not_free_(obj, h->hot_key, sb, h->mask))) {
          ((ak_pool_elink *)obj)->next = (uintptr_t)h->hot ^ h->hot_key;
          h->hot = obj;
          AK_POOL_STORE_(h->hot_used, h->hot_used - 1);
          return;
        }
      } else if (AK_LIKELY(sb != 0 && ak_pool_known_slab_(sb) && AK_POOL_LOAD_(s->owner) == (uintptr_t)h &&
                           s->state == 1 && s->used > 1 && ak_pool_on_grid_(p, obj, sb) &&
                           ak_pool_not_free_(obj, s->key, sb, h->mask))) {
        ((ak_pool_elink *)obj)->next = (uintptr_t)s->free ^ s->key;
        s->free = obj;
        s->used--;
        AK_POOL_STORE_(h->live, h->live - 1);
        return;
      }
    }
  } else if (AK_LIKELY(sb != 0 && ak_pool_known_slab_(sb) && s->pool == (void *)p && s->state == 1 &&
                       s->used > 1 && ak_pool_on_grid_(p, obj, sb) &&
                       ak_pool_not_free_(obj, s->key, sb, p->slab_mask))) {
    ((ak_pool_elink *)obj)->next = (uintptr_t)s->free ^ s->key;
    s->free = obj;
    s->used--;
    return;
  }
  ak_pool_free_slow(p, obj);
#else
  /* Every inline push first compares the object with the list's head: a
   * double free in a row goes to the library, which aborts, instead of
   * linking the object to itself (and handing it out twice). */
  if (AK_LIKELY(sb == p->hot_slab)) { /* the current slab: its list is `hot` */
    if (AK_LIKELY(obj != p->hot)) {
      ((ak_pool_link *)obj)->next = p->hot;
      p->hot = obj;
      p->hot_used--;
      return;
    }
    ak_pool_free_slow(p, obj);
    return;
  }
  ak_pool_slab_head *s;
  if (p->tkey) { /* AK_SYNC_THREADS: the thread's heap, if cached */
    ak_pool_tentry *e = &ak_pool_tcache[p->tkey & (AK_POOL_TCACHE - 1)];
    if (AK_LIKELY(e->key == p->tkey)) {
      ak_pool_theap *h = e->heap;
      sb = (uintptr_t)obj & h->mask;
      s = (ak_pool_slab_head *)sb;
      if (AK_LIKELY(sb == h->hot_slab)) { /* the heap's current slab */
        if (AK_LIKELY(obj != h->hot)) {
          ((ak_pool_link *)obj)->next = h->hot;
          h->hot = obj;
          AK_POOL_STORE_(h->hot_used, h->hot_used - 1);
          return;
        }
      } else if (AK_LIKELY(sb != 0 && AK_POOL_LOAD_(s->owner) == (uintptr_t)h && s->state == 1 &&
                           s->used > 1 && obj != s->free)) {
        /* A slab of this heap with free slots that keeps an object: only
         * this thread changes its list. sb == 0 (NULL, or mask 0) goes slow. */
        ((ak_pool_link *)obj)->next = s->free;
        s->free = obj;
        s->used--;
        AK_POOL_STORE_(h->live, h->live - 1);
        return;
      }
    }
    ak_pool_free_slow(p, obj);
    return;
  }
  s = (ak_pool_slab_head *)sb;
  /* Another slab with free slots that keeps at least one object: no list
   * changes needed. sb == 0 (NULL, or inline paths off) goes slow. */
  if (AK_LIKELY(sb != 0 && s->state == 1 && s->used > 1 && obj != s->free)) {
    ((ak_pool_link *)obj)->next = s->free;
    s->free = obj;
    s->used--;
    return;
  }
  ak_pool_free_slow(p, obj);
#endif
}

/** Makes sure `n` more objects can be allocated without asking the backing
 *  for memory (slabs are obtained now: spare slabs first, taken out of the
 *  spare set, so the reclaim policy does not give them back meanwhile, then
 *  new ones). In AK_SYNC_THREADS the room goes to
 *  the calling thread. A request whose slabs would need more than the
 *  system can commit (RAM + swap, or the strict overcommit policy's limit,
 *  and RLIMIT_AS) fails at once with ENOMEM, and one beyond the free space
 *  of a file backing's file system with ENOSPC, nothing mapped. Returns 0,
 *  or ENOMEM/the backing's errno (errno set too, message in
 *  ak_last_error()) with nothing reserved beyond what succeeded.
 *  Thread-safe. */
AK_API int ak_pool_reserve(ak_pool *p, size_t n);

/** True if `ptr` points to the start of a slot in one of `p`'s slabs
 *  (allocated or not). O(1) for mmap and file backings (address masking
 *  plus a header check), thread-safe. */
AK_API bool ak_pool_owns(const ak_pool *p, const void *ptr);

/** Gives cached and empty memory back now: spare slabs, empty slabs, and
 *  the empty slabs of exited threads (after collecting the frees other
 *  threads made into them) are released. In AK_SYNC_THREADS the calling
 *  thread's slabs and spares are trimmed at once; each other live thread
 *  owns its lists privately and trims them at its next slow path (it keeps
 *  at most one empty slab and its spare_slabs meanwhile). In
 *  AK_SYNC_SPINLOCK and AK_SYNC_LOCKFREE the magazines of every thread are
 *  emptied first (each is taken with one atomic exchange, so its owner runs
 *  on). In AK_SYNC_LOCKFREE, when no object is live, every slab's pages are
 *  then decommitted (the slabs stay mapped; a file's range is punched
 *  out, so neither the page cache nor the file keeps it), in every
 *  backing. Thread-safe. */
AK_API void ak_pool_trim(ak_pool *p);

/** Switches the strict fullest-first ordering (ARAL's defragmenter) on or
 *  off at run time. Thread-safe. In AK_SYNC_THREADS each thread (the caller
 *  too) follows the switch at its next call that reaches the library (its
 *  inline frees until then keep the order as loosely as without it). */
AK_API void ak_pool_set_defragment(ak_pool *p, bool on);

/** Fills `out` (exact when no other thread uses the pool; a consistent
 *  approximation otherwise). Like the slow paths of ak_pool_alloc() and
 *  ak_pool_free(), it first applies the reclaim policy's due steps to the
 *  pool's spares (arenakit/reclaim.h). Thread-safe. */
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
