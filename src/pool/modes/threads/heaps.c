/* SPDX-License-Identifier: MIT */
/* threads/heaps.c - AK_SYNC_THREADS: the life of the per-thread heaps.
 * A heap is created at a thread's first use of a pool (modes/tls.c calls
 * heap_create), abandoned at thread exit (its slabs go to the pool's
 * `abandoned` list for another thread to adopt, its spares to the pool's
 * spare set), freed with its slabs at ak_pool_destroy, and given up
 * unread in a fork child for every thread but the caller (its spare set,
 * locked across the fork, handed over whole). The pool's live count sums the heaps' and the abandoned
 * slabs'. Locks: modes/tls.c's g_mu, then the pool's `mu`. */
#define _GNU_SOURCE
#include <stdlib.h>

#include "pool/modes/threads/heap.h"
#include "pool/slab/spares.h"

/* heap_get's miss: the heap from modes/tls.c's table (created there if
 * `create`), then cached in the direct-mapped thread cache. */
_ak_pool_heap *_ak_threads_heap_find(_ak_pool_impl *p, bool create) {
  _ak_pool_heap *h = _ak_tls_get(p, create);
  if (h) _ak_pool_tentry_store(_ak_pool_key(p), &h->pub);
  return h;
}

/* _ak_tls_mode.create: a new heap of the calling thread for `p`, on the
 * pool's heap list (NULL if out of memory). */
static void *heap_create(_ak_pool_impl *p) {
  _ak_pool_heap *h = _ak_tls_state_alloc(sizeof *h); /* the inline paths write `pub` */
  if (!h) return NULL;
  h->pool = p;
  h->pub.cur.hot_slab = 1; /* no current slab; mask 0 until heap_out */
  /* Unregistered: the mode's tick purges it (_ak_threads_tick). */
  _ak_spare_set_init(&h->spares, &_ak_pool_spare_ops, p, SIZE_MAX, AK_SPARE_TIMED);
  _ak_pool_lock(&p->mu);
  _ak_dlist_push_front(&p->threads.heaps, &h->node);
  _ak_pool_unlock(&p->mu);
  return h;
}

/* Under p->mu: takes `h` off the pool's heap list. */
static void heap_unlink(_ak_pool_impl *p, _ak_pool_heap *h) { _ak_dlist_remove(&p->threads.heaps, &h->node); }

/* Under p->mu: the spare set of `h`, which is going away, handed to the
 * pool's (its decommitted spares released) and finished; its count of
 * bytes decommitted stays in the pool's stats. */
static void spares_hand_over(_ak_pool_impl *p, _ak_pool_heap *h) {
  _ak_spare_counts c;
  _ak_spare_stats(&h->spares, &c);
  p->threads.gone_purged += c.purged_bytes;
  _ak_pool_slab_hand_over(p, &h->spares);
  _ak_spare_set_fini(&h->spares);
}

/* Under p->mu, on the owner's thread: hands the slabs of `h` to the pool. */
static void abandon(_ak_pool_impl *p, _ak_pool_heap *h) {
  (void)heap_checkin(h);
  while (_ak_slab_first(&h->stash)) {
    _ak_slab *s = _ak_slab_first(&h->stash);
    _ak_slab_list_remove(&h->stash, s);
    s->heap = NULL;
    _ak_pool_slab_put(p, &p->spares, s);
  }
  spares_hand_over(p, h); /* a new thread takes them before it maps a slab */
  _ak_slab_list *lists[3] = {&h->avail, &h->full, &h->pending};
  for (int i = 0; i < 3; i++) {
    while (_ak_slab_first(lists[i])) {
      _ak_slab *s = _ak_slab_first(lists[i]);
      _ak_slab_list_remove(lists[i], s);
      _ak_slab_set_owner(s, 0, __ATOMIC_SEQ_CST);
      s->heap = NULL;
      live_sub(h, _ak_slab_collect(s));
      if (s->head.used == 0) {
        _ak_pool_slab_put(p, &p->spares, s);
      } else {
        _ak_slab_list_push_back(&p->threads.abandoned, s, AK_SLAB_ABANDONED);
        atomic_store_explicit(&p->threads.adoptable, true, memory_order_relaxed);
      }
    }
  }
  AK_ASSERT(h->avail.n == 0 && h->full.n == 0 && h->pending.n == 0 && h->stash.n == 0); /* all handed over */
  heap_unlink(p, h);
}

