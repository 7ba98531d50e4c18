/* SPDX-License-Identifier: MIT */
/* arenakit/detail/pool.h - what the inline paths of arenakit/pool.h need
 * (internal). Not API: included by arenakit/pool.h and by the library,
 * never by users; nothing here may be touched by a program, and every
 * layout here may change between versions (AK_POOL_LAYOUT_VERSION).
 *
 * The inline paths work on a "current slab" (_ak_pool_cur): a slab
 * checked out to one owner, whose free list and count live in the
 * _ak_pool_cur while it is current. An AK_SYNC_NONE pool has one, in its
 * public head (ak_pool); an AK_SYNC_THREADS pool has one per thread, in
 * the thread's heap (_ak_pool_theap), found through the thread cache
 * (_ak_pool_tcache). One pop (_ak_pool_cur_pop, _ak_pool_list_pop) and one
 * push (_ak_pool_list_push) serve both; the hardened build's checks are a
 * compile-time branch inside them. AK_SYNC_SPINLOCK and AK_SYNC_LOCKFREE
 * pools have a magazine per thread instead (_ak_pool_maghead, in the same
 * thread cache), with a pop and a push of its own (_ak_pool_mag_pop,
 * _ak_pool_mag_push, inside the owner's mark: _ak_pool_mag_enter,
 * _ak_pool_mag_leave), plain-link builds only. Links go through
 * arenakit/detail/link.h only. */
#ifndef ARENAKIT_DETAIL_POOL_H
#define ARENAKIT_DETAIL_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arenakit/common.h"
#include "arenakit/detail/link.h"

#if defined(__has_include)
#if __has_include("arenakit/config.h")
#include "arenakit/config.h"
#endif
#endif
#ifndef AK_CONFIG_HARDENED
#define AK_CONFIG_HARDENED 0
#endif

