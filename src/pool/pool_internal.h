/* SPDX-License-Identifier: MIT */
/* pool_internal.h - the pool's private state, shared by the files of the
 * pool component (internal). Top down:
 *   pool_api.c       the API: options and their validation, create,
 *                    destroy, and dispatch through the mode table
 *   the sync modes   (_ak_pool_mode, one instance each) pool_serial.c
 *                    (AK_SYNC_NONE, and the serial core that SPINLOCK
 *                    locks), pool_spinlock.c, pool_lockfree.c,
 *                    pool_threads.c; pool_magazine.c is the per-thread
 *                    front of SPINLOCK and LOCKFREE, pool_tls.c the
 *                    per-thread, per-pool state of the concurrent modes
 *   pool_core.c      the registry of pools and fork, slab lists
 *                    (fullest first), slab get/put under the reclaim policy
 *   pool_check.c     errors and checks (the slab of a pointer, bitmaps)
 *   pool_backing.c   where slabs come from (mmap, C heap, file)
 *   pool_table.c     the slab table by address, its counters
 *   slab.c           one slab: header, slots, free and remote lists
 * No file calls up into a file above it. */
#ifndef AK_POOL_INTERNAL_H
#define AK_POOL_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "arenakit/pool.h"
#include "common/assert.h"
#include "common/list.h"
#include "common/wordlock.h"
#include "pool/slab.h"

#ifndef AK_CHECKED
#define AK_CHECKED 0
#endif
/* Build flags as constants, so every mode's code is compiled and checked. */
static const bool _ak_config_checked = AK_CHECKED;
/* The checked and hardened builds validate every pointer that reaches a
 * free path before reading its slab header (the slab map, the slot grid, a
 * destroyed pool). */
static const bool _ak_config_validate = AK_CHECKED || AK_HARDENED != 0;

/** Bytes of fresh slots carved onto a free list at a time for the inline
 *  paths (the rest of a slab stays untouched until needed). */
#define AK_POOL_CARVE_BYTES ((size_t)4096)

/** A list of slabs (common/list.h, through each slab's `node`) with its
 *  length; each slab's `list` names the kind of list it is on. */
typedef _ak_dlist _ak_slab_list;

/** The first slab of `l` (NULL: empty). */
static inline _ak_slab *_ak_slab_first(const _ak_slab_list *l) { return _ak_slab_of_node(l->head); }

/** Puts `s` (on no list) first on `l`, a list of kind `which` (AK_SLAB_*). */
static inline void _ak_slab_list_push_front(_ak_slab_list *l, _ak_slab *s, uint32_t which) {
  _ak_dlist_push_front(l, &s->node);
  s->list = which;
}

/** Puts `s` (on no list) last on `l`, a list of kind `which`. */
static inline void _ak_slab_list_push_back(_ak_slab_list *l, _ak_slab *s, uint32_t which) {
  _ak_dlist_push_back(l, &s->node);
  s->list = which;
}

/** Puts `s` (on no list) before `at` on `l` (last if `at` is NULL). */
static inline void _ak_slab_list_insert_before(_ak_slab_list *l, _ak_slab *at, _ak_slab *s, uint32_t which) {
  _ak_dlist_insert_before(l, at ? &at->node : NULL, &s->node);
  s->list = which;
}

/** Takes `s` off `l`, the list it is on. */
static inline void _ak_slab_list_remove(_ak_slab_list *l, _ak_slab *s) {
  AK_ASSERT(s->list != 0);
  _ak_dlist_remove(l, &s->node);
  s->list = 0;
}

/* ---- pool_table.c: the slab table ----------------------------------------- */

#define AK_TABLE_SHARD_BITS 6
#define AK_TABLE_SHARDS (1u << AK_TABLE_SHARD_BITS)

/** One shard of the slab table: sorted slab addresses under a word lock,
 *  and the slabs obtained and released through it. */
