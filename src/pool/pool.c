/* SPDX-License-Identifier: MIT */
/* pool.c - the fixed-size object pool: options, slab lists and page
 * policies, the serial core of AK_SYNC_NONE and AK_SYNC_SPINLOCK, checks,
 * stats. AK_SYNC_THREADS lives in pool_threads.c; AK_SYNC_SPINLOCK and
 * AK_SYNC_LOCKFREE put the per-thread magazines of pool_magazine.c in
 * front of their shared structure (the serial core under the spinlock
 * here, the stack of batches in pool_lockfree.c).
 *
 * Call tree (serial core):
 *   ak_pool_alloc (inline, NONE)  pop `hot`, the current slab's free list
 *     -> ak_pool_alloc_slow -> serial_alloc: cap check, serial_pop: head
 *          of `avail` (fullest first) or _ak_pool_slab_get (spare or new),
 *          pop, full slabs move to `full`
 *   ak_pool_free (inline, NONE)   push `hot` when the slab is current
 *     -> ak_pool_free_slow -> serial_free: slab by mask, checks,
 *          serial_push: push, full -> avail (placed by fullness), empty ->
 *          spare or backing
 *   SPINLOCK: ak_pool_alloc_slow -> _ak_mag_alloc (pool_magazine.c) ->
 *          when its magazine is empty, _ak_spin_take: up to 64 serial_pop
 *          under one lock; ak_pool_free_slow -> _ak_mag_free -> when it is
 *          full, _ak_spin_give: serial_push of a batch under one lock
 * In AK_SYNC_NONE the current slab's free list and count are "checked out"
 * into the public head (`hot`, `hot_used`); mirror_in/mirror_out move them
 * back and forth around every slow operation. */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/track.h"
#include "os/os_mem.h"
#include "pool/pool_internal.h"

/* The inline frees read these fields of _ak_slab as _ak_pool_slab_head. */
_Static_assert(offsetof(_ak_slab, magic) == offsetof(_ak_pool_slab_head, magic) &&
                   offsetof(_ak_slab, pool) == offsetof(_ak_pool_slab_head, pool),
               "_ak_pool_slab_head matches _ak_slab");
/* The headers' names for the state and the mitigation bits they read. */
_Static_assert(_AK_POOL_SLAB_AVAIL == AK_SLAB_AVAIL, "the inline paths' list state");
_Static_assert(AK_CONFIG_HARDEN_LINKS == AK_HARDEN_LINKS &&
                   AK_CONFIG_HARDEN_DOUBLE_FREE == AK_HARDEN_DOUBLE_FREE,
               "the headers' hardening bits");

#define DEFAULT_SLAB ((size_t)64 * 1024)
#define MIN_SLOTS 8

/* ---- registry of all pools and their slabs (owns, checks) ---------------- */

static pthread_mutex_t g_pools_mu = PTHREAD_MUTEX_INITIALIZER;
static _ak_pool_impl *g_pools; /* every live pool, linked by next_pool (under g_pools_mu) */
static atomic_uint_least64_t g_next_id = 1;

/* Checked and hardened builds: the blocks of the last AK_POOL_GRAVES
 * destroyed pools, kept as tombstones (under g_pools_mu), so that a call
 * on a destroyed pool is reported instead of reading freed memory. */
#define AK_POOL_GRAVES 64
static _ak_pool_impl *g_graves[AK_POOL_GRAVES];
static size_t g_grave_next;

/* ---- fork ------------------------------------------------------------------ */

/* The atfork handlers take every lock of every pool, so that the child
 * finds none held by a thread that does not exist there. The order
 * (docs/design.md, "Fork"): g_pools_mu, pool_tls.c's g_mu, then for each
 * live pool in registry order its mutex `mu`, its spinlock `spin`, the file
 * backing's `file_mu`, the 64 shard locks of its slab table and the lock of
 * its spare set (the reclaim module's own handlers take its registry; its
 * background thread holds no lock while it waits for one of these). They run
 * before the malloc's (they are registered after it: the pool's block is
 * allocated first), as the pool's locks are taken around malloc calls and
 * never inside them. The child's only thread is the one that took them all,
 * so it releases them as the parent does (default mutexes: no owner check). */
static void fork_prepare(void) {
  pthread_mutex_lock(&g_pools_mu);
  _ak_tls_fork_lock();
  for (_ak_pool_impl *q = g_pools; q; q = q->next_pool) {
    pthread_mutex_lock(&q->mu);
    _ak_word_lock(&q->spin);
    _ak_word_lock(&q->file_mu);
    _ak_table_lock_all(&q->table);
    _ak_spare_set_lock(&q->spares);
  }
}

static void fork_release(void) {
  for (_ak_pool_impl *q = g_pools; q; q = q->next_pool) {
    _ak_spare_set_unlock(&q->spares);
    _ak_table_unlock_all(&q->table);
    _ak_word_unlock(&q->file_mu);
    _ak_word_unlock(&q->spin);
    pthread_mutex_unlock(&q->mu);
  }
  _ak_tls_fork_unlock();
  pthread_mutex_unlock(&g_pools_mu);
}

/* The child's heaps of THREADS pools: those of threads that do not exist
 * there are given up (pool_threads.c, _ak_threads_fork_child). */
static void fork_child(void) {
  fork_release();
  pthread_mutex_lock(&g_pools_mu);
  for (_ak_pool_impl *q = g_pools; q; q = q->next_pool)
    if (q->sync == AK_SYNC_THREADS) _ak_threads_fork_child(q);
  pthread_mutex_unlock(&g_pools_mu);
}

static pthread_once_t g_fork_once = PTHREAD_ONCE_INIT;
static void fork_register(void) { (void)pthread_atfork(fork_prepare, fork_release, fork_child); }

/* ---- errors and checks -------------------------------------------------- */

void _ak_pool_error(_ak_pool_impl *p, int err, const char *call, const char *what) {
  _ak_error(err, "%s: pool '%s': %s", call, p ? p->name : "?", what);
}

AK_COLD void _ak_pool_double_free(_ak_pool_impl *p, const void *o) {
  _ak_fatal("ak_pool_free(%p): double free in pool '%s'", o, p->name);
}

/* Name of the pool that owns slab address `s`, if any pool does. */
static const char *owner_name(uintptr_t s) {
  const char *name = NULL;
  pthread_mutex_lock(&g_pools_mu);
  for (_ak_pool_impl *q = g_pools; q && !name; q = q->next_pool)
    if (_ak_table_has(&q->table, s & ~(uintptr_t)(q->slab_size - 1))) name = q->name;
  pthread_mutex_unlock(&g_pools_mu);
  return name;
}

