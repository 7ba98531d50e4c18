/* SPDX-License-Identifier: MIT */
/* pool.h - the pool: what every part of the pool component shares
 * (internal). The parts, bottom up:
 *   slab/        one slab (slab.c), where slabs are (map.c: the slab
 *                table and the process-wide slab map), where their memory
 *                comes from (backing.c: anonymous memory and the C heap,
 *                backing_file.c: a shared file), the empty slabs kept for
 *                reuse (spares.c). Knows no sync mode.
 *   check.c      error reports and the checked lookup of a pointer's slab
 *   registry.c   the live pools and the fork handlers that hold their locks
 *   serial.c     the serial core: one owner's lists of slabs, fullest
 *                first (pool/serial.h), under NONE and SPINLOCK
 *   modes/       one file a sync mode, each with its mode table
 *                (_ak_pool_mode): none.c, spinlock.c, lockfree.c, threads/;
 *                and what the concurrent modes share (pool/modes.h): the
 *                per-thread state registry (tls.c) and the magazine front
 *                of SPINLOCK and LOCKFREE (magazine/). A mode reaches
 *                another mode only through the mode table.
 *   pool.c       the API: options, create, destroy, dispatch to p->mode
 * No include or call cycle between files, slab/ includes no mode, no file
 * of modes/ includes another (tests/check_layout.sh). */
#ifndef AK_POOL_POOL_H
#define AK_POOL_POOL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "arenakit/pool.h"
#include "common/assert.h"
#include "common/error.h"
#include "common/list.h"
#include "common/wordlock.h"
#include "pool/inside.h"
#include "pool/slab/backing.h"
#include "pool/slab/map.h"
#include "pool/slab/slab.h"
#include "pool/state.h"

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

typedef struct _ak_pool_heap _ak_pool_heap;
typedef struct _ak_pool_mag _ak_pool_mag;
typedef struct _ak_tls_mode _ak_tls_mode;

typedef struct _ak_pool_impl _ak_pool_impl;

/** What a sync mode does behind the API: one instance per mode, in the
 *  mode's file (_ak_mode_none in modes/none.c, _ak_mode_spinlock in
 *  modes/spinlock.c, _ak_mode_lockfree in modes/lockfree.c,
 *  _ak_mode_threads in modes/threads/threads.c). The API reaches a mode only through p->mode; NULL
 *  members are steps a mode does not have. */