typedef struct _ak_table_shard {
  _Alignas(64) atomic_int mu;
  size_t n;    /* written under `mu`, read without it by _ak_table_sample */
  size_t high; /* the most slabs this shard has held */
  size_t cap;
  uintptr_t *a;
  size_t allocs, releases;
} _ak_table_shard;

/** A pool's slab table (pool_table.c): every slab the pool holds, sharded
 *  by address. Leaf locks: taken inside any other lock, never around one. */
typedef struct _ak_slab_table {
  _ak_table_shard shard[AK_TABLE_SHARDS];
  /* High-water mark of the slab count, sampled (_ak_table_sample) when a
   * shard reaches a new high of its own and at every stats call. */
  _Alignas(64) atomic_size_t peak;
} _ak_slab_table;

/** Adds slab address `x`; -1 if out of memory (nothing changed). */
int _ak_table_add(_ak_slab_table *t, uintptr_t x);
/** Adds the shards' counts up and raises the sampled high-water mark. */
void _ak_table_sample(_ak_slab_table *t);
/** Removes slab address `x` (a no-op if absent). */
void _ak_table_del(_ak_slab_table *t, uintptr_t x);
/** Whether `x` is a slab address of the table. Any thread. */
bool _ak_table_has(_ak_slab_table *t, uintptr_t x);
/** Fills the slab fields of `out`: slabs, peak, bytes reserved and
 *  resident, slabs obtained and released. */
void _ak_table_stats(_ak_slab_table *t, size_t slab_size, ak_pool_stats *out);
/** Frees the table's arrays (the pool is being destroyed). */
void _ak_table_free(_ak_slab_table *t);
/** Whether `x` is the address of a live slab of any pool: a lock-free
 *  read of the process-wide slab map (two loads), or of `t` for an address
 *  beyond the map. Any thread; true means the header at `x` is mapped. */
bool _ak_table_known(_ak_slab_table *t, uintptr_t x);
/** Calls fn(slab, ctx) for every slab address of `t`, each shard under its
 *  lock: fn must not add to or remove from the table. */
void _ak_table_each(_ak_slab_table *t, void (*fn)(uintptr_t slab, void *ctx), void *ctx);
/** fork(): takes (releases) every shard lock of `t`, in index order
 *  (reverse order). */
void _ak_table_lock_all(_ak_slab_table *t);
void _ak_table_unlock_all(_ak_slab_table *t);

typedef struct _ak_pool_heap _ak_pool_heap;
typedef struct _ak_pool_mag _ak_pool_mag;
typedef struct _ak_tls_mode _ak_tls_mode;

typedef struct _ak_pool_impl _ak_pool_impl;

/** What a sync mode does behind the API: one instance per mode, in the
 *  mode's file (_ak_mode_none in pool_serial.c, _ak_mode_spinlock in
 *  pool_spinlock.c, _ak_mode_lockfree in pool_lockfree.c, _ak_mode_threads
 *  in pool_threads.c). The API reaches a mode only through p->mode; NULL
 *  members are steps a mode does not have. */