_ak_slab *_ak_pool_slab_of(_ak_pool_impl *p, const void *o, const char *call) {
  uintptr_t u = (uintptr_t)o;
  uintptr_t base = u & ~(uintptr_t)(p->slab_size - 1);
  if (ak_config_validate) {
    if (AK_UNLIKELY(p->destroyed))
      _ak_fatal("%s(%p): pool '%s' was destroyed (ak_pool_destroy)", call, o, p->name);
    /* No header is read where the slab map knows no slab: a stack, static,
     * foreign, unmapped or released address is never dereferenced. */
    if (AK_UNLIKELY(!_ak_table_known(&p->table, base))) {
      const char *other = owner_name(u);
      if (other) _ak_fatal("%s(%p): pointer belongs to pool '%s', not to pool '%s'", call, o, other, p->name);
      _ak_fatal("%s(%p): pointer was not allocated by pool '%s' (no slab of it contains the address)", call,
                o, p->name);
    }
  }
  _ak_slab *s = (_ak_slab *)base;
  if (AK_UNLIKELY(s->magic != (AK_SLAB_MAGIC ^ (uintptr_t)p))) {
    /* Validated builds: `base` is a live slab of another pool. */
    if (ak_config_validate)
      _ak_fatal("%s(%p): pointer belongs to pool '%s', not to pool '%s'", call, o, s->name, p->name);
    _ak_fatal("%s(%p): pointer was not allocated by pool '%s' (bad slab header)", call, o, p->name);
  }
  /* The slot-grid test (checked and hardened builds): one multiplication
   * where the slots span less than 4 GiB (slot_div, as _ak_pool_on_grid),
   * else a division. */
  uint64_t off = (uint64_t)(u - s->start), div = p->pub.slot_div;
  if (ak_config_validate &&
      !(div ? u >= s->start && u < s->end && off * div <= div - 1 : _ak_slab_is_slot(s, u))) {
    _ak_fatal("%s(%p): pointer is inside pool '%s' but not the start of an object (slot %zu bytes)", call, o,
              p->name, p->slot);
  }
  return s;
}

static size_t slot_index(const _ak_slab *s, const void *o) { return ((uintptr_t)o - s->start) / s->slot; }

void _ak_pool_mark_live(_ak_pool_impl *p, _ak_slab *s, void *o) {
  (void)p;
  if (!ak_config_checked) return;
  size_t i = slot_index(s, o);
  /* Atomic: in the concurrent modes other threads mark other slots of the word. */
  __atomic_fetch_or(&s->bitmap[i / 64], UINT64_C(1) << (i % 64), __ATOMIC_RELAXED);
}

void _ak_pool_mark_free(_ak_pool_impl *p, _ak_slab *s, void *o, const char *call) {
  if (!ak_config_checked) return;
  size_t i = slot_index(s, o);
  uint64_t bit = UINT64_C(1) << (i % 64);
  /* Atomic: in the concurrent modes other threads mark other slots of the word. */
  if (!(__atomic_fetch_and(&s->bitmap[i / 64], ~bit, __ATOMIC_RELAXED) & bit))
    _ak_fatal("%s(%p): double free (or never allocated) in pool '%s'", call, o, p->name);
}

void _ak_pool_track_alloc(_ak_pool_impl *p, void *o) {
  if (!p->tracked) return;
  AK_UNPOISON(o, p->slot);
  if (p->tracked & AK_TRACK_MODE_VALGRIND) AK_VG_ALLOC(p->vg_pool, o, p->object_size);
}

void _ak_pool_track_free(_ak_pool_impl *p, void *o) {
  if (!p->tracked) return;
  if (p->tracked & AK_TRACK_MODE_VALGRIND) AK_VG_FREE(p->vg_pool, o);
  /* The first word holds the free link: keep it readable by the pool. */
  AK_TRACK_INTERNAL(o, sizeof(void *));
  if (p->slot > sizeof(void *)) AK_TRACK_RELEASE((char *)o + sizeof(void *), p->slot - sizeof(void *));
}

/* ---- slab lists ------------------------------------------------------------ */

void _ak_pool_list_place(_ak_pool_impl *p, _ak_slab_list *list, _ak_slab *s) {
  bool strict = atomic_load_explicit(&p->defragment, memory_order_relaxed);
  _ak_slab *at = _ak_slab_first(list);
  /* Fullest first: skip slabs holding more objects. ARAL limits the walk
   * to the first three positions; the defragmenter sorts exactly. */
  for (int depth = 0; at && at->used > s->used && (strict || depth < 2); depth++) at = _ak_slab_next(at);
  _ak_slab_list_insert_before(list, at, s, s->list ? s->list : AK_SLAB_AVAIL);
}

void _ak_pool_list_settle(_ak_pool_impl *p, _ak_slab_list *list, _ak_slab *s) {
  if (!atomic_load_explicit(&p->defragment, memory_order_relaxed)) return;
  _ak_slab *at = _ak_slab_next(s);
  if (!at || at->used <= s->used) return;
  uint32_t which = s->list;
  _ak_slab_list_remove(list, s);
  while (at && at->used > s->used) at = _ak_slab_next(at);
  _ak_slab_list_insert_before(list, at, s, which);
}

/* ---- backings -------------------------------------------------------------------- */

/* The free file slots (pool_internal.h, file_free/file_pos), under file_mu. */
static void file_slot_push(_ak_pool_impl *p, size_t i) {
  p->file_pos[i] = p->nfile_free;
  p->file_free[p->nfile_free++] = i;
}

static void file_slot_take(_ak_pool_impl *p, size_t i) {
  size_t at = p->file_pos[i], last = p->file_free[--p->nfile_free];
  p->file_free[at] = last;
  p->file_pos[last] = at;
  p->file_pos[i] = SIZE_MAX;
}

/* Drops the free slots at the end of the file and truncates it there, so
 * the file never keeps a free tail (amortised O(1): each slot is dropped
 * once per release). Under file_mu. */
static void file_shrink_tail(_ak_pool_impl *p) {
  size_t n = p->file_size / p->slab_size;
  while (n && p->file_pos[n - 1] != SIZE_MAX) file_slot_take(p, --n);
  if (n * p->slab_size != p->file_size) {
    p->file_size = n * p->slab_size;
    (void)_ak_os_file_resize(p->fd, p->file_size);
  }
}

/* Room in file_free/file_pos for `n` file slots; false if out of memory. */
static bool file_slots_room(_ak_pool_impl *p, size_t n) {
  if (n <= p->cap_file_slots) return true;
  size_t cap = p->cap_file_slots ? p->cap_file_slots * 2 : 64;
  while (cap < n) cap *= 2;
  size_t *f = realloc(p->file_free, cap * sizeof *f);
  if (f) p->file_free = f;
  size_t *pos = f ? realloc(p->file_pos, cap * sizeof *pos) : NULL;
  if (!pos) return false;
  for (size_t i = p->cap_file_slots; i < cap; i++) pos[i] = SIZE_MAX;
  p->file_pos = pos;
  p->cap_file_slots = cap;
  return true;
}

/* Reports a failure of the file backing, naming the file. */
static void file_error(_ak_pool_impl *p, int err, const char *what, size_t off) {
  char msg[600];
  snprintf(msg, sizeof msg, "cannot %s %zu bytes of file '%s' at offset %zu: %s", what, p->slab_size, p->path,
           off, strerror(err));
  _ak_pool_error(p, err, "ak_pool_alloc", msg);
}

