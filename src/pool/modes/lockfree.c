/* SPDX-License-Identifier: MIT */
/* lockfree.c - AK_SYNC_LOCKFREE: a lock-free free list made ABA-safe, a
 * lock-free stack (a Treiber stack) of batches behind the per-thread
 * magazines of modes/magazine/. Links cross slabs here: each is encoded
 * with the key of the slab of the slot that stores it (_ak_slab_of).
 *
 * The stack holds batches (pool/batch.h: chains of at most p->mag.batch
 * free slots, the length and the next batch in the first slot's second
 * word, a tagged head), so a magazine takes or gives a whole batch with
 * one CAS and the shared head is touched once per batch, not once per
 * object (slots are at least two words in this mode).
 *
 * When the stack is empty, one thread (under the pool mutex) carves a new
 * slab into batches and pushes them all with one CAS. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/signals.h"
#include "common/track.h"
#include "pool/batch.h"
#include "pool/modes.h"
#include "pool/slab/backing.h"
#include "pool/slab/spares.h"

#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 8)
#define AK_NO_TSAN __attribute__((no_sanitize("thread")))
#else
#define AK_NO_TSAN
#endif

/* The benign race of a Treiber stack: the link of the head slot may be
 * written by the thread that just popped it. Read it atomically (the
 * stored word, which _ak_batch_decode decodes); TSan is told to ignore
 * this one function. */
static AK_NO_TSAN uintptr_t read_link(void *slot) {
  return (uintptr_t)((const volatile _ak_link *)slot)->next;
}

/* A slab to carve: one a trim took down first (a file slab gets its
 * blocks back; if it cannot, the slab stays listed, the error reported),
 * else (unless `taken_down_only`) a spare or new one. Under p->mu. */
static _ak_slab *slab_get(_ak_pool_impl *p, bool taken_down_only) {
  _ak_slab *s = _ak_slab_first(&p->lockfree.spare);
  if (!s && taken_down_only) errno = ENOMEM;
  if (!s) return taken_down_only ? NULL : _ak_pool_slab_get(p);
  if (_ak_pool_slab_recommit(p, s) != 0) return NULL;
  _ak_slab_list_remove(&p->lockfree.spare, s);
  AK_ASSERT(!_ak_dnode_linked(&s->node) && s->head.used == 0); /* an empty slab on no list */
  return s;
}

/* Under p->mu: carves a slab (slab_get) into batches and pushes them with
 * one CAS. 0 or an errno. */
static int push_slab(_ak_pool_impl *p, bool taken_down_only) {
  _ak_slab *s = slab_get(p, taken_down_only);
  if (!s) return errno ? errno : ENOMEM;
  AK_ASSERT(s->head.used == 0 && !_ak_dnode_linked(&s->node)); /* an empty slab on no list */
  if ((uintptr_t)s + p->slab_size - 1 > AK_BATCH_PTR_MASK) {
    _ak_pool_slab_release(p, s);
    _ak_pool_error(p, ENOMEM, "ak_pool_alloc", "slab address does not fit 48 bits");
    return ENOMEM;
  }
  _ak_slab_list_push_back(&p->lockfree.full, s, AK_SLAB_FULL); /* listed for trim/destroy */
  _ak_pool_note_slab(p, s);
  s->head.free.first = NULL;
  s->bump = s->start;
  if (p->tracked) AK_TRACK_INTERNAL((void *)s->start, s->end - s->start);
  _ak_slab_carve(s, (size_t)(s->end - s->start));
  if (p->tracked && p->slot > 2 * sizeof(void *)) /* the two link words readable, the rest poisoned */
    for (uintptr_t o = s->start; o < s->end; o += p->slot)
      AK_TRACK_RELEASE((void *)(o + 2 * sizeof(void *)), p->slot - 2 * sizeof(void *));
  void *first = s->head.free.first;
  s->head.free.first = NULL;
  s->head.used = s->capacity; /* the slots now belong to the stack */
  AK_ASSERT(first != NULL && s->bump == s->end &&
            s->head.state == AK_SLAB_FULL); /* every slot carved, listed */
  (void)_ak_batch_push_chain(p, &p->mag.lf_head, first);
  return 0;
}