typedef struct _ak_pool_mode {
  const char *name;        /**< "none", "spinlock", "lockfree", "threads" (stats) */
  const _ak_tls_mode *tls; /**< its per-thread state (pool_tls.c), or NULL */
  /** The inline paths' initial state in the pool's head (ak_pool_create). */
  void (*init)(_ak_pool_impl *p);
  void *(*alloc)(_ak_pool_impl *p);        /**< ak_pool_alloc_slow */
  void (*free)(_ak_pool_impl *p, void *o); /**< ak_pool_free_slow */
  /** ak_pool_reserve, once the request is validated: 0 or an errno. */
  int (*reserve)(_ak_pool_impl *p, size_t n);
  void (*trim)(_ak_pool_impl *p);                    /**< ak_pool_trim */
  void (*set_defragment)(_ak_pool_impl *p, bool on); /**< ak_pool_set_defragment */
  /** Live objects and their high-water mark (stats, destroy). */
  void (*counts)(_ak_pool_impl *p, size_t *live, size_t *peak);
  /** ak_pool_destroy, first: brings the mode's state back into the slabs. */
  void (*settle)(_ak_pool_impl *p);
  /** ak_pool_stats_get, last: the mode's own slabs in the byte counts. */
  void (*stats)(_ak_pool_impl *p, ak_pool_stats *out);
  /** fork() child, no lock held (pool_core.c's handlers). */
  void (*fork_child)(_ak_pool_impl *p);
  /* The shared structure behind the magazines (SPINLOCK, LOCKFREE):
   * take: one batch as a chain, its length (0: out of memory, errno set);
   * give: a chain back (`n`: its length if a full batch is known, else 0);
   * on_lists: hardened, whether free slot `o` of `s` is in the structure. */
  uint32_t (*take)(_ak_pool_impl *p, void **chain);
  void (*give)(_ak_pool_impl *p, void *chain, uint32_t n);
  bool (*on_lists)(_ak_pool_impl *p, _ak_slab *s, void *o);
  /** A thread left the pool, its magazine given back (NULL: nothing to do). */
  void (*thread_left)(_ak_pool_impl *p);
} _ak_pool_mode;

extern const _ak_pool_mode _ak_mode_none, _ak_mode_spinlock, _ak_mode_lockfree, _ak_mode_threads;

/** The pool. `pub` comes first: ak_pool * and _ak_pool_impl * convert. */
struct _ak_pool_impl {
  ak_pool pub;
  const _ak_pool_mode *mode; /* what its sync mode does (the API dispatches through it) */
  /* ak_pool_alloc_slow and ak_pool_free_slow: the mode's alloc and free,
   * or variants its init chose for this pool (one load on the way). */
  void *(*alloc)(_ak_pool_impl *p);
  void (*free)(_ak_pool_impl *p, void *o);
  ak_sync sync;
  size_t object_size, slot, slab_size, capacity;
  size_t align;   /* of the first slot in a slab: the object's, or more (ak_pool_create) */
  size_t guard;   /* hardened: bytes of guard page at the end of each slab (0: none) */
  bool inline_ok; /* the creator's headers match this build's link encoding */
  size_t max_objects, spare_limit;
  bool release_empty; /* ak_pool_options.release_empty: no time-based reuse */
  ak_backing backing;
  int fd;           /* file backing (under file_mu, as the fields below) */
  size_t file_size; /* bytes of the file in use: file slots (slabs) end to end */
  /* The free file slots (slot i: offset i * slab_size), a stack with each
   * slot's place in it, so that a release pushes, a reuse pops and the
   * tail shrink takes any slot out in O(1). Both arrays hold a place for
   * every slot of the file, grown before the file grows: a release never
   * allocates, so no free slot is ever lost. file_pos[i]: the index of
   * slot i in file_free, or SIZE_MAX if the slot is in use. */
  size_t *file_free, *file_pos;
  size_t nfile_free, cap_file_slots;
  char *path;
  char name[64];
  uint64_t id;                     /* unique over the process lifetime */
  struct _ak_pool_impl *next_pool; /* registry of every live pool (pool_core.c, under g_pools_mu) */
  bool destroyed;                  /* checked/hardened: a tombstone kept after ak_pool_destroy */
  atomic_bool defragment;
  unsigned tracked; /* AK_TRACK_MODE_* */
  bool debug;       /* checked build or tracked: the per-object hooks run */
  void *vg_pool;

  /* Serial core (NONE, SPINLOCK) and THREADS' shared lists: */
  _ak_slab_list avail;     /* slabs with free slots, fullest first */
  _ak_slab_list full;      /* slabs without free slots */
  _ak_slab_list spare;     /* LOCKFREE: slabs taken down by a trim (pool_lockfree.c) */
  _ak_slab_list abandoned; /* THREADS: slabs of exited threads */
  size_t live, peak_live;  /* serial modes: exact */