/* The file backing's windows, under file_mu: a free slot of the file, or
 * a new one at its end; its blocks are allocated for real before it is
 * mapped (a hole punched at release, or the new end), so a full file
 * system fails here with ENOSPC instead of faulting at the first store. */
static void *file_get(_ak_pool_impl *p, size_t *offset) {
  size_t i = p->file_size / p->slab_size;
  bool grown = p->nfile_free == 0;
  if (!grown) {
    i = p->file_free[p->nfile_free - 1];
    file_slot_take(p, i);
  } else if (!file_slots_room(p, i + 1)) {
    file_error(p, ENOMEM, "keep track of", i * p->slab_size);
    return NULL;
  }
  size_t off = i * p->slab_size;
  void *m = NULL;
  int e = 0;
  if (_ak_os_file_alloc(p->fd, off, p->slab_size) != 0) {
    e = errno;
    file_error(p, e, "allocate", off);
  } else if ((m = _ak_os_file_map(p->fd, off, p->slab_size, p->slab_size)) == NULL) {
    e = errno;
    file_error(p, e, "map", off);
  }
  if (!m) {
    if (grown)
      (void)_ak_os_file_resize(p->fd, off); /* posix_fallocate may have grown it */
    else
      file_slot_push(p, i);
    errno = e;
    return NULL;
  }
  if (grown) p->file_size = off + p->slab_size;
  *offset = off;
  return m;
}

/* Slab memory from the backing (no pool lock needed). */
static void *backing_get(_ak_pool_impl *p, size_t *offset) {
  switch (p->backing) {
    case AK_BACKING_HEAP: return _ak_os_heap_alloc(p->slab_size, p->slab_size);
    case AK_BACKING_FILE: {
      _ak_word_lock(&p->file_mu);
      void *m = file_get(p, offset);
      _ak_word_unlock(&p->file_mu);
      return m;
    }
    default: return _ak_os_alloc(p->slab_size, p->slab_size);
  }
}

/* Gives slab memory back to the backing (the guard page made accessible
 * again first where the memory is reused by others: the C heap). */
static void backing_put(_ak_pool_impl *p, void *m, size_t off) {
  switch (p->backing) {
    case AK_BACKING_HEAP:
      /* A guard that cannot be made writable again must not go back to
       * the C heap (it would fault there): the slab is leaked instead. */
      if (p->guard && _ak_os_guard((char *)m + p->slab_size - p->guard, p->guard, false) != 0) break;
      _ak_os_heap_free(m, p->slab_size);
      break;
    case AK_BACKING_FILE:
      _ak_word_lock(&p->file_mu);
      _ak_os_file_unmap(p->fd, m, off, p->slab_size);
      file_slot_push(p, off / p->slab_size); /* file_pos has room for every slot */
      file_shrink_tail(p);
      _ak_word_unlock(&p->file_mu);
      break;
    default: _ak_os_free(m, p->slab_size); break;
  }
}

/* A new slab from the backing, registered and counted. NULL + errno +
 * message naming `call` on failure. */
static _ak_slab *slab_new(_ak_pool_impl *p, const char *call) {
  size_t off = 0;
  void *m = backing_get(p, &off);
  if (!m) {
    if (p->backing != AK_BACKING_FILE) _ak_pool_error(p, errno ? errno : ENOMEM, call, "out of memory");
    return NULL;
  }
  /* Hardened: the slab's last page is a guard (the slots end before it). */
  if (p->guard && _ak_os_guard((char *)m + p->slab_size - p->guard, p->guard, true) != 0) {
    int e = errno;
    backing_put(p, m, off);
    _ak_pool_error(p, e, call, "cannot protect the slab's guard page");
    return NULL;
  }
  if (_ak_table_add(&p->table, (uintptr_t)m) != 0) {
    backing_put(p, m, off);
    _ak_pool_error(p, ENOMEM, call, "out of memory for the slab table");
    return NULL;
  }
  _ak_slab *s = _ak_slab_init(m, p, p->name, p->slab_size - p->guard, p->slot, p->align, ak_config_checked);
  s->file_offset = off;
  if (p->tracked) {
    s->flags |= AK_SLAB_F_TRACKED;
    AK_TRACK_RELEASE((void *)s->start, s->end - s->start);
  }
  return s;
}

/* The slab whose header holds spare-set node `n`. */
static _ak_slab *spare_slab(_ak_spare *n) { return (_ak_slab *)((char *)n - offsetof(_ak_slab, spare)); }

/* A spare slab (LOCKFREE's taken-down list first, then the spare set), or
 * NULL; `*failed` when a punched-out file spare cannot get its blocks back
 * (error reported; a taken-down LOCKFREE slab stays listed, a purged spare
 * is released: put back, it would pass for a committed one). */
static _ak_slab *spare_take(_ak_pool_impl *p, bool *failed) {
  *failed = false;
  _ak_slab *s = _ak_slab_first(&p->spare);
  bool cold = true, listed = s != NULL;
  if (!s) {
    _ak_spare *n = _ak_spare_take(&p->spares, &cold);
    if (!n) return NULL;
    s = spare_slab(n);
  }
  /* A file spare that was punched out (_ak_pool_slab_decommit) has its
   * blocks allocated again before a slot is written. */
  if (cold && p->backing == AK_BACKING_FILE && _ak_os_file_alloc(p->fd, s->file_offset, p->slab_size) != 0) {
    int e = errno;
    if (!listed) _ak_pool_slab_release(p, s);
    file_error(p, e, "allocate", s->file_offset);
    *failed = true;
    return NULL;
  }
  if (listed) _ak_slab_list_remove(&p->spare, s);
  return s;
}

_ak_slab *_ak_pool_slab_spare(_ak_pool_impl *p) {
  bool failed;
  return spare_take(p, &failed);
}

_ak_slab *_ak_pool_slab_get(_ak_pool_impl *p) {
  bool failed;
  _ak_slab *s = spare_take(p, &failed);
  return s || failed ? s : slab_new(p, "ak_pool_alloc");
}

void _ak_pool_slab_decommit(_ak_pool_impl *p, _ak_slab *s) {
  size_t ps = _ak_os_page_size();
  uintptr_t from = (s->start + ps - 1) & ~(uintptr_t)(ps - 1);
  uintptr_t to = (uintptr_t)s + p->slab_size;
  if (to <= from) return;
  if (p->backing == AK_BACKING_FILE)
    (void)_ak_os_file_decommit(p->fd, (void *)from, s->file_offset + (from - (uintptr_t)s), to - from);
  else
    (void)_ak_os_decommit((void *)from, to - from);
}

void _ak_pool_slab_release(_ak_pool_impl *p, _ak_slab *s) {
  _ak_table_del(&p->table, (uintptr_t)s);
  if (p->tracked) AK_TRACK_INTERNAL((void *)s, p->slab_size);
  s->magic = 0;
  backing_put(p, s, s->file_offset);
}

_ak_slab *_ak_pool_slab_new(_ak_pool_impl *p) { return slab_new(p, "ak_pool_alloc"); }