/* The stack ran dry: one thread grows it, the others find it refilled.
 * Signals are blocked on a thread while it holds the mutex with the stack
 * empty (here, takedown's callers): a handler on that thread would find
 * no batch and could not carve one (lockfree_alloc_nested), so it runs
 * once the stack is refilled. */
static int grow(_ak_pool_impl *p) {
  sigset_t old;
  _ak_signals_block_all(&old);
  _ak_pool_lock(&p->mu);
  int rc = 0;
  if (!_ak_batch_top(atomic_load_explicit(&p->mag.lf_head, memory_order_acquire))) rc = push_slab(p, false);
  _ak_pool_unlock(&p->mu);
  _ak_signals_restore(&old);
  if (rc) errno = rc;
  return rc;
}

static uint32_t lockfree_take(_ak_pool_impl *p, void **chain, uint32_t want) {
  (void)want; /* one batch: the stack holds batches */
  /* Counted out before the pop (a whole batch; the excess given back
   * after), so that lf_out is never below the slots outside the stack. */
  atomic_fetch_add(&p->mag.lf_out, AK_MAG_BATCH);
  for (;;) {
    void *top;
    uint32_t n = _ak_batch_pop(p, &p->mag.lf_head, &top);
    if (n) {
      if (n < AK_MAG_BATCH) atomic_fetch_sub(&p->mag.lf_out, AK_MAG_BATCH - n);
      *chain = top;
      return n;
    }
    if (grow(p) != 0) {
      atomic_fetch_sub(&p->mag.lf_out, AK_MAG_BATCH);
      *chain = NULL;
      return 0;
    }
  }
}

static void reorder(_ak_pool_impl *p);

/* A pool that empties again and again (a thread allocating a batch and
 * freeing all of it, each time) is reordered at most every
 * AK_LF_REORDER_MS of the reclaim clock: a reorder makes the next
 * allocations carve the slabs again, a cost that a loop emptying the pool
 * on every batch would otherwise pay each time. A thread that leaves the pool with every slot on the stack
 * reorders it whatever the clock says (lf_thread_left). */
#define AK_LF_REORDER_MS 100

static bool reorder_due(_ak_pool_impl *p) {
  uint64_t last = atomic_load_explicit(&p->mag.lf_reordered, memory_order_relaxed);
  return last == 0 || _ak_reclaim_now() - last >= AK_LF_REORDER_MS;
}

static size_t lockfree_give(_ak_pool_impl *p, void *chain, uint32_t n) {
  AK_ASSERT(chain != NULL && n <= AK_MAG_BATCH);
  size_t total = n;
  if (n) {
    /* A magazine's batch: its length is known, so only its first slot is
     * touched (no walk over slots that may have left the cache). */
    _ak_batch_push(p, &p->mag.lf_head, chain, chain, n);
  } else {
    total = _ak_batch_push_chain(p, &p->mag.lf_head, chain);
  }
  /* After the push: never below the true count. The give that leaves no
   * slot outside the stack restores address order (see reorder), unless
   * that was done within AK_LF_REORDER_MS. */
  AK_ASSERT(total > 0);
  if (atomic_fetch_sub(&p->mag.lf_out, total) == total && reorder_due(p)) reorder(p);
  return total;
}

/* Hardened double-free check: if the first word of `o` decodes to a
 * plausible link, `o` is free if its slab was taken down (a spare: no slot
 * of it is allocated; see reorder and trim), or if it is on the stack
 * (bounded search; a link changed under the walk by a concurrent pop ends
 * it). Called with no pool lock held. */