  /* `mu`: the shared lists of the concurrent modes. The slab counters are
   * the slab table's (pool_table.c); the file backing's state is under
   * `file_mu`, a leaf word lock, so that a slab is obtained and released
   * without the pool's own lock (AK_SYNC_THREADS calls the backing outside
   * `mu`, so that slabs are obtained and given back without a pool lock). */
  pthread_mutex_t mu;
  atomic_int file_mu;
  atomic_uintptr_t lf_lo, lf_hi; /* SPINLOCK, LOCKFREE, hardened: address range of the slabs */

  /* SPINLOCK and LOCKFREE: the shared words, all on one cache line (the
   * block is allocated 64-aligned). A magazine touches them together once
   * per batch (flush its count, then lock or pop/push), so a batch costs
   * one transfer of this line between cores, not one per word; no fast
   * path reads them (pool_magazine.c). */
  _Alignas(64) atomic_int spin; /* AK_SYNC_SPINLOCK */
  _Atomic uint64_t lf_head;     /* LOCKFREE: tag << 48 | first slot of the top batch */
  /* LOCKFREE: slots outside the stack: in magazines, live, or being
   * popped (a popper adds a whole batch before its CAS and gives back the
   * excess). Never below the true count, so 0 proves that every slot is
   * on the stack (trim). */
  atomic_size_t lf_out;
  /* LOCKFREE: the reclaim clock (ms) when the stack was last taken down
   * for address order (0: never; reorder in pool_lockfree.c). */
  _Atomic uint64_t lf_reordered;
  /* live = mag_live + the `net` of every magazine (exact when no thread
   * is inside a call); with max_objects every call updates mag_live, so
   * it is exact at all times and the cap is enforced with it. */
  atomic_size_t mag_live, mag_peak;

  /* Magazine bookkeeping (pool_magazine.c), off the contended line. */
  _Alignas(64) _ak_dlist mags; /* magazines of live threads (under mu) */

  /* THREADS, SPINLOCK, LOCKFREE: the registry of pool_tls.c. */
  const _ak_tls_mode *tls_mode;        /* the mode's hooks (NULL: not registered) */
  struct _ak_pool_impl *next_tls_pool; /* registry of live pools (under its g_mu) */

  /* AK_SYNC_THREADS */
  _ak_dlist heaps;                           /* live heaps of this pool (under mu) */
  _Alignas(64) atomic_size_t t_live, t_peak; /* only when max_objects != 0 */
  /* Bumped when a remote free may have given a slot to a slab on its
   * owner's full list: the owners walk their full lists only when it
   * changed (pool_threads.c, full_push). */
  atomic_size_t full_epoch;
  atomic_bool t_adoptable; /* set when a slab is abandoned; cleared under mu when none is */

  _ak_slab_table table; /* every slab of the pool (ak_pool_owns, checks, counters) */
  /* Empty slabs kept for reuse under the reclaim policy (common/reclaim.h):
   * newest first, decommitted after the purge delay, released after the
   * release delay or past spare_slabs; with release_empty, untimed and
   * capped at spare_slabs (0: an empty slab goes back at once). Its own
   * leaf lock, taken inside `mu` and `spin`; the background thread purges
   * it too. */
  _ak_spare_set spares;
};

static inline _ak_pool_impl *_ak_impl(const ak_pool *p) { return (_ak_pool_impl *)(uintptr_t)p; }

/* ---- pool_core.c: the registry, slab lists, slabs --------------------------- */

/** A new pool id (never reused over the process lifetime). */
uint64_t _ak_pools_new_id(void);
/** Adds `p` to the registry of live pools. */
void _ak_pools_add(_ak_pool_impl *p);
/** Takes `p` out of the registry. */
void _ak_pools_remove(_ak_pool_impl *p);
/** Checked and hardened builds: keeps destroyed `p` as a tombstone and
 *  returns the oldest tombstone it replaces (to be freed; may be NULL). */