#ifdef __cplusplus
extern "C" {
#endif

/** The layout of every structure in this header that compiled programs
 *  read or write inline. Raised whenever one of them changes: the headers
 *  pass it to the library at ak_pool_create (through
 *  ak_pool_create_inline), and the library refuses a pool to a program
 *  built against another layout (NULL, EPROTO, a message) instead of
 *  letting its inline paths misread the pool. */
#define AK_POOL_LAYOUT_VERSION 4

/** Bits of AK_CONFIG_HARDENED (the hardened library's mitigations; the
 *  library's own names are in src/common/harden.h) that change the inline
 *  paths: both store free-list links encoded. */
#define AK_CONFIG_HARDEN_LINKS 1
#define AK_CONFIG_HARDEN_DOUBLE_FREE 8

/** 1 when these headers belong to a hardened library whose free-list links
 *  are encoded (the links or double-free mitigation): the inline paths
 *  then decode, check and encode as the library does. */
#define AK_POOL_INLINE_ENCODE \
  ((AK_CONFIG_HARDENED & (AK_CONFIG_HARDEN_LINKS | AK_CONFIG_HARDEN_DOUBLE_FREE)) != 0)

/** What ak_pool_create passes to ak_pool_create_inline: the layout version
 *  of these headers and whether their inline paths encode links (bit 0). */
#define AK_POOL_INLINE_ABI \
  ((AK_POOL_LAYOUT_VERSION << 8) | (AK_POOL_INLINE_ENCODE ? AK_POOL_INLINE_ENCODE_BIT : 0))
/** The bit of AK_POOL_INLINE_ABI set when the inline paths encode links. */
#define AK_POOL_INLINE_ENCODE_BIT 1

/** The key the inline paths encode links with: the slab's in the hardened
 *  build, 0 (a compile-time constant: plain loads and stores) otherwise. */
#define _AK_POOL_KEY(key) (AK_POOL_INLINE_ENCODE ? (key) : (uintptr_t)0)

/* Relaxed atomic access to fields that other threads may read (or, for a
 * slab's owner, write) while the inline paths run: plain moves on x86-64,
 * but race-free for the language and for TSan. */
#define _AK_POOL_LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define _AK_POOL_STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

/** A free list: its first slot (NULL: empty). A struct, not a bare
 *  `void *`: its stores then never alias a link (_ak_link), so the inline
 *  paths keep a freed and reallocated slot's link in a register. */
typedef struct _ak_pool_flist {
  void *first;
} _ak_pool_flist;

/** The first fields of every slab header (the rest is the library's
 *  _ak_slab): what the inline paths need of a slab other than the current
 *  one (a free into it, and AK_SYNC_NONE's allocation from the next slab,
 *  `alt`). */
typedef struct _ak_pool_slab_head {
  _ak_pool_flist free; /**< the slab's free list */
  uint32_t used;       /**< live objects in the slab */
  uint32_t state;      /**< _AK_POOL_SLAB_AVAIL while the slab is on the pool's
                            (AK_SYNC_THREADS: its owner heap's) list of slabs
                            with free slots (others need the slow path) */
  uintptr_t owner;     /**< AK_SYNC_THREADS: the owning heap (0: none); read
                            atomically, since other threads may change it */
  uintptr_t key;       /**< hardened: links are encoded with it */
  uint64_t magic;      /**< identifies a slab header */
  void *pool;          /**< the owning pool (the ak_pool *) */
} _ak_pool_slab_head;

/** _ak_pool_slab_head.magic of a live slab of pool `p`: this ^ (uintptr_t)p. */
#define _AK_POOL_SLAB_MAGIC UINT64_C(0x616b2d736c616221) /* "ak-slab!" */

/** _ak_pool_slab_head.state of a slab on a list of slabs with free slots. */
#define _AK_POOL_SLAB_AVAIL 1u

/** A current slab: a slab checked out to one owner (an AK_SYNC_NONE pool,
 *  or one thread's heap of an AK_SYNC_THREADS pool), whose list and count
 *  live here while it is current; only the owner writes it. Invariants:
 *  every slot on `hot` lies in the slab at `hot_slab` (1: none, so that
 *  no masked pointer matches it); `hot_used` is that slab's live count;
 *  [bump, bump_end) are its never-used slots, handed out by address after
 *  `hot` (empty when they must be shuffled: the library carves them);
 *  `mask` is ~(slab_size - 1), or 0 while every free must reach the
 *  library (the inline paths off, or the defragmenter keeping its order). */
typedef struct _ak_pool_cur {
  _ak_pool_flist hot; /**< the current slab's free list */
  size_t hot_used;    /**< live objects in the current slab */
  uintptr_t hot_slab; /**< address of the current slab (1: none) */
  uintptr_t mask;     /**< ~(slab_size - 1), 0: frees go to the library */
  uintptr_t hot_key;  /**< hardened: the key of the links on `hot` */
  uintptr_t bump;     /**< the current slab's never-used slots: [bump, bump_end) */
  uintptr_t bump_end; /**< == bump when there are none */
} _ak_pool_cur;

/** A thread's heap of an AK_SYNC_THREADS pool: the part the inline paths
 *  use (the library's _ak_pool_heap begins with it). Only the owning thread
 *  writes it; stats read `cur.hot_used` and `live` from other threads, so
 *  the inline paths store them atomically. `live` counts the heap's live
 *  objects outside the current slab (and the current slab's as they were
 *  when it became current: the calls on it change only `cur.hot_used`). */
typedef struct _ak_pool_theap {
  _ak_pool_cur cur; /**< the heap's current slab */
  size_t live;      /**< live objects of this heap outside `cur.hot_used`'s changes */
} _ak_pool_theap;

/** A thread's magazine of an AK_SYNC_SPINLOCK or AK_SYNC_LOCKFREE pool:
 *  the part the inline paths use (the library's _ak_pool_mag begins with
 *  it; src/pool/modes/magazine/magazine.c has the protocol). Only the owner reads or
 *  writes `list` and `n` while `busy` is 1, and sets `busy` only when
 *  `taken` is 0; ak_pool_trim (another thread) sets `taken`, makes the
 *  owner's marks visible (membarrier(2)), waits until `busy` is 0, then
 *  takes the chain. Non-NULL, `list` holds `n` >= 1 free slots chained
 *  through their first words. Only the owner stores `n` (stats read it)
 *  and `hi`. */
typedef struct _ak_pool_maghead {
  void *list;     /**< atomic (relaxed): the chain of free slots, or NULL */
  uint32_t n;     /**< atomic (relaxed): the length of `list` */
  uint32_t hi;    /**< a free that finds n >= hi goes to the library */
  uint32_t busy;  /**< atomic: 1 while the owner works on `list` */
  uint32_t taken; /**< atomic: 1 while another thread takes the magazine */
} _ak_pool_maghead;

/** An entry of the calling thread's cache of per-thread state: the heap
 *  (AK_SYNC_THREADS) or magazine (SPINLOCK, LOCKFREE) of the pool whose
 *  `tkey` or `mkey` equals `key` (pool ids are never reused, so an entry
 *  of a destroyed pool never matches). */
typedef struct _ak_pool_tentry {
  uint64_t key; /**< the pool's tkey or mkey; 0: empty */
  union {
    _ak_pool_theap *heap;  /**< this thread's heap of that pool */
    _ak_pool_maghead *mag; /**< this thread's magazine of that pool */
  } state;
} _ak_pool_tentry;

/** Entries of the thread cache (a power of two). */
#define AK_POOL_TCACHE 16
/** A pool's key in the thread cache (`tkey`, `mkey`) is its id times the
 *  size of an entry, so that its entry's byte offset is the key masked
 *  (_ak_pool_tentry_of): entry `(id % AK_POOL_TCACHE)`. */
#define AK_POOL_TCACHE_STEP 16

/** The calling thread's cache of heaps and magazines, read by the inline
 *  paths (initial-exec TLS: one %fs-relative access, no call). Written only
 *  by the library, on the thread it belongs to. */
AK_API extern __thread _ak_pool_tentry _ak_pool_tcache[AK_POOL_TCACHE]
    __attribute__((tls_model("initial-exec")));

/** The thread-cache entry of key `key`. GCC folds the index form into one
 *  mask of the key, Clang the byte offset form. */
AK_FAST_PATH _ak_pool_tentry *_ak_pool_tentry_of(uint64_t key) {
  uint64_t off = key & (uint64_t)((AK_POOL_TCACHE - 1) * AK_POOL_TCACHE_STEP);
#ifdef __clang__
  return (_ak_pool_tentry *)(void *)((char *)_ak_pool_tcache + off);
#else
  return &_ak_pool_tcache[off / AK_POOL_TCACHE_STEP];
#endif
}

/** The public head of a pool: what the inline paths read. Invariants: in
 *  AK_SYNC_NONE with the inline paths on, `cur` is the pool's current
 *  slab and `alt` is NULL or the next slab with free slots after it
 *  (fullest first), whose own header keeps its list and count. The inline
 *  paths keep no pool-wide count: a pool with max_objects runs every call
 *  through the library, which counts. In AK_SYNC_THREADS with the inline
 *  paths on, `tkey` is the pool's key in the thread cache; in
 *  AK_SYNC_SPINLOCK and AK_SYNC_LOCKFREE `mkey`. When a pool's
 *  own inline paths are off (any mode other than AK_SYNC_NONE,
 *  max_objects, the defragmenter, checked or tracked builds) `cur` has no
 *  slab (`hot` NULL, `hot_slab` 1, `mask` 0, no bump slots) and `alt` is
 *  NULL, so every call not served by a heap reaches the library. */
struct ak_pool {
  _ak_pool_cur cur;        /**< AK_SYNC_NONE: the current slab */
  uint64_t tkey;           /**< AK_SYNC_THREADS with inline paths: the pool's
                                key in _ak_pool_tcache; 0 otherwise */
  uint64_t mkey;           /**< SPINLOCK, LOCKFREE with inline paths: the
                                same, for the thread's magazine; 0 otherwise */
  uintptr_t mag_mask;      /**< with mkey: ~(slab_size - 1) */
  size_t slot;             /**< slot size: the step of `bump` */
  _ak_pool_slab_head *alt; /**< the next slab to allocate from once the
                                current one is full (NULL: none) */
  /* Hardened inline frees: the slot grid (_ak_pool_on_grid). */
  uintptr_t slot_first; /**< offset of a slab's first slot */
  uintptr_t slot_span;  /**< bytes of slots in a slab (0: every free goes to the library) */
  uint64_t slot_div;    /**< UINT64_MAX / slot + 1 (see _ak_pool_on_grid) */
};

/* Hardened: the library's map of slab addresses (src/pool/slab/map.c):
 * one bit per 4 KiB granule at which a live slab of some pool starts, a
 * leaf of 2^18 bits per GiB of address, NULL until a slab lies there. The
 * inline frees read a header other than the current slab's only where the
 * map knows a slab, so a pointer no pool handed out (stack, static, another
 * allocator's, unmapped) is never dereferenced inline. */
#define AK_POOL_MAP_GRAN_BITS 12
#define AK_POOL_MAP_LEAF_BITS 18
#define AK_POOL_MAP_ADDR_BITS (UINTPTR_MAX > 0xffffffffu ? 48 : 32)
AK_API extern uint64_t *_ak_pool_slab_map[];

/** Whether a live slab of some pool starts at `sb` (two loads). False
 *  beyond the map's range: the library then looks in the pool. */
AK_FAST_PATH bool _ak_pool_known_slab(uintptr_t sb) {
  uintptr_t g = sb >> AK_POOL_MAP_GRAN_BITS;
  if (g >> (AK_POOL_MAP_ADDR_BITS - AK_POOL_MAP_GRAN_BITS)) return false;
  const uint64_t *leaf = __atomic_load_n(&_ak_pool_slab_map[g >> AK_POOL_MAP_LEAF_BITS], __ATOMIC_ACQUIRE);
  uintptr_t i = g & (((uintptr_t)1 << AK_POOL_MAP_LEAF_BITS) - 1);
  return leaf && ((__atomic_load_n(&leaf[i / 64], __ATOMIC_ACQUIRE) >> (i % 64)) & 1);
}

/** True if `obj` is the start of a slot of slab `sb` of `p`: its offset
 *  from the first slot is below the slots' span and a multiple of the slot
 *  size (one multiplication: n % d == 0 iff n * (UINT64_MAX / d + 1) <=
 *  UINT64_MAX / d, for n < 2^32; Lemire, Kaser, Kurz 2019). An interior
 *  pointer goes to the library, which names it. */
AK_FAST_PATH bool _ak_pool_on_grid(const struct ak_pool *p, const void *obj, uintptr_t sb) {
  uint64_t n = (uint64_t)((uintptr_t)obj - sb - p->slot_first);
  return n < p->slot_span && n * p->slot_div <= p->slot_div - 1;
}

/** Pops the non-empty free list at `*head`, whose slots all lie in the
 *  slab at `*slab`; returns the slot, which holds no link afterwards in the
 *  hardened build (so freeing it untouched does not look like a double
 *  free). Hardened: the decoded link must be NULL or a slot of the same
 *  slab (`*mask` masks a slot to its slab); otherwise NULL is returned and
 *  the list is left as it is (the library reports the corruption). The
 *  bounds are passed by address so that they are loaded only for a link
 *  that is not NULL: the hit path with one slot left reads no more than
 *  the list and the key. */
AK_FAST_PATH void *_ak_pool_list_pop(_ak_pool_flist *head, uintptr_t key, const uintptr_t *mask,
                                     const uintptr_t *slab) {
  void *o = head->first;
  uintptr_t next = _ak_link_word(o, _AK_POOL_KEY(key));
  if (AK_POOL_INLINE_ENCODE && next != 0 && AK_UNLIKELY((next & *mask) != *slab)) return NULL;
  /* The list first, then the slot's link: a heap torn between the two (a
   * fork child finds its owner's state as it was) holds no cleared link. */
  head->first = (void *)next;
  if (AK_POOL_INLINE_ENCODE) _ak_link_set(o, NULL, 0);
  return o;
}

/** Pushes `obj` (a slot of the slab at `slab` of pool `p`) on the free
 *  list at `*head`, unless it might already be free: then false, nothing
 *  changed, and the caller goes to the library (which aborts on a double
 *  free). Every build: `obj` is the list's head (a double free in a row).
 *  Hardened: `obj` is not on the slot grid, or its first word decodes like
 *  a link of this slab (NULL or a slot of the slab; the library searches). */
AK_FAST_PATH bool _ak_pool_list_push(const struct ak_pool *p, _ak_pool_flist *head, void *obj, uintptr_t key,
                                     uintptr_t mask, uintptr_t slab) {
  if (AK_POOL_INLINE_ENCODE) {
    /* The grid first: the slot's word is read only once `obj` is known to
     * be a slot (and the compiler cannot hoist the read above the test). */
    if (AK_UNLIKELY(!_ak_pool_on_grid(p, obj, slab))) return false;
    uintptr_t w = _ak_link_word(obj, key);
    if (AK_UNLIKELY(w == 0 || (w & mask) == slab)) return false;
  } else if (AK_UNLIKELY(obj == head->first)) {
    return false;
  }
  _ak_link_set(obj, head->first, _AK_POOL_KEY(key));
  head->first = obj;
  return true;
}

/** Adds `delta` to a count that only the owner writes; `shared` (a
 *  compile-time constant): other threads read it, so it is stored
 *  atomically (relaxed). */
AK_FAST_PATH void _ak_pool_count(size_t *n, size_t delta, bool shared) {
  if (shared)
    _AK_POOL_STORE(*n, _AK_POOL_LOAD(*n) + delta);
  else
    *n += delta;
}

/** Tells the compiler that `cond` holds (an invariant it cannot see). */
#if defined(__GNUC__) || defined(__clang__)
#define _AK_POOL_ASSUME(cond) ((cond) ? (void)0 : __builtin_unreachable())
#else
#define _AK_POOL_ASSUME(cond) ((void)0)
#endif

/** Allocates from the free list of current slab `c` (no slab lookup: the
 *  invariant of _ak_pool_cur). NULL when it is empty, or hardened when its
 *  link is corrupt (`c->hot` then stays non-empty). */
AK_FAST_PATH void *_ak_pool_cur_pop_list(_ak_pool_cur *c, bool shared) {
  if (AK_UNLIKELY(c->hot.first == NULL)) return NULL;
  void *o = _ak_pool_list_pop(&c->hot, c->hot_key, &c->mask, &c->hot_slab);
  if (AK_POOL_INLINE_ENCODE && AK_UNLIKELY(o == NULL)) return NULL;
  _ak_pool_count(&c->hot_used, 1, shared);
  return o;
}

/** Allocates one of the never-used slots of current slab `c`, `*slot`
 *  bytes apart (no link to read). NULL when there are none. */
AK_FAST_PATH void *_ak_pool_cur_pop_bump(_ak_pool_cur *c, const size_t *slot, bool shared) {
  if (c->bump >= c->bump_end) return NULL;
  void *o = (void *)c->bump;
  _AK_POOL_ASSUME(o != NULL); /* a slot of a slab */
  c->bump += *slot;
  if (AK_POOL_INLINE_ENCODE) _ak_link_set(o, NULL, 0);
  _ak_pool_count(&c->hot_used, 1, shared);
  return o;
}

/** Allocates from current slab `c`: its free list, then its never-used
 *  slots. NULL when both are empty, or hardened when the list's link is
 *  corrupt (`c->hot` then stays non-empty). */
AK_FAST_PATH void *_ak_pool_cur_pop(_ak_pool_cur *c, const size_t *slot, bool shared) {
  void *o = _ak_pool_cur_pop_list(c, shared);
  if (AK_LIKELY(o != NULL)) return o;
  if (AK_POOL_INLINE_ENCODE && c->hot.first != NULL) return NULL;
  return _ak_pool_cur_pop_bump(c, slot, shared);
}

/** Frees `obj` (a slot of current slab `c`, as the caller checked) onto
 *  `c`; false if it might already be free (_ak_pool_list_push). */
AK_FAST_PATH bool _ak_pool_cur_push(const struct ak_pool *p, _ak_pool_cur *c, void *obj, bool shared) {
  if (AK_UNLIKELY(!_ak_pool_list_push(p, &c->hot, obj, c->hot_key, c->mask, c->hot_slab))) return false;
  _ak_pool_count(&c->hot_used, (size_t)-1, shared);
  return true;
}

/** Allocates from the list of slab `s`, not a current slab, whose own
 *  header holds its list and count (AK_SYNC_NONE's `alt`: on the pool's
 *  list of slabs with free slots; the library re-reads them). NULL when
 *  the list is empty (or, hardened, corrupt). */
AK_FAST_PATH void *_ak_pool_slab_pop(_ak_pool_slab_head *s, uintptr_t mask) {
  void *o;
  uintptr_t sb = (uintptr_t)s;
  if (s->free.first == NULL || (o = _ak_pool_list_pop(&s->free, s->key, &mask, &sb)) == NULL) return NULL;
  s->used++;
  return o;
}

/** Frees `obj` onto slab `sb`, not a current slab, if that changes no list
 *  of the library: the slab is on a list of slabs with free slots, keeps an
 *  object afterwards, and belongs to the caller: `heap` (AK_SYNC_THREADS:
 *  only its owner changes its list), or with `heap` NULL (AK_SYNC_NONE) to
 *  `p`, which the hardened build checks. Hardened: only a slab the slab
 *  map knows is read. False (nothing changed) for sb == 0: NULL, or the
 *  inline paths off. */
AK_FAST_PATH bool _ak_pool_slab_push(const struct ak_pool *p, uintptr_t sb, void *obj, uintptr_t mask,
                                     const _ak_pool_theap *heap) {
  _ak_pool_slab_head *s = (_ak_pool_slab_head *)sb;
  if (sb == 0 || (AK_POOL_INLINE_ENCODE && !_ak_pool_known_slab(sb))) return false;
  if (heap ? _AK_POOL_LOAD(s->owner) != (uintptr_t)heap
           : (AK_POOL_INLINE_ENCODE && s->pool != (const void *)p))
    return false;
  if (s->state != _AK_POOL_SLAB_AVAIL || s->used <= 1 ||
      !_ak_pool_list_push(p, &s->free, obj, s->key, mask, sb))
    return false;
  s->used--;
  return true;
}

/** AK_SYNC_THREADS: frees `obj` inline into thread heap `h` (its current
 *  slab, or a slab it owns, as _ak_pool_slab_push says); false if the
 *  library must. */
AK_FAST_PATH bool _ak_pool_heap_free(const struct ak_pool *p, _ak_pool_theap *h, void *obj) {
  uintptr_t sb = (uintptr_t)obj & h->cur.mask;
  if (AK_LIKELY(sb == h->cur.hot_slab)) return _ak_pool_cur_push(p, &h->cur, obj, true);
  if (AK_UNLIKELY(!_ak_pool_slab_push(p, sb, obj, h->cur.mask, h))) return false;
  _ak_pool_count(&h->live, (size_t)-1, true);
  return true;
}

/** The owner enters its work on magazine `m`: false (nothing held) while
 *  another thread takes the magazine, or when `busy` was already set:
 *  only the owner sets it, so the call is a signal handler's that
 *  interrupted the owner inside its own mark (the library then serves it
 *  without the magazine); the mark is left as it was. `fenced` (a
 *  compile-time constant on the inline paths): a full fence orders the
 *  mark before the load of `taken`, for a process without membarrier(2);
 *  otherwise the taker's membarrier(2) does, and the owner pays a plain
 *  store and load. */
AK_FAST_PATH bool _ak_pool_mag_enter(_ak_pool_maghead *m, bool fenced) {
  uint32_t was = _AK_POOL_LOAD(m->busy);
  _AK_POOL_STORE(m->busy, 1);
  if (fenced)
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
  else
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
  if (AK_LIKELY(!(__atomic_load_n(&m->taken, __ATOMIC_ACQUIRE) | was))) return true;
  __atomic_store_n(&m->busy, was, __ATOMIC_RELEASE);
  return false;
}

/** The owner is done with `m`: what it wrote is visible to a taker that
 *  sees `busy` 0. */
AK_FAST_PATH void _ak_pool_mag_leave(_ak_pool_maghead *m) { __atomic_store_n(&m->busy, 0, __ATOMIC_RELEASE); }

/** Pops the first slot of magazine `m`'s chain: NULL if the chain is
 *  empty or being taken, with nothing held. The fast path of SPINLOCK and
 *  LOCKFREE allocations, inline and in the library, in builds whose links
 *  are plain (the hardened library checks them on its own path). */
AK_FAST_PATH void *_ak_pool_mag_pop(_ak_pool_maghead *m, bool fenced) {
  if (AK_UNLIKELY(!_ak_pool_mag_enter(m, fenced))) return NULL;
  void *o = _AK_POOL_LOAD(m->list);
  if (AK_UNLIKELY(o == NULL)) {
    _ak_pool_mag_leave(m);
    return NULL;
  }
  /* n >= 1 slots (the magazine invariant). */
  void *next = _ak_link_get(o, 0);
  _AK_POOL_STORE(m->n, _AK_POOL_LOAD(m->n) - 1);
  _AK_POOL_STORE(m->list, next);
  _ak_pool_mag_leave(m);
  /* The next allocation reads `next`'s link and its caller writes it:
   * fetch its line now, overlapping the miss with the work on `o`. */
  __builtin_prefetch(next, 1, 3);
  return o;
}

/** Pushes `obj` (a slot of the magazine's pool) on magazine `m`'s chain
 *  if that needs nothing of the library: a chain to push on whose head is
 *  not `obj` (a double free in a row) and below `hi` (the spill, the
 *  last-free check, a counted magazine). False otherwise, nothing
 *  changed: the library decides. Plain links, as _ak_pool_mag_pop. */
AK_FAST_PATH bool _ak_pool_mag_push(_ak_pool_maghead *m, void *obj, bool fenced) {
  if (AK_UNLIKELY(!_ak_pool_mag_enter(m, fenced))) return false;
  void *c = _AK_POOL_LOAD(m->list);
  uint32_t n = _AK_POOL_LOAD(m->n);
  if (AK_UNLIKELY(c == NULL || c == obj || n >= m->hi)) {
    _ak_pool_mag_leave(m);
    return false;
  }
  _ak_link_set(obj, c, 0);
  _AK_POOL_STORE(m->n, n + 1);
  _AK_POOL_STORE(m->list, obj);
  _ak_pool_mag_leave(m);
  return true;
}

/** SPINLOCK, LOCKFREE: allocates from the calling thread's magazine of
 *  `p`, if the thread cache has it (NULL otherwise: the library). Never
 *  in a build whose links are encoded. */
AK_FAST_PATH void *_ak_pool_mag_alloc(const struct ak_pool *p) {
  if (AK_POOL_INLINE_ENCODE || !p->mkey) return NULL;
  const _ak_pool_tentry *e = _ak_pool_tentry_of(p->mkey);
  return AK_LIKELY(e->key == p->mkey) ? _ak_pool_mag_pop(e->state.mag, false) : NULL;
}

/** SPINLOCK, LOCKFREE (`p->mkey` set): frees `obj` into the calling
 *  thread's magazine of `p`, if the thread cache has it and `obj` lies in
 *  a slab of `p` (the slab's magic, as the library's release build checks
 *  it), as _ak_pool_mag_push says. False: the library. */
AK_FAST_PATH bool _ak_pool_mag_free(const struct ak_pool *p, void *obj) {
  const _ak_pool_tentry *e = _ak_pool_tentry_of(p->mkey);
  uintptr_t sb = (uintptr_t)obj & p->mag_mask;
  if (AK_UNLIKELY(e->key != p->mkey || sb == 0 ||
                  ((const _ak_pool_slab_head *)sb)->magic != (_AK_POOL_SLAB_MAGIC ^ (uintptr_t)p)))
    return false;
  return _ak_pool_mag_push(e->state.mag, obj, false);
}

#ifdef __cplusplus
}
#endif

#endif /* ARENAKIT_DETAIL_POOL_H */
