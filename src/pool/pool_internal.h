/* pool_internal.h - the pool's private state, shared by the files of the
 * pool component (internal): pool.c (options, the serial core used by
 * AK_SYNC_NONE and AK_SYNC_SPINLOCK, slab lists and policies, stats),
 * pool_threads.c (AK_SYNC_THREADS) and pool_lockfree.c (AK_SYNC_LOCKFREE). */
#ifndef AK_POOL_INTERNAL_H
#define AK_POOL_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "arenakit/pool.h"
#include "slab/slab.h"

#ifndef AK_CHECKED
#define AK_CHECKED 0
#endif
/* Build flags as constants, so every mode's code is compiled and checked. */
static const bool ak_config_checked = AK_CHECKED;

/** Bytes of fresh slots carved onto a free list at a time for the inline
 *  paths (the rest of a slab stays untouched until needed). */
#define AK_POOL_CARVE_BYTES ((size_t)4096)

/** A doubly linked list of slabs with its length. */
typedef struct _ak_slab_list {
  _ak_slab *head, *tail;
  size_t n;
} _ak_slab_list;

typedef struct _ak_pool_heap _ak_pool_heap;

/** The pool. `pub` comes first: ak_pool * and _ak_pool_impl * convert. */
typedef struct _ak_pool_impl {
  ak_pool pub;
  ak_sync sync;
  size_t object_size, align, slot, slab_size, capacity;
  size_t guard;   /* hardened: bytes of guard page at the end of each slab (0: none) */
  bool inline_ok; /* the creator's headers match this build's link encoding */
  size_t max_objects, spare_limit;
  ak_backing backing;
  int fd;               /* file backing */
  size_t file_size;     /* bytes of the file in use (slabs end to end) */
  size_t *free_offsets; /* file offsets of released slabs, for reuse */
  size_t nfree_offsets, cap_free_offsets;
  char *path;
  char name[64];
  uint64_t id; /* unique over the process lifetime */
  atomic_bool defragment;
  unsigned tracked; /* AK_TRACK_MODE_* */
  bool debug;       /* checked build or tracked: the per-object hooks run */
  void *vg_pool;

  /* Serial core (NONE, SPINLOCK) and THREADS' shared lists: */
  _ak_slab_list avail;     /* slabs with free slots, fullest first */
  _ak_slab_list full;      /* slabs without free slots */
  _ak_slab_list spare;     /* empty slabs kept for reuse */
  _ak_slab_list abandoned; /* THREADS: slabs of exited threads */
  size_t live, peak_live;  /* serial modes: exact */

  /* Backing bookkeeping (under `mu` in concurrent modes). */
  pthread_mutex_t mu;
  size_t slabs, peak_slabs, slab_allocs, slab_releases;
  atomic_uintptr_t lf_lo, lf_hi; /* LOCKFREE, hardened: address range of the slabs */
  size_t lf_hdr;                 /* LOCKFREE: offset of the first slot in a slab */

  /* Contended words each on a cache line of their own (the block is
   * allocated 64-aligned): no false sharing between them. */
  _Alignas(64) atomic_int spin; /* AK_SYNC_SPINLOCK */

  /* AK_SYNC_LOCKFREE */
  _Alignas(64) _Atomic uint64_t lf_head; /* tag << 48 | slot pointer */
  _Alignas(64) atomic_size_t lf_live, lf_peak;

  /* AK_SYNC_THREADS */
  _ak_pool_heap *heaps;                      /* live heaps of this pool (under mu) */
  _Alignas(64) atomic_size_t t_live, t_peak; /* only when max_objects != 0 */
  struct _ak_pool_impl *next_threads_pool;   /* registry of THREADS pools */
} _ak_pool_impl;

static inline _ak_pool_impl *_ak_impl(const ak_pool *p) { return (_ak_pool_impl *)(uintptr_t)p; }

/* ---- pool.c: shared by the modes ---------------------------------------- */

void _ak_list_push_front(_ak_slab_list *l, _ak_slab *s, uint32_t which);
void _ak_list_push_back(_ak_slab_list *l, _ak_slab *s, uint32_t which);
void _ak_list_remove(_ak_slab_list *l, _ak_slab *s);

/** A fresh or spare slab for `p` (under `mu` in concurrent modes). NULL +
 *  errno + message on failure. */
_ak_slab *_ak_pool_slab_get(_ak_pool_impl *p);
/** Gives an empty slab back: to the spares if there is room, else to the
 *  backing. */
void _ak_pool_slab_put(_ak_pool_impl *p, _ak_slab *s);
/** Releases a slab to the backing unconditionally. */
void _ak_pool_slab_release(_ak_pool_impl *p, _ak_slab *s);

/** The slab of `o` if `o` is a slot of a slab of `p`; otherwise reports
 *  (checked build: abort with a message naming `call`) and returns NULL. */
_ak_slab *_ak_pool_slab_of(_ak_pool_impl *p, const void *o, const char *call);

/** _ak_pool_slab_of's common case inline: mask and one header check; the
 *  full checks (checked build) and the error report out of line. */
static inline _ak_slab *_ak_pool_slab_fast(_ak_pool_impl *p, const void *o, const char *call) {
  _ak_slab *s = (_ak_slab *)((uintptr_t)o & ~(uintptr_t)(p->slab_size - 1));
  if (AK_LIKELY(!ak_config_checked && s->magic == (AK_SLAB_MAGIC ^ (uintptr_t)p))) return s;
  return _ak_pool_slab_of(p, o, call);
}

/** Checked build: records slot `o` of `s` as live/free; aborts on a double
 *  free naming `call`. */
void _ak_pool_mark_live(_ak_pool_impl *p, _ak_slab *s, void *o);
void _ak_pool_mark_free(_ak_pool_impl *p, _ak_slab *s, void *o, const char *call);

/** Tool annotations of one slot (ASan poison, Valgrind mempool). */
void _ak_pool_track_alloc(_ak_pool_impl *p, void *o);
void _ak_pool_track_free(_ak_pool_impl *p, void *o);

/** Inserts `s` (just gained a free slot) into `list` by fullness: strictly
 *  sorted with the defragmenter, else within the first three positions
 *  (ARAL). */
void _ak_pool_list_place(_ak_pool_impl *p, _ak_slab_list *list, _ak_slab *s);
/** After `s` lost an object: keeps a defragmented list sorted. */
void _ak_pool_list_settle(_ak_pool_impl *p, _ak_slab_list *list, _ak_slab *s);

/** Reports an error: errno = err, ak_last_error() = "call: pool 'name': ...". */
void _ak_pool_error(_ak_pool_impl *p, int err, const char *call, const char *what);

/* ---- pool_threads.c ------------------------------------------------------------ */
void *_ak_threads_alloc(_ak_pool_impl *p);
void _ak_threads_free(_ak_pool_impl *p, void *o);
int _ak_threads_init(_ak_pool_impl *p);
void _ak_threads_destroy(_ak_pool_impl *p);
void _ak_threads_trim(_ak_pool_impl *p);
int _ak_threads_reserve(_ak_pool_impl *p, size_t n);
size_t _ak_threads_live(_ak_pool_impl *p);

/* ---- pool_lockfree.c ----------------------------------------------------------- */
void *_ak_lockfree_alloc(_ak_pool_impl *p);
void _ak_lockfree_free(_ak_pool_impl *p, void *o);
void _ak_lockfree_trim(_ak_pool_impl *p);
int _ak_lockfree_reserve(_ak_pool_impl *p, size_t n);

#endif /* AK_POOL_INTERNAL_H */