static bool lockfree_on_stack(_ak_pool_impl *p, void *o) {
  if (!_ak_pool_plausible(p, (uintptr_t)_ak_batch_decode(p, o, _ak_link_word(o, 0)))) return false;
  _ak_pool_lock(&p->mu);
  bool spare = _ak_slab_of(o, p->slab_size)->head.state == AK_SLAB_SPARE;
  _ak_pool_unlock(&p->mu);
  if (spare) return true;
  size_t limit = (atomic_load_explicit(&p->mag.hi, memory_order_relaxed) -
                  atomic_load_explicit(&p->mag.lo, memory_order_relaxed)) /
                     p->slot +
                 1;
  for (void *b = _ak_batch_top(atomic_load(&p->mag.lf_head)); b && limit;) {
    void *nb = _ak_batch_next(p, b, _ak_batch_read(b));
    for (void *c = b; c && limit--;) {
      if (c == o) return true;
      void *next = _ak_batch_decode(p, c, read_link(c));
      if (!_ak_pool_plausible(p, (uintptr_t)next)) return false;
      c = next;
    }
    if (!_ak_pool_plausible(p, (uintptr_t)nb)) return false;
    b = nb;
  }
  return false;
}

/* Under p->mu. With no slot outside the stack, the whole stack is taken
 * down and every slab becomes a spare again; the slabs stay mapped (a racing pop may still read a link)
 * and grow() re-carves them, in address order, when needed. The stack is
 * taken with one exchange and its slots counted: only when they are every
 * slot of the listed slabs (not when lf_out merely reads 0, which a pop
 * and a push racing the exchange can leave with a batch back on the
 * stack) does nobody else hold or push one; a thread that pops after the
 * exchange finds the stack empty and waits in grow() for the mutex.
 * Returns false (the stack put back as it was) if a slot is outside. */
static bool takedown(_ak_pool_impl *p) {
  void *taken = _ak_batch_take_all(&p->mag.lf_head);
  size_t n = 0;
  void *last = NULL;
  if (atomic_load(&p->mag.lf_out) == 0) /* else some slot is out: no need to count */
    for (void *b = taken; b; b = _ak_batch_next(p, b, *_ak_batch_word(b))) {
      last = b;
      n += _ak_batch_len(*_ak_batch_word(b));
    }
  if (n != p->lockfree.full.n * p->capacity) {
    /* Something is live: put the batches back as they were (the last
     * one's link to whatever was pushed since). */
    if (taken) {
      if (!last)
        for (last = taken; _ak_batch_next(p, last, *_ak_batch_word(last)) != NULL;)
          last = _ak_batch_next(p, last, *_ak_batch_word(last));
      uint32_t k = _ak_batch_len(*_ak_batch_word(last));
      AK_ASSERT(k >= 1 && k <= AK_MAG_BATCH); /* the batches were whole when taken */
      _ak_batch_push(p, &p->mag.lf_head, taken, last, k);
    }
    return false;
  }
  while (_ak_slab_first(&p->lockfree.full)) {
    _ak_slab *s = _ak_slab_first(&p->lockfree.full);
    _ak_slab_list_remove(&p->lockfree.full, s);
    s->head.free.first = NULL;
    s->bump = s->start;
    s->head.used = 0;
    _ak_slab_list_push_back(&p->lockfree.spare, s, AK_SLAB_SPARE);
  }
  AK_ASSERT(p->lockfree.full.n == 0); /* every slab is a spare now */
  return true;
}

/* Magazines emptied first, then takedown, and the pages of every spare
 * slab (none of its slots is on the stack) given back in every backing:
 * decommitted (C heap included: the block stays the pool's, only its
 * pages go), or punched out of the file. */
static void lockfree_trim(_ak_pool_impl *p) {
  _ak_mag_flush_all(p);
  sigset_t old;
  _ak_signals_block_all(&old); /* see grow */
  _ak_pool_lock(&p->mu);
  (void)takedown(p);
  for (_ak_slab *s = _ak_slab_first(&p->lockfree.spare); s; s = _ak_slab_next(s))
    _ak_pool_slab_decommit(p, s);
  _ak_pool_unlock(&p->mu);
  _ak_signals_restore(&old);
}

