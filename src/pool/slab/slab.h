/* SPDX-License-Identifier: MIT */
/* slab.h - one slab: its header, slots, free lists and the lists of slabs
 * (internal, the pool's slab layer; knows no sync mode).
 *
 * A slab is a block of `slab_size` bytes aligned to `slab_size`, holding
 * `capacity` slots of one size after its header. The slab of any slot is
 * `addr & ~(slab_size - 1)`: no per-object header, no lookup table. A free
 * slot stores the link to the next free slot in its first word.
 *
 * Slots are carved lazily: `bump` is the first slot never handed out, so a
 * fresh slab touches only the pages it uses. Invariant (owner's view):
 *   used + |free list| + (end - bump) / slot == capacity
 * where `used` still counts the objects on the remote list until the
 * owner collects them (_ak_slab_collect); _ak_slab_validate checks it.
 * Slabs come from a backing (mmap, C heap, or a shared file mapping)
 * through the OS layer; this layer never calls the system itself. */
#ifndef AK_POOL_SLAB_SLAB_H
#define AK_POOL_SLAB_SLAB_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arenakit/common.h"
#include "arenakit/detail/link.h"
#include "arenakit/detail/pool.h"
#include "common/assert.h"
#include "common/harden.h"
#include "common/list.h"
#include "common/reclaim.h"

#define AK_SLAB_MAGIC _AK_POOL_SLAB_MAGIC /* arenakit/detail/pool.h: the inline frees check it */

typedef struct _ak_slab _ak_slab;

/** Slab flags. TRACKED: the slots are annotated for ASan/Valgrind (fresh
 *  slots are inaccessible until handed out, so they are carved one by one,
 *  never chained ahead; the tool, not the shuffle, checks that pool).
 *  REUSED: a spare slab taken again; the shuffle mitigation randomises a
 *  slab once, when it comes from the backing, and a reused one is carved
 *  in address order (docs/hardening.md: the cost of re-randomising would
 *  undo the caching that spares are for). REMOTE_FULL: the owner's copy
 *  of the tag bit of `remote` (AK_SLAB_REMOTE_FULL): only the owner (or
 *  the holder of the pool's mutex for an unowned slab) sets or clears the
 *  tag, always together with this flag, so the owner knows it without an
 *  atomic load. PENDING: the slab is on a `pending` list, not on `avail`
 *  (both of kind AK_SLAB_AVAIL, see _ak_slab_pending_push). */
enum { AK_SLAB_F_TRACKED = 1u, AK_SLAB_F_REUSED = 2u, AK_SLAB_F_REMOTE_FULL = 4u, AK_SLAB_F_PENDING = 8u };

/** Which kind of list of its pool a slab is on (head.state; 0: none). */
enum { AK_SLAB_AVAIL = 1, AK_SLAB_FULL = 2, AK_SLAB_SPARE = 3, AK_SLAB_ABANDONED = 4 };

struct _ak_slab {
  /* What the inline paths read of any slab (arenakit/detail/pool.h), first:
   * head.free.first, the local free list (owner only); head.used, the live
   * objects counted by the owner; head.state, the list the slab is on
   * (AK_SLAB_*, 0: none); head.owner, the owning thread heap (THREADS; 0:
   * none; read and written with __atomic builtins, as other threads read
   * it); head.key, the key its links are encoded with (hardened);
   * head.magic, AK_SLAB_MAGIC ^ (uintptr_t)the pool; head.pool. */
  _ak_pool_slab_head head;
  _ak_dnode node;     /* on the list named by head.state (common/list.h) */
  uintptr_t bump;     /* first never-carved slot; == end when all carved */
  uintptr_t start;    /* first slot */
  uintptr_t end;      /* start + capacity * slot */
  size_t slot;        /* slot size in bytes */
  uint32_t capacity;  /* slots in this slab */
  uint32_t flags;     /* AK_SLAB_F_* */
  size_t file_offset; /* file backing: where this slab lives in the file */
  /* Frees by other threads (AK_SYNC_THREADS): a list, tagged with
   * AK_SLAB_REMOTE_FULL while the slab is on its owner's full list, and
   * possibly after it left it (the tag is sticky: the owner's free into a
   * full slab leaves it, a collection that takes objects clears it; see
   * modes/threads/threads.c, full_push). Invariant: a slab on a full list is
   * tagged. */
  _Atomic(void *) remote;
  void *heap;              /* owning heap (owner's copy, THREADS) */
  const char *name;        /* the owning pool's name, for messages */
  _Atomic uint32_t prof_n; /* live objects of the slab the heap profiler keeps (pool/prof.c) */
  _ak_spare spare;         /* while the slab is in its pool's spare set (common/reclaim.h) */
  uint64_t bitmap[];       /* checked build: 1 bit per live slot */
};