typedef struct _ak_pool_mode {
  const char *name;        /**< "none", "spinlock", "lockfree", "threads" (stats) */
  const _ak_tls_mode *tls; /**< its per-thread state (modes/tls.c), or NULL */
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
  /** ak_pool_destroy, once no thread holds state of the pool: releases
   *  every slab the mode lists. */
  void (*release)(_ak_pool_impl *p);
  /** ak_pool_stats_get, last: the mode's own slabs in the byte counts. */
  void (*stats)(_ak_pool_impl *p, ak_pool_stats *out);
  /** fork(): takes (releases) the mode's own lock, after the pool's `mu`
   *  and before its leaf locks (registry.c's handlers). */
  void (*fork_lock)(_ak_pool_impl *p);
  void (*fork_unlock)(_ak_pool_impl *p);
  /** fork() child, no lock held (registry.c's handlers). */
  void (*fork_child)(_ak_pool_impl *p);
  /* The shared structure behind the magazines (SPINLOCK, LOCKFREE):
   * take: at least one and at most `want` (a multiple of AK_MAG_BATCH)
   *   objects as one chain, in the order to hand them out (SPINLOCK: up
   *   to `want`, LOCKFREE: one batch); its length (0: out of memory,
   *   errno set);
   * give: a chain back (`n`: its length if a full batch is known, else 0);
   * on_lists: hardened, whether free slot `o` of `s` is in the structure. */
  uint32_t (*take)(_ak_pool_impl *p, void **chain, uint32_t want);
  void (*give)(_ak_pool_impl *p, void *chain, uint32_t n);
  bool (*on_lists)(_ak_pool_impl *p, _ak_slab *s, void *o);
  /** The mode's own due reclaim steps (ak_pool_stats_get, the reclaim
   *  thread's pass through registry.c; NULL: none): the reclaim clock (ms)
   *  at which it wants to run again, UINT64_MAX if never. */
  uint64_t (*tick)(_ak_pool_impl *p);
  /** A thread left the pool, its magazine given back (NULL: nothing to do). */
  void (*thread_left)(_ak_pool_impl *p);
  /** A call made by a signal handler that interrupted the calling thread
   *  inside a call of the library's pool code (_ak_pool_inside): takes no
   *  lock, waits for nothing and touches no per-thread state (LOCKFREE;
   *  NULL: refused, _ak_pool_nested_alloc). */
  void *(*alloc_nested)(_ak_pool_impl *p);
  void (*free_nested)(_ak_pool_impl *p, void *o);
} _ak_pool_mode;

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
  size_t align;             /* of the first slot in a slab: the object's, or more (ak_pool_create) */
  size_t guard;             /* hardened: bytes of guard page at the end of each slab (0: none) */
  bool inline_ok;           /* the creator's headers match this build's link encoding, and the
                               pool is not sampled (`prof`): its inline paths may be on */
  bool prof;                /* sampled by the heap profiler (on when it was created): every call
                               takes the slow path, which samples and forgets (pool/prof.c) */
  _Atomic size_t prof_live; /* objects of the pool the profiler keeps */
  size_t max_objects, spare_limit;
  bool release_empty; /* ak_pool_options.release_empty: no time-based reuse */
  ak_backing backing;
  _ak_pool_file file; /* AK_BACKING_FILE (slab/backing_file.c) */
  char name[64];
  uint64_t id;                     /* unique over the process lifetime */
  struct _ak_pool_impl *next_pool; /* registry of every live pool (registry.c, under g_pools_mu) */
  bool destroyed;                  /* checked/hardened: a tombstone kept after ak_pool_destroy */
  atomic_bool defragment;
  unsigned tracked; /* AK_TRACK_MODE_* */
  bool debug;       /* checked build or tracked: the per-object hooks run */
  void *vg_pool;

  /* The shared lists of the concurrent modes and their per-thread state.
   * The slab counters are the slab table's; the file backing and the
   * spare set have leaf locks of their own, so that a slab is obtained
   * and released without `mu` (AK_SYNC_THREADS does so outside it). */
  pthread_mutex_t mu;
  /* THREADS, SPINLOCK, LOCKFREE: the registry of modes/tls.c. */
  const _ak_tls_mode *tls_mode;        /* the mode's hooks (NULL: not registered) */
  struct _ak_pool_impl *next_tls_pool; /* registry of live pools (under its g_mu) */

  /* The sync mode's own state (pool/state.h): only its mode's is used. */
  union {
    struct {
      _ak_mag_state mag; /* SPINLOCK, LOCKFREE: the magazine front */
      union {
        _ak_serial_state serial;     /* NONE, SPINLOCK: the serial core */
        _ak_lockfree_state lockfree; /* LOCKFREE: its slabs */
      };
    };
    _ak_threads_state threads; /* THREADS */
  };

  _ak_slab_table table; /* every slab of the pool (ak_pool_owns, checks, counters) */
  /* Empty slabs kept for reuse under the reclaim policy (common/reclaim.h):
   * newest first, decommitted after the purge delay, released after the
   * release delay or past spare_slabs; with release_empty, untimed and
   * capped at spare_slabs (0: an empty slab goes back at once). Its own
   * leaf lock, taken inside `mu` and the mode's lock; the background thread purges
   * it too. */
  _ak_spare_set spares;
};

static inline _ak_pool_impl *_ak_impl(const ak_pool *p) { return (_ak_pool_impl *)(uintptr_t)p; }

/* ---- registry.c: the live pools ------------------------------------------------ */

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

/* ---- check.c: errors and checks -------------------------------------------------- */

/** Reports an error: errno = err, ak_last_error() = "call: pool 'name': ...". */
static inline void _ak_pool_error(_ak_pool_impl *p, int err, const char *call, const char *what) {
  _ak_error(err, "%s: pool '%s': %s", call, p ? p->name : "?", what);
}
/** Aborts with "ak_pool_free(o): double free in pool 'name'" (the one
 *  double-free report of every mode). */
_Noreturn void _ak_pool_double_free(_ak_pool_impl *p, const void *o);
/** _ak_pool_slab_find's out-of-line part: the slab of `o` if `o` is a slot
 *  of a slab of `p`; otherwise aborts with one message naming `call`, `o`
 *  and the reason. The checked and hardened builds read no header the slab
 *  map does not know (a foreign, unmapped or released address is never
 *  dereferenced) and test the slot grid; the release build checks the
 *  header's magic only. */
_ak_slab *_ak_pool_slab_check(_ak_pool_impl *p, const void *o, const char *call);

/** Whether `s`, the slab of `o` (_ak_slab_of), is a live slab of `p` with
 *  `o` on its slot grid, as far as the common case can tell inline: one
 *  header check; the checked and hardened builds first test the slot grid
 *  (one multiplication, as _ak_pool_on_grid) and the slab map (two loads,
 *  so no header is read that the map does not know). */