/* Live objects of the abandoned slabs: their `used` (under p->mu). */
static size_t abandoned_live(_ak_pool_impl *p) {
  size_t n = 0;
  for (_ak_slab *s = _ak_slab_first(&p->threads.abandoned); s; s = _ak_slab_next(s)) n += s->head.used;
  return n;
}

/* Live objects of the pool (under p->mu): the heaps' counts (a heap's
 * count can be read mid-update by its owner, so a transiently negative sum
 * is read as 0) plus the abandoned slabs'. */
size_t _ak_threads_live(_ak_pool_impl *p) {
  size_t live = 0;
  for (_ak_pool_heap *h = heap_first(p); h; h = heap_next(h)) live += live_get(h);
  return ((ptrdiff_t)live < 0 ? 0 : live) + abandoned_live(p);
}

/* _ak_tls_mode.thread_exit (under g_mu): the exiting thread's heap of `p`
 * is abandoned and freed. */
static void heap_exit(_ak_pool_impl *p, void *state) {
  _ak_pool_heap *h = state;
  _ak_pool_lock(&p->mu);
  abandon(p, h);
  _ak_pool_unlock(&p->mu);
  free(h);
}

/* _ak_tls_mode.destroy (under g_mu, `p` unregistered): every heap of `p`
 * is freed with its slabs (modes/tls.c drops `p` from the thread cache). */
static void heaps_destroy(_ak_pool_impl *p) {
  _ak_pool_lock(&p->mu);
  for (_ak_pool_heap *h; (h = heap_first(p)) != NULL;) {
    heap_unlink(p, h);
    _ak_slab_list *lists[4] = {&h->avail, &h->full, &h->pending, &h->stash};
    for (int i = 0; i < 4; i++) {
      while (_ak_slab_first(lists[i])) {
        _ak_slab *s = _ak_slab_first(lists[i]);
        _ak_slab_list_remove(lists[i], s);
        _ak_pool_slab_release(p, s);
      }
    }
    _ak_spare_drain(&h->spares);
    _ak_spare_set_fini(&h->spares);
    free(h);
  }
  AK_ASSERT(p->threads.heaps.n == 0); /* no heap outlives its pool */
  _ak_pool_unlock(&p->mu);
}

/* fork(): a heap's spare set is locked across the fork (after p->mu, as
 * the background thread's pass takes them), so the child finds every set
 * whole (_ak_threads_fork_lock). */
void _ak_threads_fork_lock(_ak_pool_impl *p) {
  for (_ak_pool_heap *h = heap_first(p); h; h = heap_next(h)) _ak_spare_set_lock(&h->spares);
}
void _ak_threads_fork_unlock(_ak_pool_impl *p) {
  for (_ak_pool_heap *h = heap_first(p); h; h = heap_next(h)) _ak_spare_set_unlock(&h->spares);
}

/* fork(): a heap's lists are its owner's, changed without a lock (the
 * point of the mode), so the child may find those of another thread torn
 * in the middle of a move. Those threads do not exist in the child: their
 * heaps are given up without reading their lists, and every slab that a
 * heap other than the caller's owned, found through the slab table (whose
 * locks the fork handlers held), is abandoned as at thread exit. Objects
 * such a thread was handing out at the fork stay allocated (nobody in the
 * child holds them); frees into its slabs keep working (remote frees). */
typedef struct fork_scan {
  _ak_pool_impl *p;
  _ak_pool_heap *mine;
} fork_scan;

static void fork_adopt(uintptr_t x, void *ctx) {
  fork_scan *f = ctx;
  _ak_slab *s = (_ak_slab *)x;
  if (!s->heap || s->heap == f->mine) return; /* the pool's, or the caller's */
  _ak_slab_set_owner(s, 0, __ATOMIC_SEQ_CST);
  s->heap = NULL;
  (void)_ak_slab_collect(s);
  /* Its heap's list is given up unread (it may be torn): the slab leaves it
   * without an unlink. Empty ones go back at the next collect. */
  s->node = (_ak_dnode){NULL, NULL};
  _ak_slab_list_push_back(&f->p->threads.abandoned, s, AK_SLAB_ABANDONED);
}