/* Called when a give left no slot outside the stack (every object free,
 * every magazine empty: when the last thread using the pool exits, or a
 * thread's last free drains its magazine; see reorder_due). The stack's
 * order is that of the frees, mixed across threads and slabs, and the
 * mixing compounds over the pool's life (each batch then touches more
 * slabs and cache lines than a fresh pool's): the stack is taken
 * down so that grow() carves the slabs again in address order, their pages
 * kept. Skipped if another thread holds the mutex (it is growing). The
 * hardened double-free check knows a slot of a slab taken down by the
 * slab's state (lockfree_on_stack). */
static void reorder(_ak_pool_impl *p) {
  sigset_t old;
  _ak_signals_block_all(&old); /* see grow */
  if (_ak_pool_trylock(&p->mu)) {
    if (takedown(p)) atomic_store_explicit(&p->mag.lf_reordered, _ak_reclaim_now(), memory_order_relaxed);
    _ak_pool_unlock(&p->mu);
  }
  _ak_signals_restore(&old);
}

/* _ak_pool_mode.thread_left: the pool may stay idle now, and the next
 * thread to use it should find address order: reorder if every slot is on
 * the stack, however recent the last reorder. */
static void lf_thread_left(_ak_pool_impl *p) {
  if (atomic_load(&p->mag.lf_out) == 0) reorder(p);
}

static int lockfree_reserve(_ak_pool_impl *p, size_t n) {
  /* Grow until the slabs hold n slots beyond those outside the stack:
   * counted by slabs, since the stack itself cannot be measured without
   * popping. */
  _ak_pool_lock(&p->mu);
  size_t have = (p->lockfree.full.n + p->lockfree.spare.n) * p->capacity;
  _ak_pool_unlock(&p->mu);
  size_t out = atomic_load(&p->mag.lf_out);
  while (have < out + n) {
    _ak_pool_lock(&p->mu);
    int rc = push_slab(p, false);
    _ak_pool_unlock(&p->mu);
    if (rc) return rc;
    have += p->capacity;
  }
  return 0;
}

static void lf_give(_ak_pool_impl *p, void *chain, uint32_t n) { (void)lockfree_give(p, chain, n); }

/* ---- calls from a signal handler that interrupted a pool call ---------------------- */

/* A nested allocation found the stack empty: a slab taken down by a trim
 * or a reorder is carved again if the mutex is free (never waited for),
 * never a new one (mapping one is no handler's work). */
static uint32_t pop_nested(_ak_pool_impl *p, void **o) {
  uint32_t n = _ak_batch_pop(p, &p->mag.lf_head, o);
  if (n || !_ak_pool_trylock(&p->mu)) return n;
  int rc = 0;
  if (!_ak_batch_top(atomic_load_explicit(&p->mag.lf_head, memory_order_acquire))) rc = push_slab(p, true);
  _ak_pool_unlock(&p->mu);
  return rc ? 0 : _ak_batch_pop(p, &p->mag.lf_head, o);
}

/* _ak_pool_mode.alloc_nested: the top batch popped, its first slot kept
 * and the rest pushed back, each with one CAS; no lock waited for, no
 * magazine, no new slab: NULL with ENOMEM when the stack is empty and no
 * slab taken down can be carved (pop_nested). Counted out before the pop,
 * as lockfree_take is. */