_ak_pool_impl *_ak_pools_bury(_ak_pool_impl *p);
/** The name of the live pool one of whose slabs contains `addr`, or NULL. */
const char *_ak_pools_owner_name(uintptr_t addr);
/** The spare set's view of a pool's slabs (common/reclaim.h). */
extern const _ak_spare_ops _ak_pool_spare_ops;
/** The inline paths' state when they are off: every call goes slow. */
void _ak_pool_inline_off(_ak_pool_impl *p);
/** The spinlock of AK_SYNC_SPINLOCK (around the serial core). */
static inline void _ak_spin_lock(_ak_pool_impl *p) { _ak_word_lock(&p->spin); }
static inline void _ak_spin_unlock(_ak_pool_impl *p) { _ak_word_unlock(&p->spin); }

/* ---- pool_backing.c ------------------------------------------------------------- */

/** Gives slab memory `m` (file offset `off`) back to the backing. */
void _ak_pool_backing_put(_ak_pool_impl *p, void *m, size_t off);
/** Reports a failed file operation `what` at offset `off` (errno = err). */
void _ak_pool_file_error(_ak_pool_impl *p, int err, const char *what, size_t off);

/* ---- pool_serial.c: the serial core (NONE; SPINLOCK under its lock) ---------------- */

/** ak_pool_reserve and ak_pool_trim of the serial core (the caller holds
 *  the spinlock in AK_SYNC_SPINLOCK). */
int _ak_serial_reserve(_ak_pool_impl *p, size_t n);
void _ak_serial_trim(_ak_pool_impl *p);
/** Live objects of the serial core and their sampled high-water mark. */
void _ak_serial_counts(_ak_pool_impl *p, size_t *live, size_t *peak);

/* ---- shared by the modes ---------------------------------------- */

/** A fresh or spare slab for `p` (under `mu` in concurrent modes). NULL +
 *  errno + message on failure. */
_ak_slab *_ak_pool_slab_get(_ak_pool_impl *p);
/** A fresh slab from the backing; needs no pool lock (the slab table, the
 *  counters and the file backing have their own leaf locks). NULL + errno +
 *  message naming `call` on failure. */
_ak_slab *_ak_pool_slab_new(_ak_pool_impl *p, const char *call);
/** Makes an empty slab ready for reuse (lazy carving from its start). */
void _ak_pool_slab_reset(_ak_slab *s);
/** A spare slab of `p` (its spare set, or LOCKFREE's taken-down list under
 *  `mu`), reset and ready for use; NULL if none (errno + message if a file
 *  spare's blocks cannot be allocated again). Needs no lock for the set. */
_ak_slab *_ak_pool_slab_spare(_ak_pool_impl *p);
/** Gives an empty slab (on no list) to the pool's spare set, which keeps
 *  or releases it as the reclaim policy says; needs no pool lock. */
void _ak_pool_slab_put(_ak_pool_impl *p, _ak_slab *s);
/** Releases a slab to the backing unconditionally; needs no pool lock. */
void _ak_pool_slab_release(_ak_pool_impl *p, _ak_slab *s);
/** Gives the pages of an empty slab's slots back while it stays mapped
 *  (the header page stays): decommitted, or punched out of the file. */
void _ak_pool_slab_decommit(_ak_pool_impl *p, _ak_slab *s);

/** The slab of `o` if `o` is a slot of a slab of `p`; otherwise aborts
 *  with one message naming `call`, `o` and the reason. The checked and
 *  hardened builds read no header the slab map does not know (a foreign,
 *  unmapped or released address is never dereferenced) and test the slot
 *  grid; the release build checks the header's magic only. */
_ak_slab *_ak_pool_slab_of(_ak_pool_impl *p, const void *o, const char *call);