/* fork() child, no lock held (the mode's fork_child). */
void _ak_threads_fork_child(_ak_pool_impl *p) {
  fork_scan f = {p, heap_get(p, false)};
  _ak_pool_lock(&p->mu);
  for (_ak_pool_heap *h = heap_first(p); h; h = heap_next(h))
    if (h != f.mine) (void)heap_checkin(h); /* its current slab's free list back in the slab */
  _ak_table_each(&p->table, fork_adopt, &f);
  for (_ak_pool_heap *h = heap_first(p), *next; h; h = next) {
    next = heap_next(h);
    if (h == f.mine) continue;
    heap_unlink(p, h);
    spares_hand_over(p, h); /* whole: the fork handlers held its lock */
    free(h);
  }
  if (_ak_slab_first(&p->threads.abandoned))
    atomic_store_explicit(&p->threads.adoptable, true, memory_order_relaxed);
  _ak_pool_unlock(&p->mu);
}

const _ak_tls_mode _ak_threads_tls = {
    .create = heap_create, .thread_exit = heap_exit, .destroy = heaps_destroy};

/* Under p->mu: collects the remote lists of the abandoned slabs and gives
 * back those that are empty. A remote free that read the owner just before
 * the owner exited pushes onto the remote list after abandon() collected
 * it; nobody owns the slab to collect it then, so the pool does here (the
 * stats, trim; adoption and the next free into the slab collect too). */
void _ak_threads_collect_abandoned(_ak_pool_impl *p, bool release) {
  for (_ak_slab *s = _ak_slab_first(&p->threads.abandoned), *next; s; s = next) {
    next = _ak_slab_next(s);
    (void)_ak_slab_collect(s);
    if (s->head.used == 0) {
      _ak_slab_list_remove(&p->threads.abandoned, s);
      AK_ASSERT(_ak_slab_owner(s, __ATOMIC_SEQ_CST) == 0 && s->heap == NULL); /* nobody's */
      if (release)
        _ak_pool_slab_release(p, s);
      else
        _ak_pool_slab_put(p, &p->spares, s);
    }
  }
}

/* Live objects: the heaps' counts plus the abandoned slabs'; the sampled
 * high-water mark. */
void _ak_threads_counts(_ak_pool_impl *p, size_t *live, size_t *peak) {
  _ak_pool_lock(&p->mu);
  _ak_threads_collect_abandoned(p, false);
  *live = _ak_threads_live(p);
  _ak_pool_unlock(&p->mu);
  *peak = atomic_load(&p->threads.peak);
  if (*live > *peak) *peak = *live;
}

/* The heaps' spare sets (the mode's tick, under p->mu): due steps of the
 * policy done; the earliest time one falls due next. */
uint64_t _ak_threads_tick(_ak_pool_impl *p) {
  uint64_t at = UINT64_MAX;
  _ak_pool_lock(&p->mu);
  for (_ak_pool_heap *h = heap_first(p); h; h = heap_next(h)) {
    _ak_spare_tick(&h->spares);
    uint64_t d = __atomic_load_n(&h->spares.deadline, __ATOMIC_RELAXED);
    if (d < at) at = d;
  }
  _ak_pool_unlock(&p->mu);
  return at;
}

/* The heaps' spares in the byte counts (the pool's set is counted by
 * ak_pool_stats_get): spare, their decommitted bytes not committed, and
 * what every heap's set decommitted so far. */
void _ak_threads_stats(_ak_pool_impl *p, ak_pool_stats *out) {
  size_t spare = 0, cold = 0, purged = 0;
  _ak_pool_lock(&p->mu);
  for (_ak_pool_heap *h = heap_first(p); h; h = heap_next(h)) {
    _ak_spare_counts c;
    _ak_spare_stats(&h->spares, &c);
    spare += c.spare_bytes;
    cold += c.spare_bytes - c.committed;
    purged += c.purged_bytes;
  }
  purged += p->threads.gone_purged;
  _ak_pool_unlock(&p->mu);
  out->bytes_spare += spare;
  out->bytes_committed = out->bytes_committed > cold ? out->bytes_committed - cold : 0;
  out->bytes_purged += purged;
}