static void *lockfree_alloc_nested(_ak_pool_impl *p) {
  size_t live = atomic_fetch_add_explicit(&p->mag.live, 1, memory_order_relaxed) + 1;
  if (p->max_objects && AK_UNLIKELY(live > p->max_objects)) {
    atomic_fetch_sub_explicit(&p->mag.live, 1, memory_order_relaxed);
    _ak_pool_error(p, ENOMEM, "ak_pool_alloc", "max_objects live objects already");
    return NULL;
  }
  atomic_fetch_add(&p->mag.lf_out, AK_MAG_BATCH);
  void *o;
  uint32_t n = pop_nested(p, &o);
  if (!n) {
    atomic_fetch_sub(&p->mag.lf_out, AK_MAG_BATCH);
    atomic_fetch_sub_explicit(&p->mag.live, 1, memory_order_relaxed);
    _ak_pool_error(p, ENOMEM, "ak_pool_alloc",
                   "no free object on the shared stack for a call from a signal handler (ak_pool_reserve)");
    return NULL;
  }
  void *rest = _ak_chain_next(p, o);
  if (ak_harden_links && AK_UNLIKELY(!_ak_pool_plausible(p, (uintptr_t)rest))) _ak_batch_corrupt(p, o, rest);
  AK_ASSERT((rest == NULL) == (n == 1)); /* a batch of n slots */
  if (rest) _ak_batch_push(p, &p->mag.lf_head, rest, rest, n - 1);
  atomic_fetch_sub(&p->mag.lf_out, AK_MAG_BATCH - 1);
  _ak_mag_peak_raise(p, live);
  if (ak_harden_double_free && !p->tracked) _ak_link_set(o, NULL, 0); /* as a magazine hands it out */
  if (AK_UNLIKELY(p->debug)) {
    _ak_pool_mark_live(p, _ak_slab_of(o, p->slab_size), o);
    _ak_pool_track_alloc(p, o);
  }
  return o;
}

/* _ak_pool_mode.free_nested: `o` pushed as a batch of one (one CAS). No
 * reorder (it takes the mutex) and no hardened search of the stack. */
static void lockfree_free_nested(_ak_pool_impl *p, void *o) {
  _ak_slab *s = _ak_pool_slab_find(p, o, "ak_pool_free"); /* aborts on a foreign `o` */
  if (AK_UNLIKELY(p->debug)) {
    _ak_pool_mark_free(p, s, o, "ak_pool_free");
    _ak_pool_track_free(p, o);
  }
  _ak_chain_set(p, o, NULL);
  _ak_batch_push(p, &p->mag.lf_head, o, o, 1);
  atomic_fetch_sub(&p->mag.lf_out, 1);
  atomic_fetch_sub_explicit(&p->mag.live, 1, memory_order_relaxed);
}

static bool lf_on_lists(_ak_pool_impl *p, _ak_slab *s, void *o) {
  (void)s;
  return lockfree_on_stack(p, o);
}

/* Slabs taken down by a trim count as decommitted spares. */
static void lf_stats(_ak_pool_impl *p, ak_pool_stats *out) {
  _ak_pool_lock(&p->mu);
  size_t down = p->lockfree.spare.n * p->slab_size;
  _ak_pool_unlock(&p->mu);
  out->bytes_spare += down;
  out->bytes_committed = out->bytes_committed > down ? out->bytes_committed - down : 0;
}

/* ak_pool_destroy: the slabs on the stack and those taken down. */
static void lockfree_release(_ak_pool_impl *p) {
  _ak_pool_slab_list_release(p, &p->lockfree.full);
  _ak_pool_slab_list_release(p, &p->lockfree.spare);
}

const _ak_pool_mode _ak_mode_lockfree = {
    .name = "lockfree",
    .tls = &_ak_mag_tls,
    .init = _ak_mag_init,
    .alloc = _ak_mag_alloc,
    .free = _ak_mag_free,
    .reserve = lockfree_reserve,
    .trim = lockfree_trim,
    .release = lockfree_release,
    .counts = _ak_mag_counts,
    .tick = _ak_mag_tick,
    .stats = lf_stats,
    .take = lockfree_take,
    .give = lf_give,
    .thread_left = lf_thread_left,
    .on_lists = lf_on_lists,
    .fork_child = _ak_mag_fork_child,
    .alloc_nested = lockfree_alloc_nested,
    .free_nested = lockfree_free_nested,
};