/* The inline paths read a slab through its head: it must come first. */
_Static_assert(offsetof(_ak_slab, head) == 0, "_ak_slab must begin with _ak_pool_slab_head");
/* The headers' names for the state and the mitigation bits they read. */
_Static_assert(_AK_POOL_SLAB_AVAIL == AK_SLAB_AVAIL, "the inline paths' list state");
_Static_assert(AK_CONFIG_HARDEN_LINKS == AK_HARDEN_LINKS &&
                   AK_CONFIG_HARDEN_DOUBLE_FREE == AK_HARDEN_DOUBLE_FREE,
               "the headers' hardening bits");

/** The mask that takes an address to the start of its slab, for slabs of
 *  `slab_size` bytes (a power of two; slabs are aligned to their size). */
static inline uintptr_t _ak_slab_mask(size_t slab_size) { return ~(uintptr_t)(slab_size - 1); }

/** The slab that address `o` lies in, for slabs of `slab_size` bytes: the
 *  one way from a pointer to its slab header. No check: the address may
 *  be foreign (the validated lookup is the pool's _ak_pool_slab_find). */
static inline _ak_slab *_ak_slab_of(const void *o, size_t slab_size) {
  return (_ak_slab *)((uintptr_t)o & _ak_slab_mask(slab_size));
}

/** The owning heap of `s` (AK_SYNC_THREADS; 0: none): other threads read
 *  it, so it is loaded and stored atomically with memory order `order`. */
static inline uintptr_t _ak_slab_owner(const _ak_slab *s, int order) {
  return __atomic_load_n(&s->head.owner, order);
}
static inline void _ak_slab_set_owner(_ak_slab *s, uintptr_t heap, int order) {
  __atomic_store_n(&s->head.owner, heap, order);
}

/** The slab whose list node is `n` (NULL stays NULL). */
static inline _ak_slab *_ak_slab_of_node(const _ak_dnode *n) {
  return _AK_DLIST_ENTRY((_ak_dnode *)(uintptr_t)n, _ak_slab, node);
}

/** The slab after `s` on its list (NULL: the last). */
static inline _ak_slab *_ak_slab_next(const _ak_slab *s) { return _ak_slab_of_node(s->node.next); }

/** The tag bit of `remote` (slots are at least 8-aligned). */
#define AK_SLAB_REMOTE_FULL ((uintptr_t)1)

/** The first slot of a `remote` value, without its tag. */
static inline void *_ak_slab_remote_list(void *remote) {
  return (void *)((uintptr_t)remote & ~AK_SLAB_REMOTE_FULL);
}

/** True if fresh slots of `s` are handed out in random order. */
static inline bool _ak_slab_shuffled(const _ak_slab *s) {
  return ak_harden_shuffle && !(s->flags & (AK_SLAB_F_TRACKED | AK_SLAB_F_REUSED));
}

/** Size of the header for `capacity` slots, rounded to `align`. */
size_t _ak_slab_header_size(size_t capacity, size_t align, bool checked);

/** Largest capacity of a slab of `slab_size` with slots of `slot` bytes
 *  aligned to `align`. */
size_t _ak_slab_capacity(size_t slab_size, size_t slot, size_t align, bool checked);

/** Initialises the header of fresh slab memory `mem` (`slab_size` bytes
 *  usable; a guard page, if any, lies beyond). `name` is the pool's. */
_ak_slab *_ak_slab_init(void *mem, void *pool, const char *name, size_t slab_size, size_t slot, size_t align,
                        bool checked);

/* ---- free-list links ---------------------------------------------------------
 * Every link stored in a free slot (local and remote lists) goes through
 * these two, which use the library's one link codec (arenakit/detail/
 * link.h) with the slab's key in the hardened build, 0 otherwise. */

/** The key the links in slots of `s` are encoded with (0: not encoded). */
static inline uintptr_t _ak_slab_key(const _ak_slab *s) {
  if (!ak_harden_encode) return 0; /* a constant: the codec is a plain load or store */
  return s->head.key;
}

/** The link stored in free slot `o` of `s`, decoded. */
static inline void *_ak_slab_link(const _ak_slab *s, const void *o) {
  return _ak_link_get(o, _ak_slab_key(s));
}