/* Writes the inline state of current slab `c` (its free list, live count
 * and never-used slots) back to the slab's header and returns the slab:
 * the first step of checking a slab in, for the serial core (mirror_in)
 * and a thread heap (heap_checkin), which then clear `c` each in their own
 * order. `c` has a slab checked out (hot_slab > 1). */
static inline _ak_slab *_ak_pool_cur_writeback(const _ak_pool_cur *c) {
  _ak_slab *s = (_ak_slab *)c->hot_slab;
  AK_ASSERT(c->hot_slab > 1 && c->hot_used <= s->capacity && c->bump <= s->end);
  s->free = c->hot.first;
  s->used = (uint32_t)c->hot_used;
  s->bump = c->bump;
  return s;
}

/** _ak_pool_slab_of's common case inline (_ak_pool_slab_ok: whether slab
 *  `s` of `o` passes it): mask and one header check; the
 *  checked and hardened builds first test the slot grid (one
 *  multiplication, as _ak_pool_on_grid) and the slab map (two loads, so no
 *  header is read that the map does not know). Anything else (a destroyed
 *  pool, an address beyond the map, slots spanning 4 GiB or more) and the
 *  error report go out of line. */
static inline bool _ak_pool_slab_ok(const _ak_pool_impl *p, const void *o, const _ak_slab *s) {
  if (!_ak_config_validate) return s->magic == (AK_SLAB_MAGIC ^ (uintptr_t)p);
  return !p->destroyed && _ak_pool_on_grid(&p->pub, o, (uintptr_t)s) && _ak_pool_known_slab((uintptr_t)s) &&
         s->magic == (AK_SLAB_MAGIC ^ (uintptr_t)p);
}
static inline _ak_slab *_ak_pool_slab_fast(_ak_pool_impl *p, const void *o, const char *call) {
  _ak_slab *s = (_ak_slab *)((uintptr_t)o & ~(uintptr_t)(p->slab_size - 1));
  if (AK_LIKELY(_ak_pool_slab_ok(p, o, s))) return s;
  return _ak_pool_slab_of(p, o, call);
}

/** Aborts with "ak_pool_free(o): double free in pool 'name'" (the one
 *  double-free report of every mode). */
_Noreturn void _ak_pool_double_free(_ak_pool_impl *p, const void *o);

/** Checked build: records slot `o` of `s` as live/free; aborts on a double
 *  free naming `call`. */
void _ak_pool_mark_live(_ak_pool_impl *p, _ak_slab *s, void *o);
void _ak_pool_mark_free(_ak_pool_impl *p, _ak_slab *s, void *o, const char *call);

/** Tool annotations of one slot (ASan poison, Valgrind mempool). */
void _ak_pool_track_alloc(_ak_pool_impl *p, void *o);
void _ak_pool_track_free(_ak_pool_impl *p, void *o);

/* Inline: every slow free of the serial core and of a heap calls them (the
 * settle is one load and a branch without the defragmenter). */
/** Inserts `s` (just gained a free slot) into `list` by fullness: strictly
 *  sorted with the defragmenter, else within the first three positions
 *  (a bounded walk). */
static inline void _ak_pool_list_place(_ak_pool_impl *p, _ak_slab_list *list, _ak_slab *s) {
  bool strict = atomic_load_explicit(&p->defragment, memory_order_relaxed);
  _ak_slab *at = _ak_slab_first(list);
  /* Fullest first: skip slabs holding more objects. The walk is limited
   * to the first three positions; the defragmenter sorts exactly. */
  for (int depth = 0; at && at->used > s->used && (strict || depth < 2); depth++) at = _ak_slab_next(at);
  _ak_slab_list_insert_before(list, at, s, s->list ? s->list : AK_SLAB_AVAIL);
  /* Fullest first: strictly, every slab before `s` holds more objects. */
  AK_ASSERT(!strict || !_ak_slab_next(s) || _ak_slab_next(s)->used <= s->used);
}

