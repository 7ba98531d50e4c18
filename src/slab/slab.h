/* slab.h - the slab layer (internal).
 *
 * A slab is a block of `slab_size` bytes aligned to `slab_size`, holding
 * `capacity` slots of one size after its header. The slab of any slot is
 * `addr & ~(slab_size - 1)`: no per-object header, no lookup table. A free
 * slot stores the link to the next free slot in its first word.
 *
 * Slots are carved lazily: `bump` is the first slot never handed out, so a
 * fresh slab touches only the pages it uses. Invariant (owner's view):
 *   used + |free list| + |remote list| + (end - bump) / slot == capacity
 * Slabs come from a backing (mmap, C heap, or a shared file mapping)
 * through the OS layer; this layer never calls the system itself. */
#ifndef AK_SLAB_H
#define AK_SLAB_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AK_SLAB_MAGIC UINT64_C(0x616b2d736c616221) /* "ak-slab!" */

typedef struct _ak_slab _ak_slab;

/** Which list of its pool a slab is on. */
enum { AK_SLAB_AVAIL = 1, AK_SLAB_FULL = 2, AK_SLAB_SPARE = 3, AK_SLAB_ABANDONED = 4 };

struct _ak_slab {
  /* The first three fields are ak_pool_slab_head (arenakit/pool.h): the
   * inline free of AK_SYNC_NONE reads them. */
  void *free;     /* local free list (owner only) */
  uint32_t used;  /* live objects counted by the owner */
  uint32_t list;  /* AK_SLAB_* */
  uint64_t magic; /* AK_SLAB_MAGIC ^ (uintptr_t)owner pool */
  void *pool;     /* the owning pool (struct _ak_pool_impl *) */
  _ak_slab *prev; /* neighbours on the list named by `list` */
  _ak_slab *next;
  uintptr_t bump;           /* first never-carved slot; == end when all carved */
  uintptr_t start;          /* first slot */
  uintptr_t end;            /* start + capacity * slot */
  size_t slot;              /* slot size in bytes */
  uint32_t capacity;        /* slots in this slab */
  uint32_t flags;           /* backing details (AK_SLAB_F_*) */
  size_t file_offset;       /* file backing: where this slab lives in the file */
  _Atomic(void *) remote;   /* frees by other threads (AK_SYNC_THREADS) */
  _Atomic(uintptr_t) owner; /* owning thread heap, 0 = abandoned (THREADS) */
  void *heap;               /* owning heap (owner's copy, THREADS) */
  uint64_t bitmap[];        /* checked build: 1 bit per live slot */
};

/** Size of the header for `capacity` slots, rounded to `align`. */
size_t _ak_slab_header_size(size_t capacity, size_t align, bool checked);

/** Largest capacity of a slab of `slab_size` with slots of `slot` bytes
 *  aligned to `align`. */
size_t _ak_slab_capacity(size_t slab_size, size_t slot, size_t align, bool checked);

/** Initialises the header of fresh slab memory `mem`. */
_ak_slab *_ak_slab_init(void *mem, void *pool, size_t slab_size, size_t slot, size_t align, bool checked);

/** Pops one slot: the free list first, then carving. NULL if full. */
static inline void *_ak_slab_pop(_ak_slab *s) {
  void *o = s->free;
  if (o) {
    s->free = *(void **)o;
  } else if (s->bump < s->end) {
    o = (void *)s->bump;
    s->bump += s->slot;
  } else {
    return NULL;
  }
  s->used++;
  return o;
}

/** Carves up to `bytes` worth of never-used slots onto the free list (so
 *  inline fast paths can pop them). */
void _ak_slab_carve(_ak_slab *s, size_t bytes);

/** Pushes `o` back on the local free list. */
static inline void _ak_slab_push(_ak_slab *s, void *o) {
  *(void **)o = s->free;
  s->free = o;
  s->used--;
}

/** Moves the remote list onto the local one (one atomic exchange);
 *  returns how many objects it held. */
uint32_t _ak_slab_collect(_ak_slab *s);

/** True if `p` is the start of a slot of `s`. */
static inline bool _ak_slab_is_slot(const _ak_slab *s, uintptr_t p) {
  return p >= s->start && p < s->end && (p - s->start) % s->slot == 0;
}

#endif /* AK_SLAB_H */