static inline bool _ak_pool_slab_ok(const _ak_pool_impl *p, const void *o, const _ak_slab *s) {
  if (!_ak_config_validate) return s->head.magic == (AK_SLAB_MAGIC ^ (uintptr_t)p);
  return !p->destroyed && _ak_pool_on_grid(&p->pub, o, (uintptr_t)s) && _ak_pool_known_slab((uintptr_t)s) &&
         s->head.magic == (AK_SLAB_MAGIC ^ (uintptr_t)p);
}

/** The slab of `o`, a pointer handed to a free of `p`: _ak_slab_of, its
 *  common case checked inline (_ak_pool_slab_ok); anything else (a
 *  destroyed pool, an address beyond the map, slots spanning 2^32 bytes or
 *  more) and the error report go out of line (_ak_pool_slab_check). */
static inline _ak_slab *_ak_pool_slab_find(_ak_pool_impl *p, const void *o, const char *call) {
  _ak_slab *s = _ak_slab_of(o, p->slab_size);
  if (AK_LIKELY(_ak_pool_slab_ok(p, o, s))) return s;
  return _ak_pool_slab_check(p, o, call);
}

/** Checked build: records slot `o` of `s` as live/free; aborts on a double
 *  free naming `call`. */
void _ak_pool_mark_live(_ak_pool_impl *p, _ak_slab *s, void *o);
void _ak_pool_mark_free(_ak_pool_impl *p, _ak_slab *s, void *o, const char *call);
/** Tool annotations of one slot (ASan poison, Valgrind mempool). */
void _ak_pool_track_alloc(_ak_pool_impl *p, void *o);
void _ak_pool_track_free(_ak_pool_impl *p, void *o);

/* ---- prof.c: the heap profiler's side ---- */

/** `o` (just allocated by the caller, no lock held) was due for a sample:
 *  recorded with the label pool=<name>, and counted in its slab. */
void _ak_pool_prof_sampled(_ak_pool_impl *p, void *o);
/** The free of `o` (before the mode's free): forgets it if it is kept. */
void _ak_pool_prof_free(_ak_pool_impl *p, void *o);
/** Slab `s` goes back to the backing with objects in it (destroy): the
 *  kept ones among them are forgotten. */
void _ak_pool_prof_release(_ak_pool_impl *p, _ak_slab *s);

/* ---- the inline paths' state in the pool's head ---------------------------------- */

/** Turns the inline paths off: every call goes slow. In the concurrent
 *  modes other threads read these fields inline without a lock, and they
 *  never change: only what differs is stored, so a trim does not race with
 *  those reads. */
static inline void _ak_pool_inline_off(_ak_pool_impl *p) {
  if (p->pub.cur.hot.first != NULL) p->pub.cur.hot.first = NULL;
  if (p->pub.cur.hot_used != 0) p->pub.cur.hot_used = 0;
  if (p->pub.cur.hot_slab != 1) p->pub.cur.hot_slab = 1; /* no slab lives at address 1 */
  if (p->pub.cur.mask != 0) p->pub.cur.mask = 0;
  if (p->pub.cur.hot_key != 0) p->pub.cur.hot_key = 0;
  if (p->pub.cur.bump != 0) p->pub.cur.bump = 0;
  if (p->pub.cur.bump_end != 0) p->pub.cur.bump_end = 0;
  if (p->pub.alt != NULL) p->pub.alt = NULL;
  AK_ASSERT(p->pub.cur.hot_slab == 1 && p->pub.cur.mask == 0); /* nothing inline matches */
}

/* Writes the inline state of current slab `c` (its free list, live count
 * and never-used slots) back to the slab's header and returns the slab:
 * the first step of checking a slab in, for NONE (modes/none.c) and a
 * thread heap (modes/threads/), which then clear `c` each in their own
 * order. `c` has a slab checked out (hot_slab > 1). */
static inline _ak_slab *_ak_pool_cur_writeback(const _ak_pool_cur *c) {
  _ak_slab *s = (_ak_slab *)c->hot_slab;
  AK_ASSERT(c->hot_slab > 1 && c->hot_used <= s->capacity && c->bump <= s->end);
  AK_ASSERT(c->bump >= s->start && (c->bump - s->start) % s->slot == 0); /* on the slot grid */
  s->head.free.first = c->hot.first;
  s->head.used = (uint32_t)c->hot_used;
  s->bump = c->bump;
  return s;
}

#endif /* AK_POOL_POOL_H */