void _ak_pool_slab_reset(_ak_slab *s) {
  /* A reused slab starts from scratch: carving is lazy again (no slot is
   * touched before it is handed out, and no cold list is chased). */
  s->free = NULL;
  s->bump = s->start;
  s->used = 0;
  s->flags |= AK_SLAB_F_REUSED;
}

void _ak_pool_slab_put(_ak_pool_impl *p, _ak_slab *s) {
  _ak_pool_slab_reset(s);
  s->list = AK_SLAB_SPARE;
  _ak_spare_put(&p->spares, &s->spare, p->slab_size);
}

/* The spare set's view of a pool's slabs (common/reclaim.h). Decommit
 * keeps the header page, where the set's node lives. */
static void spare_decommit(_ak_spare *n, void *ctx) { _ak_pool_slab_decommit(ctx, spare_slab(n)); }
static void spare_release(_ak_spare *n, void *ctx) { _ak_pool_slab_release(ctx, spare_slab(n)); }
static const _ak_spare_ops pool_spare_ops = {spare_decommit, spare_release};

/* ---- the serial core (AK_SYNC_NONE, AK_SYNC_SPINLOCK) ---------------------------- */

/* The inline paths are used in AK_SYNC_NONE unless a check, a tool or the
 * defragmenter (which must see every free to keep its order) needs the
 * slow path. */
static bool mirrored(const _ak_pool_impl *p) {
  /* inline_ok: the caller's headers encode links exactly when this build
   * does (ak_pool_create_inline); otherwise their inline paths would
   * corrupt or misread the lists. */
  return p->sync == AK_SYNC_NONE && p->inline_ok && !ak_config_checked && !p->tracked &&
         p->max_objects == 0 && !atomic_load_explicit(&p->defragment, memory_order_relaxed);
}

/* Live objects of a serial-mode pool. With the inline paths on, calls do
 * not count, so the slabs are summed (the current slab's count is in the
 * public head while it is checked out). */
static size_t serial_live(const _ak_pool_impl *p) {
  if (!mirrored(p)) return p->live;
  size_t n = 0;
  for (const _ak_slab *s = _ak_slab_first(&p->avail); s; s = _ak_slab_next(s))
    n += (uintptr_t)s == p->pub.cur.hot_slab ? p->pub.cur.hot_used : s->used;
  for (const _ak_slab *s = _ak_slab_first(&p->full); s; s = _ak_slab_next(s)) n += s->used;
  return n;
}

/* The inline paths' state when they are off: every call goes slow. */
static void inline_off(_ak_pool_impl *p) {
  /* In the concurrent modes other threads read these in the inline paths
   * without the lock, and they never change: store only what differs, so
   * a trim does not race with those reads. */
  if (p->pub.cur.hot != NULL) p->pub.cur.hot = NULL;
  if (p->pub.cur.hot_used != 0) p->pub.cur.hot_used = 0;
  if (p->pub.cur.hot_slab != 1) p->pub.cur.hot_slab = 1; /* no slab lives at address 1 */
  if (p->pub.cur.mask != 0) p->pub.cur.mask = 0;
  if (p->pub.cur.hot_key != 0) p->pub.cur.hot_key = 0;
  if (p->pub.cur.bump != 0) p->pub.cur.bump = 0;
  if (p->pub.cur.bump_end != 0) p->pub.cur.bump_end = 0;
  if (p->pub.alt != NULL) p->pub.alt = NULL;
}

/* Checks the current slab back in. If the inline free emptied it while
 * other slabs have free slots, it goes back now (fullest first). */
static void mirror_in(_ak_pool_impl *p) {
  if (p->pub.cur.hot_slab <= 1) return;
  _ak_slab *s = (_ak_slab *)p->pub.cur.hot_slab;
  s->free = p->pub.cur.hot;
  s->used = (uint32_t)p->pub.cur.hot_used;
  s->bump = p->pub.cur.bump;
  p->pub.cur.hot = NULL;
  p->pub.cur.hot_slab = 0;
  p->pub.cur.bump = p->pub.cur.bump_end = 0;
  p->pub.alt = NULL; /* its list and count live in its header: nothing to copy */
  if (s->used == 0 && p->avail.n > 1) {
    _ak_slab_list_remove(&p->avail, s);
    _ak_pool_slab_put(p, s);
  }
}

static void mirror_out(_ak_pool_impl *p) {
  if (!mirrored(p)) {
    inline_off(p);
    return;
  }
  p->pub.cur.mask = ~(uintptr_t)(p->slab_size - 1);
  _ak_slab *s = _ak_slab_first(&p->avail);
  if (s) {
    /* Never-used slots go out by address inline, unless they must be
     * shuffled: then they are carved into `hot` in random order. */
    bool shuffled = _ak_slab_shuffled(s);
    if (shuffled && !s->free && s->bump < s->end) _ak_slab_carve(s, AK_POOL_CARVE_BYTES);
    p->pub.cur.hot = s->free;
    p->pub.cur.hot_used = s->used;
    p->pub.cur.hot_slab = (uintptr_t)s;
    p->pub.cur.hot_key = s->key; /* the links of `hot` are encoded with it */
    p->pub.cur.bump = s->bump;
    p->pub.cur.bump_end = shuffled ? s->bump : s->end;
    /* The next slab serves the inline allocations once this one is full
     * (ARAL allocates from the first two pages): a working set that
     * straddles two slabs then takes no slow path for the slot it freed
     * in the other one. It stays on `avail`; the slow paths list it full
     * if the inline path emptied it (serial_pop). */
    p->pub.alt = (_ak_pool_slab_head *)_ak_slab_next(s);
  } else {
    /* No current slab: 1, not 0, so that the inline free of NULL
     * (NULL & slab_mask == 0) never takes the current-slab branch. */
    p->pub.cur.hot = NULL;
    p->pub.cur.hot_used = 0;
    p->pub.cur.hot_slab = 1;
    p->pub.cur.bump = p->pub.cur.bump_end = 0;
    p->pub.alt = NULL;
  }
}

/* Pops one slot for the serial core: the head of `avail` (fullest first),
 * or a spare or (if `may_grow`) new slab; counts it in p->live. No cap, no
 * checks. */
static inline void *serial_pop(_ak_pool_impl *p, bool may_grow) {
  _ak_slab *s = _ak_slab_first(&p->avail);
  void *o = s ? _ak_slab_pop(s) : NULL;
  while (!o) {
    /* The inline path may have emptied the head slab's list: list it full. */
    if (s) {
      _ak_slab_list_remove(&p->avail, s);
      _ak_slab_list_push_back(&p->full, s, AK_SLAB_FULL);
    }
    s = _ak_slab_first(&p->avail);
    if (!s) {
      if (mirrored(p)) { /* sample the high-water mark as memory grows */
        size_t live = serial_live(p);
        if (live > p->peak_live) p->peak_live = live;
      }
      s = may_grow ? _ak_pool_slab_get(p) : _ak_pool_slab_spare(p);
      if (!s) return NULL;
      _ak_slab_list_push_front(&p->avail, s, AK_SLAB_AVAIL);
    }
    o = _ak_slab_pop(s);
  }
  if (!s->free && s->bump == s->end) {
    _ak_slab_list_remove(&p->avail, s);
    _ak_slab_list_push_back(&p->full, s, AK_SLAB_FULL);
  }
  p->live++;
  if (p->live > p->peak_live) p->peak_live = p->live;
  return o;
}