/** After `s` lost an object: keeps a defragmented list sorted. */
static inline void _ak_pool_list_settle(_ak_pool_impl *p, _ak_slab_list *list, _ak_slab *s) {
  if (!atomic_load_explicit(&p->defragment, memory_order_relaxed)) return;
  _ak_slab *at = _ak_slab_next(s);
  if (!at || at->used <= s->used) return;
  uint32_t which = s->list;
  _ak_slab_list_remove(list, s);
  while (at && at->used > s->used) at = _ak_slab_next(at);
  _ak_slab_list_insert_before(list, at, s, which);
  AK_ASSERT(!at || at->used <= s->used); /* sorted again around `s` */
}

/** Reports an error: errno = err, ak_last_error() = "call: pool 'name': ...". */
void _ak_pool_error(_ak_pool_impl *p, int err, const char *call, const char *what);

/* ---- pool_tls.c: per-thread, per-pool state of THREADS, SPINLOCK, LOCKFREE ---- */

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
   *  `p` from the mode's own cache of the calling thread (pool_tls.c drops
   *  it from _ak_pool_tcache). */
  void (*destroy)(_ak_pool_impl *p);
  /** Thread exit, after the walk: empties the mode's own thread-local
   *  cache, whose entries may point to freed states (NULL: the mode has
   *  none besides _ak_pool_tcache, which pool_tls.c empties). */
  void (*forget)(void);
};

/** Registers a new THREADS, SPINLOCK or LOCKFREE pool with its mode's
 *  hooks (sets p->tls_mode); makes the thread-exit key on first use. */
void _ak_tls_register(_ak_pool_impl *p, const _ak_tls_mode *mode);
/** Unregisters `p` (ak_pool_destroy): under g_mu, takes it out of the
 *  registry and calls its mode's `destroy`. Afterwards no thread exit
 *  touches `p`. */
void _ak_tls_unregister(_ak_pool_impl *p);
/** fork(): takes (releases) the registry's g_mu (pool_core.c's fork handlers,
 *  after g_pools_mu and before any pool's own locks). */
void _ak_tls_fork_lock(void);
void _ak_tls_fork_unlock(void);
/** The calling thread's state for `p` from the thread's table (the slow
 *  lookup behind each mode's cache). If there is none and `create`: makes
 *  room (pruning entries of destroyed pools, then growing), makes one with
 *  the mode's `create`, adds it and arms the thread-exit walk. NULL if none
 *  (or out of memory). */
void *_ak_tls_get(_ak_pool_impl *p, bool create);
/** Zeroed memory for a per-thread state of `size` bytes on cache lines of
 *  its own (the owner writes it on every call; another thread's state must
 *  not share a line); free() it. NULL if out of memory. */
void *_ak_tls_state_alloc(size_t size);

/* ---- pool_threads.c ------------------------------------------------------------ */
/** The hooks of AK_SYNC_THREADS heaps (pool_tls.c). */
extern const _ak_tls_mode _ak_threads_tls;

/* ---- pool_magazine.c: the per-thread front of SPINLOCK and LOCKFREE ------------ */

/** Objects a batch holds at most: a magazine refills and spills this many
 *  at a time, and caches at most twice as many. */
#define AK_MAG_BATCH 64u

/** The hooks of SPINLOCK and LOCKFREE magazines (pool_tls.c); `destroy`
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
/** Hands the contents of every thread's magazine back to the shared
 *  structure now: marks them all taken, one barrier (membarrier(2)), waits
 *  out each owner at work on its magazine, then takes it. */
void _ak_mag_flush_all(_ak_pool_impl *p);
/** fork() child: no magazine of `p` is at work or being taken. */
void _ak_mag_fork_child(_ak_pool_impl *p);
/** Objects allocated and not yet freed (exact when no call is running). */
size_t _ak_mag_live(_ak_pool_impl *p);
/** Its high-water mark (exact with max_objects, else sampled). */
size_t _ak_mag_peak(_ak_pool_impl *p);
/** Both, as _ak_pool_mode.counts. */
void _ak_mag_counts(_ak_pool_impl *p, size_t *live, size_t *peak);