/** Stores `next` as the link of free slot `o` of `s`. */
static inline void _ak_slab_set_link(const _ak_slab *s, void *o, const void *next) {
  _ak_link_set(o, next, _ak_slab_key(s));
}

/** True if `p` is the start of a slot of `s`. */
static inline bool _ak_slab_is_slot(const _ak_slab *s, uintptr_t p) {
  return p >= s->start && p < s->end && (p - s->start) % s->slot == 0;
}

/** True if `p` lies in the slot area of `s` (no grid test). */
static inline bool _ak_slab_in(const _ak_slab *s, uintptr_t p) { return p - s->start < s->end - s->start; }

/** Hardened: aborts because the link in free slot `o` of `s` (decoded:
 *  `next`) leaves the slab: the free list was corrupted or forged. */
_Noreturn void _ak_slab_corrupt(const _ak_slab *s, const void *o, const void *next, const char *call);

/** True if the first word of `o` decodes to NULL or a slot address of
 *  `s`, as the link of a free slot does (hardened double-free check). */
static inline bool _ak_slab_looks_free(const _ak_slab *s, const void *o) {
  uintptr_t next = (uintptr_t)_ak_slab_link(s, o);
  return next == 0 || _ak_slab_in(s, next);
}

/** _ak_slab_is_free's search of the lists (out of line). */
bool _ak_slab_search(const _ak_slab *s, const void *o, bool local);

/** The hardened double-free check: true if `o` is on the remote free list
 *  of `s` or, with `local` (the caller owns the slab), on its local list.
 *  The lists are searched only when the first word of `o` decodes to a
 *  plausible link, so a live object costs one load and a compare, inline. */
static inline bool _ak_slab_is_free(const _ak_slab *s, const void *o, bool local) {
  return _ak_slab_looks_free(s, o) && _ak_slab_search(s, o, local);
}

/** Carves up to `bytes` worth of never-used slots onto the free list (so
 *  inline fast paths can pop them); in random order with the shuffle
 *  mitigation. */
void _ak_slab_carve(_ak_slab *s, size_t bytes);

/** Pops one slot: the free list first, then carving. NULL if full. With
 *  the links mitigation a link that leaves the slab aborts. */
static inline void *_ak_slab_pop(_ak_slab *s) {
  void *o = s->head.free.first;
  if (o) {
    void *next = _ak_slab_link(s, o);
    if (ak_harden_links && AK_UNLIKELY(next && !_ak_slab_in(s, (uintptr_t)next)))
      _ak_slab_corrupt(s, o, next, "ak_pool_alloc");
    AK_ASSERT(_ak_slab_is_slot(s, (uintptr_t)o)); /* a free list holds slots of its slab */
    s->head.free.first = next;
  } else if (s->bump < s->end) {
    if (_ak_slab_shuffled(s)) {
      /* Fresh slots in random order: carve a shuffled batch. */
      _ak_slab_carve(s, 4096);
      o = s->head.free.first;
      s->head.free.first = _ak_slab_link(s, o);
    } else {
      o = (void *)s->bump;
      s->bump += s->slot;
      AK_ASSERT(s->bump <= s->end); /* [bump, end) are whole never-used slots */
    }
  } else {
    return NULL;
  }
  /* Hardened: a handed-out slot holds no stale link, so that freeing it
   * untouched does not look like a double free (and search the lists). */
  if (ak_harden_double_free && !(s->flags & AK_SLAB_F_TRACKED)) _ak_link_set(o, NULL, 0);
  s->head.used++;
  AK_ASSERT(s->head.used <= s->capacity);
  return o;
}

/** Pops up to `max` (>= 1) slots: *n = 1 and one slot as _ak_slab_pop
 *  would, or, from a slab with no free slot on its list and never-used
 *  slots left in address order, *n >= 1 of them as one run starting at
 *  the result (slot i at result + i * slot), none of them touched (the
 *  caller writes them, where it wants the page faults). */
static inline void *_ak_slab_pop_run(_ak_slab *s, uint32_t max, uint32_t *n) {
  AK_ASSERT(max >= 1);
  *n = 1;
  if (max == 1 || s->head.free.first || s->bump >= s->end || _ak_slab_shuffled(s) ||
      (ak_harden_double_free && !(s->flags & AK_SLAB_F_TRACKED)))
    return _ak_slab_pop(s);
  size_t left = (s->end - s->bump) / s->slot;
  uint32_t k = left < max ? (uint32_t)left : max;
  void *o = (void *)s->bump;
  s->bump += (uintptr_t)k * s->slot;
  s->head.used += k;
  AK_ASSERT(s->bump <= s->end && s->head.used <= s->capacity); /* whole never-used slots, counted */
  *n = k;
  return o;
}