static void *serial_alloc(_ak_pool_impl *p) {
  if (p->max_objects && p->live >= p->max_objects) {
    _ak_pool_error(p, ENOMEM, "ak_pool_alloc", "max_objects live objects already");
    return NULL;
  }
  void *o = serial_pop(p, true);
  if (o && AK_UNLIKELY(p->debug)) {
    _ak_pool_mark_live(p, (_ak_slab *)((uintptr_t)o & ~(uintptr_t)(p->slab_size - 1)), o);
    _ak_pool_track_alloc(p, o);
  }
  return o;
}

/* Pushes slot `o` of slab `s` back: re-places the slab, releases it when
 * empty. Catches the double frees a cheap check sees (and, hardened with
 * `search`, any on the slab's list; a SPINLOCK magazine searched when the
 * object was freed, see _ak_spin_on_lists, and its chain links would make
 * every object of a spilled batch look free). */
static inline void serial_push(_ak_pool_impl *p, _ak_slab *s, void *o, bool search) {
  if (AK_UNLIKELY(o == s->free) || (ak_harden_double_free && search && _ak_slab_is_free(s, o, true)))
    _ak_pool_double_free(p, o);
  bool was_full = s->list == AK_SLAB_FULL;
  _ak_slab_push(s, o);
  p->live--;
  if (was_full) {
    _ak_slab_list_remove(&p->full, s);
    s->list = AK_SLAB_AVAIL;
    _ak_pool_list_place(p, &p->avail, s);
  } else {
    _ak_pool_list_settle(p, &p->avail, s);
  }
  /* An empty slab goes back at once, unless it is the only one left to
   * allocate from (then alloc/free of one object does not map and unmap). */
  if (s->used == 0 && p->avail.n > 1) {
    _ak_slab_list_remove(&p->avail, s);
    _ak_pool_slab_put(p, s);
  }
}

static void serial_free(_ak_pool_impl *p, void *o) {
  _ak_slab *s = _ak_pool_slab_fast(p, o, "ak_pool_free");
  if (AK_UNLIKELY(p->debug)) {
    _ak_pool_mark_free(p, s, o, "ak_pool_free");
    _ak_pool_track_free(p, o);
  }
  serial_push(p, s, o, true);
}

static void spin_lock(_ak_pool_impl *p) { _ak_word_lock(&p->spin); }

static void spin_unlock(_ak_pool_impl *p) { _ak_word_unlock(&p->spin); }

/* ---- the shared structure behind SPINLOCK magazines (pool_magazine.c) ---------- */

uint32_t _ak_spin_take(_ak_pool_impl *p, void **chain, uint32_t n) {
  void *head = NULL;
  uint32_t got = 0;
  _ak_slab *noted = NULL; /* hardened: the slab last added to the address range */
  spin_lock(p);
  for (; got < n; got++) {
    /* A new slab only for the first object: a failure of the backing then
     * fails the very call that needed the memory (the rest of a batch is
     * taken from the slabs there are). */
    void *o = serial_pop(p, got == 0);
    if (!o) break;
    if (p->tracked) AK_TRACK_INTERNAL(o, sizeof(void *)); /* a fresh slot holds a link now */
    if (ak_harden_links && _ak_pool_slab_base(p, o) != noted) {
      noted = _ak_pool_slab_base(p, o);
      _ak_pool_note_slab(p, noted);
    }
    _ak_chain_set(p, o, head);
    head = o;
  }
  spin_unlock(p);
  *chain = head;
  return got;
}

bool _ak_spin_on_lists(_ak_pool_impl *p, _ak_slab *s, void *o) {
  spin_lock(p);
  bool found = _ak_slab_is_free(s, o, true);
  spin_unlock(p);
  return found;
}

size_t _ak_spin_give(_ak_pool_impl *p, void *chain) {
  size_t n = 0;
  spin_lock(p);
  while (chain) {
    void *next = _ak_chain_next(p, chain);
    serial_push(p, _ak_pool_slab_base(p, chain), chain, false);
    chain = next;
    n++;
  }
  spin_unlock(p);
  return n;
}

/* ---- public API --------------------------------------------------------------------- */

void *ak_pool_alloc_slow(ak_pool *pub) {
  if (!pub) {
    _ak_error(EINVAL, "ak_pool_alloc: pool is NULL");
    return NULL;
  }
  _ak_pool_impl *p = _ak_impl(pub);
  if (ak_config_validate && AK_UNLIKELY(p->destroyed))
    _ak_fatal("ak_pool_alloc(%p): pool '%s' was destroyed (ak_pool_destroy)", (void *)pub, p->name);
  void *o;
  switch (p->sync) {
    case AK_SYNC_THREADS: _ak_spare_tick(&p->spares); return _ak_threads_alloc(p);
    case AK_SYNC_LOCKFREE: /* fall through: both are magazines over a shared structure */
    case AK_SYNC_SPINLOCK: return _ak_mag_alloc(p);
    default:
      _ak_spare_tick(&p->spares); /* spares due for the policy (one clock read) */
      mirror_in(p);
      o = serial_alloc(p);
      mirror_out(p);
      return o;
  }
}

void ak_pool_free_slow(ak_pool *pub, void *o) {
  if (!pub || !o) return;
  _ak_pool_impl *p = _ak_impl(pub);
  if (ak_config_validate && AK_UNLIKELY(p->destroyed))
    _ak_fatal("ak_pool_free(%p): pool '%s' was destroyed (ak_pool_destroy)", o, p->name);
  switch (p->sync) {
    case AK_SYNC_THREADS:
      _ak_spare_tick(&p->spares);
      _ak_threads_free(p, o);
      return;
    case AK_SYNC_LOCKFREE: /* fall through */
    case AK_SYNC_SPINLOCK: _ak_mag_free(p, o); return;
    default:
      _ak_spare_tick(&p->spares);
      mirror_in(p);
      serial_free(p, o);
      mirror_out(p);
      return;
  }
}

/* Hardened (guards): the last page of a slab of at least four pages is a
 * guard page; smaller slabs have none (it would take a quarter or more). */
static size_t guard_size(size_t slab) {
  size_t ps = _ak_os_page_size();
  return ak_harden_guards && slab >= 4 * ps ? ps : 0;
}

static size_t natural_align(size_t size) {
  size_t a = size & (~size + 1); /* lowest set bit */
  return a > 16 ? 16 : a;
}

/* The headers define ak_pool_create as a macro (ak_pool_create_inline with
 * their layout version); the parentheses keep it from expanding here. A
 * call of the symbol itself (a function pointer) is taken to come from
 * this build's headers, with links not encoded. */
ak_pool *(ak_pool_create)(const ak_pool_options *opts) {
  return ak_pool_create_inline(opts, AK_POOL_LAYOUT_VERSION << 8);
}