/** Links of slots held by magazines and LOCKFREE batches: chains cross
 *  slabs, so each link is encoded with the key of the slab of the slot
 *  that stores it (_ak_slab_link of that slab). */
static inline _ak_slab *_ak_pool_slab_base(const _ak_pool_impl *p, const void *o) {
  return (_ak_slab *)((uintptr_t)o & ~(uintptr_t)(p->slab_size - 1));
}
static inline void *_ak_chain_next(const _ak_pool_impl *p, const void *o) {
  return _ak_slab_link(_ak_pool_slab_base(p, o), o);
}
static inline void _ak_chain_set(const _ak_pool_impl *p, void *o, const void *next) {
  _ak_slab_set_link(_ak_pool_slab_base(p, o), o, next);
}

/** Hardened: could `next` be a slot of `p`? NULL, or within the address
 *  range of its slabs and on the slot grid of a slab; no memory is read (a
 *  wild value must not fault here). Inline: every magazine pop and free
 *  asks. The grid test is one multiplication (_ak_pool_on_grid's) where
 *  the slots span less than 4 GiB, a division otherwise. */
static inline bool _ak_pool_plausible(const _ak_pool_impl *p, uintptr_t next) {
  if (next == 0) return true;
  uintptr_t lo = atomic_load_explicit(&p->lf_lo, memory_order_relaxed);
  if (next - lo >= atomic_load_explicit(&p->lf_hi, memory_order_relaxed) - lo) return false;
  uint64_t n = (uint64_t)((next & (p->slab_size - 1)) - p->pub.slot_first), div = p->pub.slot_div;
  if (AK_LIKELY(div != 0)) return n < p->pub.slot_span && n * div <= div - 1;
  return n < (uint64_t)p->capacity * p->slot && n % p->slot == 0;
}
/** Widens the hardened address range to cover slab `s`. */
void _ak_pool_note_slab(_ak_pool_impl *p, const _ak_slab *s);

/* ---- pool_serial.c: the shared structure behind SPINLOCK magazines ------------- */
/** Takes up to `n` objects from the serial core under the spinlock, as a
 *  chain; returns how many (0: out of memory, errno set). */
uint32_t _ak_spin_take(_ak_pool_impl *p, void **chain, uint32_t n);
/** Gives a chain back to the serial core under the spinlock; returns its
 *  length. */
size_t _ak_spin_give(_ak_pool_impl *p, void *chain);
/** Hardened: true if slot `o` of slab `s` is on the slab's free lists
 *  (SPINLOCK; takes the lock). The magazine's double-free search asks it
 *  when a freed object's first word looks like a link, so that spilled
 *  batches need no search. */
bool _ak_spin_on_lists(_ak_pool_impl *p, _ak_slab *s, void *o);

/* ---- pool_lockfree.c: the shared structure behind LOCKFREE magazines ----------- */
/** Pops one batch (a chain of at most AK_MAG_BATCH slots); returns its
 *  length (0: out of memory, errno set). */
uint32_t _ak_lockfree_take(_ak_pool_impl *p, void **chain);
/** Pushes a chain back: with `n` != 0, a NULL-terminated chain of exactly
 *  `n` <= AK_MAG_BATCH slots, pushed as one batch without walking it;
 *  with `n` == 0, a chain of any length, walked and cut into batches.
 *  Returns its length. */
size_t _ak_lockfree_give(_ak_pool_impl *p, void *chain, uint32_t n);
/** Hardened double-free search of the stack. */
bool _ak_lockfree_on_stack(_ak_pool_impl *p, void *o);
void _ak_lockfree_trim(_ak_pool_impl *p);
int _ak_lockfree_reserve(_ak_pool_impl *p, size_t n);

#endif /* AK_POOL_INTERNAL_H */