/** Pushes `o` back on the local free list. */
static inline void _ak_slab_push(_ak_slab *s, void *o) {
  AK_ASSERT(s->head.used > 0 && _ak_slab_is_slot(s, (uintptr_t)o)); /* a live slot of this slab */
  _ak_slab_set_link(s, o, s->head.free.first);
  s->head.free.first = o;
  s->head.used--;
}

/** Moves the remote list onto the local one (one atomic exchange, which
 *  clears the tag and AK_SLAB_F_REMOTE_FULL; a word holding the tag alone
 *  is left as it is, without an atomic operation); returns how many
 *  objects it held. */
uint32_t _ak_slab_collect(_ak_slab *s);

/* ---- lists of slabs ------------------------------------------------------------ */

/** A list of slabs (common/list.h, through each slab's `node`) with its
 *  length; each slab's head.state names the kind of list it is on. */
typedef _ak_dlist _ak_slab_list;

/** The first slab of `l` (NULL: empty). */
static inline _ak_slab *_ak_slab_first(const _ak_slab_list *l) { return _ak_slab_of_node(l->head); }

/** Puts `s` (on no list) first on `l`, a list of kind `which` (AK_SLAB_*). */
static inline void _ak_slab_list_push_front(_ak_slab_list *l, _ak_slab *s, uint32_t which) {
  AK_ASSERT(which >= AK_SLAB_AVAIL && which <= AK_SLAB_ABANDONED); /* a listed slab names its list */
  _ak_dlist_push_front(l, &s->node);
  s->head.state = which;
}

/** Puts `s` (on no list) last on `l`, a list of kind `which`. */
static inline void _ak_slab_list_push_back(_ak_slab_list *l, _ak_slab *s, uint32_t which) {
  AK_ASSERT(which >= AK_SLAB_AVAIL && which <= AK_SLAB_ABANDONED); /* a listed slab names its list */
  _ak_dlist_push_back(l, &s->node);
  s->head.state = which;
}

/** Puts `s` (on no list) before `at` on `l` (last if `at` is NULL). */
static inline void _ak_slab_list_insert_before(_ak_slab_list *l, _ak_slab *at, _ak_slab *s, uint32_t which) {
  AK_ASSERT(which >= AK_SLAB_AVAIL && which <= AK_SLAB_ABANDONED); /* a listed slab names its list */
  _ak_dlist_insert_before(l, at ? &at->node : NULL, &s->node);
  s->head.state = which;
}

/** Takes `s` off `l`, the list it is on. */
static inline void _ak_slab_list_remove(_ak_slab_list *l, _ak_slab *s) {
  AK_ASSERT(s->head.state != 0);
  _ak_dlist_remove(l, &s->node);
  s->head.state = 0;
  s->flags &= ~AK_SLAB_F_PENDING;
}

/** Puts `s` (on no list), which just left `full` by its owner's free,
 *  last on `pending`: the slabs waiting to be placed on `avail` by
 *  fullness, in one batch when `avail` runs dry. A pending slab is of kind
 *  AK_SLAB_AVAIL, so the owner's further frees into it stay on the inline
 *  paths (they change no list); AK_SLAB_F_PENDING tells the lists apart. */
static inline void _ak_slab_pending_push(_ak_slab_list *pending, _ak_slab *s) {
  _ak_slab_list_push_back(pending, s, AK_SLAB_AVAIL);
  s->flags |= AK_SLAB_F_PENDING;
}

/** The list of `avail` and `pending` that `s` (of kind AVAIL) is on. */
static inline _ak_slab_list *_ak_slab_avail_list(const _ak_slab *s, _ak_slab_list *avail,
                                                 _ak_slab_list *pending) {
  AK_ASSERT(s->head.state == AK_SLAB_AVAIL); /* on one of the two */
  return (s->flags & AK_SLAB_F_PENDING) ? pending : avail;
}

/** Checks the invariants of slab `s` (header, counts, carving, the local
 *  free list) and aborts naming `where` when one is broken; returns true,
 *  so that it is called as AK_ASSERT(_ak_slab_validate(s, where)), which
 *  only the checked build evaluates. The caller owns the slab's local
 *  state (its free list); the remote list is not walked. Walks the free
 *  list: O(capacity). */
bool _ak_slab_validate(const _ak_slab *s, const char *where);

#endif /* AK_POOL_SLAB_SLAB_H */