ak_pool *ak_pool_create_inline(const ak_pool_options *opts, int inline_abi) {
  static const char *const call = "ak_pool_create";
  if (!opts) {
    _ak_error(EINVAL, "%s: options are NULL (object_size is required)", call);
    return NULL;
  }
  /* Programs read the pool's head and the thread heaps inline with the
   * layout of the headers they were compiled with: another layout is
   * refused, never misread. */
  if ((inline_abi >> 8) != AK_POOL_LAYOUT_VERSION) {
    _ak_error(EPROTO,
              "%s: pool '%s': the program was compiled with arenakit pool headers of layout version %d, "
              "this library has version %d: rebuild it against this library's headers",
              call, opts->name ? opts->name : "pool", inline_abi >> 8, AK_POOL_LAYOUT_VERSION);
    return NULL;
  }
  bool inline_encode = (inline_abi & AK_POOL_INLINE_ENCODE_BIT) != 0;
  ak_pool_options o = *opts;
  size_t ps = _ak_os_page_size();
  const char *bad = NULL;
  if (o.object_size == 0)
    bad = "object_size is 0";
  else if (o.object_size > SIZE_MAX / 4)
    bad = "object_size is too large";
  else if (o.align & (o.align - 1))
    bad = "align is not a power of two";
  else if (o.slab_size && ((o.slab_size & (o.slab_size - 1)) || o.slab_size < ps))
    bad = "slab_size is not a power of two >= the page size";
  else if ((unsigned)o.sync > AK_SYNC_LOCKFREE)
    bad = "unknown sync mode";
  else if ((unsigned)o.backing > AK_BACKING_FILE)
    bad = "unknown backing";
  else if ((o.backing == AK_BACKING_FILE) != (o.path != NULL))
    bad = "a path is needed with, and only with, AK_BACKING_FILE";
  if (bad) {
    _ak_error(EINVAL, "%s: pool '%s': %s", call, o.name ? o.name : "pool", bad);
    return NULL;
  }
  size_t align = o.align ? o.align : natural_align(o.object_size);
  size_t ialign = align < sizeof(void *) ? sizeof(void *) : align;
  size_t slot = (o.object_size < sizeof(void *) ? sizeof(void *) : o.object_size);
  /* AK_SYNC_LOCKFREE: the first slot of a batch holds two words (its
   * link and the batch word, pool_lockfree.c). */
  if (o.sync == AK_SYNC_LOCKFREE && slot < 2 * sizeof(void *)) slot = 2 * sizeof(void *);
  slot = (slot + ialign - 1) & ~(ialign - 1);
  /* Where the slots start in a slab: aligned to the largest power of two
   * dividing the slot size, up to a cache line, so that no slot straddles
   * a line it could sit inside (16-byte slots after a header rounded only
   * to 8 would have every fourth cross a line: two lines per store). At
   * most 56 bytes of a slab go to it. */
  size_t lalign = slot & (~slot + 1);
  if (lalign > 64) lalign = 64;
  if (lalign < ialign) lalign = ialign;
  size_t slab = o.slab_size;
  if (!slab) {
    slab = DEFAULT_SLAB < ps ? ps : DEFAULT_SLAB;
    while (slab < (SIZE_MAX >> 2) &&
           _ak_slab_capacity(slab - guard_size(slab), slot, lalign, ak_config_checked) < MIN_SLOTS)
      slab *= 2;
  }
  size_t guard = guard_size(slab);
  if (ialign > slab / 2 || _ak_slab_capacity(slab - guard, slot, lalign, ak_config_checked) == 0) {
    _ak_error(EINVAL, "%s: pool '%s': an object of %zu bytes aligned to %zu does not fit a %zu-byte slab",
              call, o.name ? o.name : "pool", o.object_size, align, slab);
    return NULL;
  }

  /* A slab that no request could commit (1 TiB objects: 16 TiB slabs)
   * would fail at the first allocation anyway, or under a permissive
   * overcommit policy hand out memory that cannot exist: refused now.
   * Only larger slabs than the default ask (the check reads /proc). */
  if (slab > DEFAULT_SLAB && o.backing != AK_BACKING_FILE && slab > _ak_os_commit_limit()) {
    _ak_error(
        ENOMEM,
        "%s: pool '%s': an object of %zu bytes needs slabs of %zu bytes, more than the system can commit",
        call, o.name ? o.name : "pool", o.object_size, slab);
    return NULL;
  }

  size_t bsize = (sizeof(_ak_pool_impl) + 63) & ~(size_t)63;
  _ak_pool_impl *p = aligned_alloc(64, bsize); /* the contended fields are cache-line aligned */
  if (!p) {
    _ak_error(ENOMEM, "%s: out of memory", call);
    return NULL;
  }
  memset(p, 0, bsize);
  p->sync = o.sync;
  p->object_size = o.object_size;
  p->align = lalign;
  p->slot = slot;
  p->slab_size = slab;
  p->guard = guard;
  p->inline_ok = inline_encode == ak_harden_encode;
  p->capacity = _ak_slab_capacity(slab - guard, slot, lalign, ak_config_checked);
  /* The hardened inline frees test the slot grid (_ak_pool_on_grid); slots
   * spanning 4 GiB or more leave slot_span 0: every free reaches the library. */
  p->pub.slot_first = _ak_slab_header_size(p->capacity, lalign, ak_config_checked);
  if (p->capacity * slot < ((uint64_t)1 << 32)) {
    p->pub.slot_span = p->capacity * slot;
    p->pub.slot_div = UINT64_MAX / slot + 1;
  }
  p->max_objects = o.max_objects;
  p->spare_limit = o.spare_slabs;
  p->release_empty = o.release_empty;
  p->backing = o.backing;
  p->fd = -1;
  snprintf(p->name, sizeof p->name, "%s", o.name ? o.name : "pool");
  p->id = atomic_fetch_add(&g_next_id, 1);
  atomic_init(&p->defragment, o.defragment);
  p->tracked = _ak_track_mode();
  p->debug = ak_config_checked || p->tracked;
  pthread_mutex_init(&p->mu, NULL);
  atomic_init(&p->file_mu, 0);
  p->pub.slot = p->slot; /* the inline paths' step through never-used slots */
  mirror_out(p);         /* the inline paths' initial state */
  /* AK_SYNC_THREADS: the inline paths work on the calling thread's heap,
   * unless a check, a tool or max_objects (counted on every call) needs the
   * library; the same conditions as mirrored(), bar the defragmenter, which
   * each heap follows itself (_ak_pool_theap.mask). */
  if (p->sync == AK_SYNC_THREADS && p->inline_ok && !ak_config_checked && !p->tracked && !p->max_objects)
    p->pub.tkey = p->id;
  if (p->tracked & AK_TRACK_MODE_VALGRIND) {
    p->vg_pool = _ak_track_new_pool_id();
    AK_VG_CREATE_POOL(p->vg_pool);
  }
  if (o.backing == AK_BACKING_FILE) {
    p->path = strdup(o.path);
    p->fd = p->path ? _ak_os_file_open(o.path) : -1;
    if (p->fd < 0) {
      int e = p->path ? errno : ENOMEM;
      if (e == EBUSY)
        _ak_error(e, "%s: pool '%s': file '%s' is in use by another pool (locked)", call, p->name, o.path);
      else
        _ak_error(e, "%s: pool '%s': cannot create file '%s': %s", call, p->name, o.path, strerror(e));
      free(p->path);
      pthread_mutex_destroy(&p->mu);
      free(p);
      errno = e;
      return NULL;
    }
  }
  /* The concurrent modes keep per-thread state (pool_tls.c). */
  if (p->sync == AK_SYNC_SPINLOCK || p->sync == AK_SYNC_LOCKFREE) _ak_tls_register(p, &_ak_mag_tls);
  if (p->sync == AK_SYNC_THREADS) _ak_tls_register(p, &_ak_threads_tls);
  pthread_once(&g_fork_once, fork_register); /* after the malloc's own (see fork_prepare) */
  /* The reclaim policy by default: spares kept for reuse and given back by
   * time (spare_slabs, if set, caps them); with release_empty, ARAL's:
   * spare_slabs kept, any other empty slab released at once. */
  if (p->release_empty)
    _ak_spare_set_init(&p->spares, &pool_spare_ops, p, o.spare_slabs, 0);
  else
    _ak_spare_set_init(&p->spares, &pool_spare_ops, p, o.spare_slabs ? o.spare_slabs : SIZE_MAX,
                       AK_SPARE_TIMED | AK_SPARE_REGISTERED);
  pthread_mutex_lock(&g_pools_mu);
  p->next_pool = g_pools;
  g_pools = p;
  pthread_mutex_unlock(&g_pools_mu);
  return &p->pub;
}

static void release_list(_ak_pool_impl *p, _ak_slab_list *l, size_t *live) {
  while (l->head) {
    _ak_slab *s = _ak_slab_first(l);
    _ak_slab_list_remove(l, s);
    if (live) *live += s->used;
    _ak_pool_slab_release(p, s);
  }
}

void ak_pool_destroy(ak_pool *pub) {
  if (!pub) return;
  _ak_pool_impl *p = _ak_impl(pub);
  if (ak_config_validate && p->destroyed)
    _ak_fatal("ak_pool_destroy(%p): pool '%s' was destroyed already", (void *)pub, p->name);
  pthread_mutex_lock(&g_pools_mu);
  for (_ak_pool_impl **pp = &g_pools; *pp; pp = &(*pp)->next_pool) {
    if (*pp == p) {
      *pp = p->next_pool;
      break;
    }
  }
  pthread_mutex_unlock(&g_pools_mu);
  size_t live = 0;
  if (p->sync == AK_SYNC_NONE) mirror_in(p);
  if (p->sync == AK_SYNC_THREADS)
    live = _ak_threads_live(p);
  else if (p->sync == AK_SYNC_LOCKFREE || p->sync == AK_SYNC_SPINLOCK)
    live = _ak_mag_live(p);
  else
    live = serial_live(p);
  /* Frees every thread's heap or magazine; no thread exit touches p after. */
  if (p->tls_mode) _ak_tls_unregister(p);
  release_list(p, &p->avail, NULL);
  release_list(p, &p->full, NULL);
  release_list(p, &p->spare, NULL);
  release_list(p, &p->abandoned, NULL);
  _ak_spare_drain(&p->spares);
  _ak_spare_set_fini(&p->spares); /* waits for a pass of the background thread */
  if (ak_config_checked && live) _ak_warn("ak_pool_destroy: pool '%s' had %zu live objects", p->name, live);
  if (p->tracked & AK_TRACK_MODE_VALGRIND) AK_VG_DESTROY_POOL(p->vg_pool);
  if (p->fd >= 0) _ak_os_file_close(p->fd);
  free(p->path);
  free(p->file_free);
  free(p->file_pos);
  _ak_table_free(&p->table);
  pthread_mutex_destroy(&p->mu);
  if (ak_config_validate) {
    /* A tombstone: every inline path now reaches the library, which names
     * the destroyed pool; the oldest tombstone is freed. */
    inline_off(p);
    p->pub.tkey = 0;
    p->destroyed = true;
    pthread_mutex_lock(&g_pools_mu);
    _ak_pool_impl *old = g_graves[g_grave_next];
    g_graves[g_grave_next] = p;
    g_grave_next = (g_grave_next + 1) % AK_POOL_GRAVES;
    pthread_mutex_unlock(&g_pools_mu);
    p = old;
  }
  free(p);
}

/* A failed reserve reports itself as ak_pool_reserve, keeping the reason
 * the slab or backing code gave (which names ak_pool_alloc). */
static int reserve_result(_ak_pool_impl *p, int rc) {
  if (rc == 0) return 0;
  const char *m = ak_last_error();
  if (strncmp(m, "ak_pool_reserve:", 16) != 0) {
    const char *why = strstr(m, "': ");
    char buf[512];
    snprintf(buf, sizeof buf, "%s", why ? why + 3 : strerror(rc));
    _ak_pool_error(p, rc, "ak_pool_reserve", buf);
  }
  errno = rc;
  return rc;
}

int ak_pool_reserve(ak_pool *pub, size_t n) {
  if (!pub) {
    _ak_error(EINVAL, "ak_pool_reserve: pool is NULL");
    return EINVAL;
  }
  _ak_pool_impl *p = _ak_impl(pub);
  /* Room that can never be used, or whose slabs would not fit the address
   * space: refused up front, instead of mapping slabs until the OS says no. */
  if ((p->max_objects && n > p->max_objects) || n / p->capacity >= SIZE_MAX / p->slab_size) {
    _ak_pool_error(p, ENOMEM, "ak_pool_reserve",
                   p->max_objects && n > p->max_objects ? "more objects than max_objects"
                                                        : "that many objects do not fit the address space");
    return ENOMEM;
  }
  /* What the new slabs could need at most (the room there is already is
   * not counted): more than the system can commit, or than the file
   * system has free, fails now, with nothing mapped, instead of after
   * mapping slab after slab. */
  size_t bytes = (n / p->capacity + (n % p->capacity != 0)) * p->slab_size;
  if (p->backing == AK_BACKING_FILE ? bytes > _ak_os_file_room(p->fd) : bytes > _ak_os_commit_limit()) {
    char msg[600];
    if (p->backing == AK_BACKING_FILE)
      snprintf(msg, sizeof msg,
               "%zu objects need up to %zu bytes, more than the file system of '%s' has free", n, bytes,
               p->path);
    else
      snprintf(msg, sizeof msg, "%zu objects need up to %zu bytes, more than the system can commit", n,
               bytes);
    int e = p->backing == AK_BACKING_FILE ? ENOSPC : ENOMEM;
    _ak_pool_error(p, e, "ak_pool_reserve", msg);
    return e;
  }
  if (p->sync == AK_SYNC_THREADS) return reserve_result(p, _ak_threads_reserve(p, n));
  if (p->sync == AK_SYNC_LOCKFREE) return reserve_result(p, _ak_lockfree_reserve(p, n));
  if (p->sync == AK_SYNC_SPINLOCK) spin_lock(p);
  mirror_in(p);
  size_t room = 0;
  for (_ak_slab *s = _ak_slab_first(&p->avail); s; s = _ak_slab_next(s)) room += s->capacity - s->used;
  int rc = 0;
  while (room < n) {
    /* Spares are taken onto `avail`, not counted: the reclaim policy could
     * release them before they are used. */
    _ak_slab *s = _ak_pool_slab_spare(p);
    if (!s) s = slab_new(p, "ak_pool_reserve");
    if (!s) {
      rc = errno ? errno : ENOMEM;
      break;
    }
    _ak_slab_list_push_back(&p->avail, s, AK_SLAB_AVAIL);
    room += p->capacity;
  }
  mirror_out(p);
  if (p->sync == AK_SYNC_SPINLOCK) spin_unlock(p);
  return reserve_result(p, rc);
}

bool ak_pool_owns(const ak_pool *pub, const void *ptr) {
  if (!pub || !ptr) return false;
  _ak_pool_impl *p = _ak_impl(pub);
  uintptr_t base = (uintptr_t)ptr & ~(uintptr_t)(p->slab_size - 1);
  return _ak_table_has(&p->table, base) && _ak_slab_is_slot((const _ak_slab *)base, (uintptr_t)ptr);
}

void ak_pool_trim(ak_pool *pub) {
  if (!pub) return;
  _ak_pool_impl *p = _ak_impl(pub);
  if (p->sync == AK_SYNC_THREADS) {
    _ak_threads_trim(p);
    return;
  }
  if (p->sync == AK_SYNC_LOCKFREE) {
    _ak_lockfree_trim(p);
    return;
  }
  if (p->sync == AK_SYNC_SPINLOCK) {
    _ak_mag_flush_all(p); /* every thread's magazine back to the slabs first */
    spin_lock(p);
  }
  mirror_in(p);
  _ak_spare_drain(&p->spares);
  for (_ak_slab *s = _ak_slab_first(&p->avail), *next; s; s = next) {
    next = _ak_slab_next(s);
    if (s->used == 0) {
      _ak_slab_list_remove(&p->avail, s);
      _ak_pool_slab_release(p, s);
    }
  }
  mirror_out(p);
  if (p->sync == AK_SYNC_SPINLOCK) spin_unlock(p);
}

void ak_pool_set_defragment(ak_pool *pub, bool on) {
  if (!pub) return;
  _ak_pool_impl *p = _ak_impl(pub);
  if (p->sync == AK_SYNC_NONE) {
    mirror_in(p);
    /* The inline paths keep no count: recount before they may switch off
     * (with them off, stats and frees use p->live). */
    p->live = serial_live(p);
    atomic_store(&p->defragment, on);
    mirror_out(p);
  } else {
    atomic_store(&p->defragment, on);
  }
}

const char *ak_pool_name(const ak_pool *pub) { return pub ? _ak_impl(pub)->name : "(null)"; }

void ak_pool_stats_get(const ak_pool *pub, ak_pool_stats *out) {
  if (!out) return;
  memset(out, 0, sizeof *out);
  out->version = AK_POOL_STATS_VERSION;
  if (!pub) return;
  _ak_pool_impl *p = _ak_impl(pub);
  out->object_size = p->object_size;
  out->slot_size = p->slot;
  if (p->sync == AK_SYNC_THREADS) {
    out->live = _ak_threads_live(p);
    out->peak_live = atomic_load(&p->t_peak);
    if (out->live > out->peak_live) out->peak_live = out->live;
  } else if (p->sync == AK_SYNC_LOCKFREE || p->sync == AK_SYNC_SPINLOCK) {
    /* Counted by the magazines (objects they cache are not live). */
    out->live = _ak_mag_live(p);
    out->peak_live = _ak_mag_peak(p);
  } else {
    out->live = serial_live(p);
    if (out->live > p->peak_live) p->peak_live = out->live;
    out->peak_live = p->peak_live;
  }
  _ak_spare_tick(&p->spares); /* the counts show the policy's due steps done */
  _ak_table_stats(&p->table, p->slab_size, out);
  _ak_spare_counts sc;
  _ak_spare_stats(&p->spares, &sc);
  size_t cold = sc.spare_bytes - sc.committed;
  out->bytes_committed = out->bytes_reserved > cold ? out->bytes_reserved - cold : 0;
  out->bytes_spare = sc.spare_bytes;
  out->bytes_purged = sc.purged_bytes;
  if (p->sync == AK_SYNC_LOCKFREE) { /* slabs taken down by a trim: decommitted spares */
    pthread_mutex_lock(&p->mu);
    size_t down = p->spare.n * p->slab_size;
    pthread_mutex_unlock(&p->mu);
    out->bytes_spare += down;
    out->bytes_committed = out->bytes_committed > down ? out->bytes_committed - down : 0;
  }
}

int ak_pool_stats_print(const ak_pool *pub, FILE *f) {
  if (!f) {
    _ak_error(EINVAL, "ak_pool_stats_print: the stream is NULL");
    return -1;
  }
  ak_pool_stats s;
  ak_pool_stats_get(pub, &s);
  static const char *const modes[] = {"threads", "none", "spinlock", "lockfree"};
  const _ak_pool_impl *p = pub ? _ak_impl(pub) : NULL;
  char obj[AK_BYTES_TEXT], slot[AK_BYTES_TEXT], reserved[AK_BYTES_TEXT], resident[AK_BYTES_TEXT];
  char committed[AK_BYTES_TEXT], spare[AK_BYTES_TEXT], purged[AK_BYTES_TEXT];
  int rc = fprintf(f,
                   "pool '%s' (sync %s): objects of %s in slots of %s\n"
                   "  live objects  %zu (peak %zu)\n"
                   "  slabs         %zu (peak %zu): reserved %s, resident %s\n"
                   "  slabs obtained %zu, released %zu\n"
                   "  committed %s, spare %s, purged %s so far\n",
                   ak_pool_name(pub), p ? modes[p->sync] : "-", _ak_format_bytes(obj, s.object_size),
                   _ak_format_bytes(slot, s.slot_size), s.live, s.peak_live, s.slabs, s.peak_slabs,
                   _ak_format_bytes(reserved, s.bytes_reserved), _ak_format_bytes(resident, s.bytes_resident),
                   s.slab_allocs, s.slab_releases, _ak_format_bytes(committed, s.bytes_committed),
                   _ak_format_bytes(spare, s.bytes_spare), _ak_format_bytes(purged, s.bytes_purged));
  /* The text may sit in the stream's buffer: only a flush says whether
   * it was written (/dev/full takes the fprintf and fails the flush). */
  int saved = errno, e = rc < 0 ? (errno ? errno : EIO) : 0;
  errno = 0;
  if (!e && (fflush(f) != 0 || ferror(f))) e = errno ? errno : EIO;
  errno = saved;
  if (e) {
    _ak_error(e, "ak_pool_stats_print: pool '%s': cannot write the stats: %s", ak_pool_name(pub),
              strerror(e));
    return -1;
  }
  return 0;
}
