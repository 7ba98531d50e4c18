/* SPDX-License-Identifier: MIT */
/* threads/threads.c - AK_SYNC_THREADS: thread-owned slabs with local and remote
 * free lists (the mimalloc design, per pool).
 *
 * Each thread that uses a pool gets a heap: the slabs it allocates from.
 * The owner pops and pushes the local free list of its slabs without any
 * atomic operation; another thread frees by pushing onto the slab's remote
 * list (one CAS); the owner collects remote lists (one exchange) when its
 * local lists run dry. A thread that exits abandons its heaps: empty slabs
 * go back, the others wait on the pool's `abandoned` list for a thread to
 * adopt them (a free into an abandoned slab is done under the pool mutex).
 * The heap's current slab is "checked out" to the inline paths: its free
 * list and count live in the heap's public part (_ak_pool_theap) while
 * the thread works inline; heap_in/heap_out move them back and forth
 * around every slow operation. The thread finds its heap through the
 * public thread cache _ak_pool_tcache (by pool id), behind which
 * modes/tls.c keeps the thread's table and thread exit (_ak_threads_tls).
 * The heaps' life (creation, thread exit, destroy, fork) is heaps.c's;
 * this file allocates and frees through a heap (heap.h).
 *
 *   threads_alloc: heap_get -> pop current slab -> refill: collect remote
 *     lists, then full slabs with remote frees, then adopt an abandoned
 *     slab (mutex), a spare of the heap (no lock) or of the pool, or a new one
 *   threads_free: _ak_pool_slab_find -> owner? push local : remote_free
 * Locks: modes/tls.c's g_mu, then a pool's `mu` (slab get/put, the
 * abandoned list, the heap list). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/track.h"
#include "pool/modes/threads/heap.h"
#include "pool/placement.h"
#include "pool/slab/backing.h"
#include "pool/slab/spares.h"

/* Gives an empty slab of `h` (no longer listed, owner cleared) back: to
 * the heap's stash if it keeps fewer than spare_limit (no lock); with
 * release_empty to the backing at once; else to a spare set under the
 * reclaim policy: the heap's own when spare_limit is 0 (its leaf lock,
 * which only the background thread's pass shares: the heap takes the
 * slab back first, see take_slab), the pool's past a full stash. Nobody
 * else can reach the slab: it has no live object to be freed into it. */
static void give_slab(_ak_pool_impl *p, _ak_pool_heap *h, _ak_slab *s) {
  AK_ASSERT(!s->head.used && !s->head.state && !_ak_slab_owner(s, __ATOMIC_RELAXED)); /* empty, unowned */
  AK_ASSERT(_ak_slab_validate(s, "give_slab"));
  if (h->stash.n < p->spare_limit) {
    _ak_pool_slab_reset(s);
    _ak_slab_list_push_front(&h->stash, s, AK_SLAB_SPARE);
    return;
  }
  s->heap = NULL; /* a spare is nobody's (a fork child's scan passes it by) */
  if (p->release_empty) {
    _ak_pool_slab_release(p, s); /* at once (the pool's spares are exited threads') */
  } else if (!p->spare_limit) {
    _ak_pool_slab_put(p, &h->spares, s);
    /* A step falls due: the mode's tick purges it if the owner goes quiet. */
    if (__atomic_load_n(&h->spares.deadline, __ATOMIC_RELAXED) != UINT64_MAX) _ak_reclaim_wake();
  } else {
    _ak_pool_slab_put(p, &p->spares, s);
  }
}

/* Puts `s`, found without a free slot, on the heap's full list (owner).
 * Refill walks the full list for remote frees only when the pool's
 * full_epoch changed, so the slab's remote list is tagged
 * AK_SLAB_REMOTE_FULL: the first remote free onto the tagged empty list
 * sees the tag in the word it replaces and bumps the epoch (remote_free),
 * and a list that already holds frees when the slab goes on `full` bumps
 * it here. Tag and push are atomic operations on the same word, so no
 * remote free into a full slab goes unnoticed, and the freer never
 * touches the slab after its push (the owner may release it at once).
 * The tag is sticky: leaving `full` keeps it (an owner's free into a full
 * slab costs no atomic operation), only a collection that takes objects
 * clears it (_ak_slab_collect); a slab that cycles between full and one
 * free slot is tagged once. A tag on a slab off `full` costs at most one
 * spurious epoch bump, as the collection that follows clears it. */
static void full_push(_ak_pool_impl *p, _ak_pool_heap *h, _ak_slab *s) {
  AK_ASSERT(s->heap == h && !s->head.free.first && s->bump == s->end); /* no local free slot */
  AK_ASSERT(_ak_slab_validate(s, "full_push"));
  _ak_slab_list_push_back(&h->full, s, AK_SLAB_FULL);
  void *r;
  if (s->flags & AK_SLAB_F_REMOTE_FULL) {
    /* Tagged already: a remote free onto a non-empty list bumped no epoch
     * since the owner last walked, so a list found now bumps it. */
    r = atomic_load_explicit(&s->remote, memory_order_acquire);
  } else {
    r = atomic_load_explicit(&s->remote, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(&s->remote, &r,
                                                  (void *)((uintptr_t)r | AK_SLAB_REMOTE_FULL),
                                                  memory_order_acquire, memory_order_relaxed)) {
    }
    s->flags |= AK_SLAB_F_REMOTE_FULL;
  }
  AK_ASSERT((uintptr_t)atomic_load(&s->remote) & AK_SLAB_REMOTE_FULL); /* a full slab is tagged */
  if (_ak_slab_remote_list(r)) atomic_fetch_add_explicit(&p->threads.full_epoch, 1, memory_order_release);
}

/* Takes `s` off the heap's full list (owner); its tag stays (full_push). */
static inline void full_remove(_ak_pool_heap *h, _ak_slab *s) { _ak_slab_list_remove(&h->full, s); }

/* Places the pending slabs on `avail` by fullness (owner, slow path). */
static inline void pending_place(_ak_pool_impl *p, _ak_pool_heap *h) {
  _ak_pool_pending_place(p, &h->avail, &h->pending);
}

/* A spare for `h` with no pool lock: its stash, then its own spare set
 * (its leaf lock, uncontended but for the background thread's pass), then
 * the pool's set (a leaf lock other heaps share); NULL if all are empty. */
static _ak_slab *spare_for(_ak_pool_impl *p, _ak_pool_heap *h) {
  _ak_slab *s = _ak_slab_first(&h->stash);
  if (s) {
    _ak_slab_list_remove(&h->stash, s);
    return s;
  }
  s = _ak_pool_slab_spare(p, &h->spares);
  if (!s) s = _ak_pool_slab_spare(p, &p->spares);
  if (s) s->heap = h;
  return s;
}

/* True if other threads freed into `s` since its last collection. */
static inline bool has_remote(_ak_slab *s) {
  return _ak_slab_remote_list(atomic_load_explicit(&s->remote, memory_order_relaxed)) != NULL;
}

/* Full slabs that other threads freed into go back on `avail`, their
 * frees collected: walked only if a remote free may have reached one since
 * the last walk (see full_push) (owner). */
static void collect_full(_ak_pool_impl *p, _ak_pool_heap *h) {
  size_t epoch = atomic_load_explicit(&p->threads.full_epoch, memory_order_acquire);
  if (epoch == h->full_seen) return;
  h->full_seen = epoch;
  for (_ak_slab *s = _ak_slab_first(&h->full), *next; s; s = next) {
    next = _ak_slab_next(s);
    if (!has_remote(s)) continue;
    uint32_t n = _ak_slab_collect(s);
    live_sub(h, n);
    if (n) {
      full_remove(h, s);
      _ak_slab_list_push_front(&h->avail, s, AK_SLAB_AVAIL);
    }
  }
}

/* The free slots of the heap's slabs (none pending): their slots less its
 * live count, in which objects other threads freed into them and it has
 * not collected still count. */
static size_t heap_free_slots(const _ak_pool_impl *p, const _ak_pool_heap *h) {
  AK_ASSERT(h->pending.n == 0 && (h->avail.n + h->full.n) * p->capacity >= h->pub.live);
  return (h->avail.n + h->full.n) * p->capacity - h->pub.live;
}

/* `avail` ran dry: the pending batch is placed, and a slab of slack (a
 * spare of the heap or the pool, else a new one) goes at its back if the
 * heap has less than a slab's worth of free slots (placement.h), counted
 * after the frees other threads made into its full slabs are collected:
 * uncollected, they would count as live, and the slack would grow with
 * them (owner, current slab checked in). */
static void avail_dry(_ak_pool_impl *p, _ak_pool_heap *h) {
  AK_ASSERT(h->avail.n == 0 && h->pub.cur.hot_slab <= 1); /* dry, checked in */
  pending_place(p, h);
  if (!_ak_pool_batch_thin(p, heap_free_slots(p, h))) return;
  collect_full(p, h);
  if (!_ak_pool_batch_thin(p, heap_free_slots(p, h))) return;
  _ak_slab *s = spare_for(p, h);
  if (!s && (s = _ak_pool_slab_slack(p, NULL)) != NULL) s->heap = h;
  if (!s) return;
  _ak_slab_set_owner(s, (uintptr_t)h, __ATOMIC_SEQ_CST);
  _ak_slab_list_push_back(&h->avail, s, AK_SLAB_AVAIL);
}

/* `s`, on `avail`, has no free slot left: it goes on `full`, and the
 * pending batch is placed if `avail` ran dry (owner). */
static void avail_to_full(_ak_pool_impl *p, _ak_pool_heap *h, _ak_slab *s) {
  _ak_slab_list_remove(&h->avail, s);
  full_push(p, h, s);
  if (!h->avail.n && h->pending.n) avail_dry(p, h);
}

/* The list of the heap that `s` (of kind AVAIL) is on. */
static inline _ak_slab_list *avail_list(_ak_pool_heap *h, const _ak_slab *s) {
  return _ak_slab_avail_list(s, &h->avail, &h->pending);
}

/* heap_checkin, first thing in every slow operation of the owner. If the
 * inline frees emptied the current slab and other slabs have free slots,
 * it goes back now (release_empty); if the inline allocations filled it,
 * it goes on `full` (so that a slab a free gives a slot becomes the next
 * current one); unless it is `keep`, the slab the caller is about to free
 * into. */
static void heap_in(_ak_pool_impl *p, _ak_pool_heap *h, const _ak_slab *keep) {
  _ak_slab *s = heap_checkin(h);
  if (!s || s == keep) return;
  if (s->head.used == 0 && h->avail.n + h->pending.n > 1) {
    _ak_slab_list_remove(&h->avail, s);
    _ak_slab_set_owner(s, 0, __ATOMIC_SEQ_CST);
    give_slab(p, h, s);
  } else if (!s->head.free.first && s->bump == s->end && !has_remote(s)) {
    avail_to_full(p, h, s);
  }
}

/* Checks the head of `avail` out as the current slab (last thing in every
 * slow operation of the owner). With the inline paths off (tkey 0) nothing
 * is checked out and `mask` stays 0. */
static void heap_out(_ak_pool_impl *p, _ak_pool_heap *h) {
  if (!p->pub.tkey) return;
  _ak_slab *s = _ak_slab_first(&h->avail);
  if (s) {
    /* Never-used slots go inline by address, unless shuffled (carved into `hot`). */
    AK_ASSERT(s->head.state == AK_SLAB_AVAIL && s->heap == h); /* the head of the heap's `avail` */
    bool shuffled = _ak_slab_shuffled(s);
    if (shuffled && !s->head.free.first && s->bump < s->end) _ak_slab_carve(s, AK_POOL_CARVE_BYTES);
    h->pub.cur.hot.first = s->head.free.first;
    __atomic_store_n(&h->hot_base, s->head.used, __ATOMIC_RELAXED);
    __atomic_store_n(&h->pub.cur.hot_used, s->head.used, __ATOMIC_RELAXED);
    h->pub.cur.hot_key = s->head.key; /* the links of `hot` are encoded with it */
    h->pub.cur.bump = s->bump;
    h->pub.cur.bump_end = shuffled ? s->bump : s->end;
    /* Last: a fork child must read a dead thread's torn check-out as none. */
    __atomic_store_n(&h->pub.cur.hot_slab, (uintptr_t)s, __ATOMIC_RELEASE);
  }
  /* The defragmenter must see every free: frees go to the library. */
  h->pub.cur.mask =
      atomic_load_explicit(&p->defragment, memory_order_relaxed) ? 0 : _ak_slab_mask(p->slab_size);
}

/* A new slab from the backing for `h`: nobody else knows it yet, so it
 * needs no lock. */
static _ak_slab *new_slab(_ak_pool_impl *p, _ak_pool_heap *h) {
  _ak_slab *s = _ak_pool_slab_new(p, "ak_pool_alloc");
  if (s) {
    AK_ASSERT(s->head.used == 0 && s->head.state == 0); /* fresh */
    s->heap = h;
    _ak_slab_set_owner(s, (uintptr_t)h, __ATOMIC_RELEASE);
  }
  return s;
}

/* Whether take_slab samples the pool's high-water mark (p->mu and every
 * heap's count, whose lines then move between the cores): at every
 * AK_PEAK_EVERY-th slab the heap takes while its own count passes the
 * highest it had at its samples (a heap that grows: the pool's count may
 * be at a new high), and at every AK_PEAK_IDLE-th otherwise (heaps that
 * only churn slabs below their highs; several of them may still add up to
 * a new high). So the mark misses less than AK_PEAK_EVERY slabs of a
 * growing heap and AK_PEAK_IDLE slabs of any other, per heap (pool.h). */
#define AK_PEAK_EVERY 8u
#define AK_PEAK_IDLE 64u
static bool sample_due(_ak_pool_heap *h) {
  unsigned n = ++h->takes;
  if (n % AK_PEAK_IDLE == 0) return true;
  return n % AK_PEAK_EVERY == 0 && live_get(h) > h->peak_seen;
}

/* Takes a slab for `h`: an abandoned one (adopted), one of the heap's own
 * spares, a spare of the pool, or a new one from the backing, obtained
 * after p->mu is dropped (the system allocator is not called under the
 * pool's lock). */
static _ak_slab *take_slab(_ak_pool_impl *p, _ak_pool_heap *h) {
  /* A stale `t_adoptable` only delays an adoption. */
  bool adopt = atomic_load_explicit(&p->threads.adoptable, memory_order_relaxed);
  bool sample = sample_due(h);
  /* With nothing to adopt, the heap's own spares, whose lines are likelier
   * to be in this thread's caches than those of a slab another thread
   * emptied and which keep threads that churn slabs off the pool's locks
   * and lists (their cache lines would travel between cores); then the
   * pool's spare set or a new slab, no pool mutex: it is taken only to
   * sample the high-water mark (sample_due). */
  if (!adopt && !sample) {
    _ak_slab *s = spare_for(p, h);
    if (!s) return new_slab(p, h);
    _ak_slab_set_owner(s, (uintptr_t)h, __ATOMIC_SEQ_CST);
    return s;
  }
  _ak_pool_lock(&p->mu);
  _ak_slab *s = _ak_slab_first(&p->threads.abandoned); /* `adopt` may be stale either way */
  if (s) {
    _ak_slab_list_remove(&p->threads.abandoned, s);
    /* Its live objects now count for this heap. */
    live_add(h, s->head.used);
  } else {
    atomic_store_explicit(&p->threads.adoptable, false, memory_order_relaxed);
    s = spare_for(p, h);
  }
  if (!p->max_objects) { /* sample the high-water mark (sample_due) */
    size_t live = _ak_threads_live(p);
    if (live > atomic_load(&p->threads.peak)) atomic_store(&p->threads.peak, live);
    size_t mine = live_get(h);
    if (mine > h->peak_seen) h->peak_seen = mine;
  }
  if (s) {
    s->heap = h;
    _ak_slab_set_owner(s, (uintptr_t)h, __ATOMIC_SEQ_CST);
  }
  _ak_pool_unlock(&p->mu);
  if (s) {
    live_sub(h, _ak_slab_collect(s));
    AK_ASSERT(s->heap == h && _ak_slab_validate(s, "take_slab")); /* ours now, consistent */
    return s;
  }
  return new_slab(p, h);
}

static void heap_trim(_ak_pool_impl *p, _ak_pool_heap *h) {
  pending_place(p, h);
  while (_ak_slab_first(&h->stash)) {
    _ak_slab *s = _ak_slab_first(&h->stash);
    _ak_slab_list_remove(&h->stash, s);
    _ak_pool_slab_release(p, s);
  }
  for (_ak_slab *s = _ak_slab_first(&h->full), *next; s; s = next) {
    next = _ak_slab_next(s);
    if (has_remote(s)) {
      live_sub(h, _ak_slab_collect(s));
      full_remove(h, s);
      _ak_slab_list_push_back(&h->avail, s, AK_SLAB_AVAIL);
    }
  }
  for (_ak_slab *s = _ak_slab_first(&h->avail), *next; s; s = next) {
    next = _ak_slab_next(s);
    live_sub(h, _ak_slab_collect(s));
    if (s->head.used == 0) {
      _ak_slab_list_remove(&h->avail, s);
      _ak_slab_set_owner(s, 0, __ATOMIC_SEQ_CST);
      _ak_pool_slab_release(p, s);
    }
  }
  AK_ASSERT(h->stash.n == 0); /* the heap's own spares went back */
  atomic_store_explicit(&h->trim_req, 0, memory_order_relaxed);
}

/* Finds a slab of `h` with a free slot and pops it (slow path). */
static void *refill(_ak_pool_impl *p, _ak_pool_heap *h) {
  if (atomic_load_explicit(&h->trim_req, memory_order_relaxed)) heap_trim(p, h);
  /* 0. With `avail` dry, the slabs owners' frees took off `full`, placed
   * by fullness (the batch). */
  if (!h->avail.n && h->pending.n) avail_dry(p, h);
  /* 1. The avail slabs' remote lists. */
  while (_ak_slab_first(&h->avail)) {
    _ak_slab *s = _ak_slab_first(&h->avail);
    live_sub(h, _ak_slab_collect(s));
    void *o = _ak_slab_pop(s);
    if (o) return o;
    avail_to_full(p, h, s);
  }
  /* 2. Full slabs that other threads freed into. */
  collect_full(p, h);
  if (_ak_slab_first(&h->avail)) return _ak_slab_pop(_ak_slab_first(&h->avail));
  /* 3. An abandoned, spare or new slab (an adopted one may be full: keep
   * it and take the next). */
  for (;;) {
    _ak_slab *s = take_slab(p, h);
    if (!s) return NULL;
    void *o = _ak_slab_pop(s);
    if (o) {
      _ak_slab_list_push_front(&h->avail, s, AK_SLAB_AVAIL);
      return o;
    }
    full_push(p, h, s);
  }
}

/* The allocation proper, on a heap whose current slab is checked in. */
static void *heap_alloc(_ak_pool_impl *p, _ak_pool_heap *h) {
  _ak_slab *s = _ak_slab_first(&h->avail);
  void *o = s ? _ak_slab_pop(s) : NULL;
  if (AK_UNLIKELY(!o)) {
    o = refill(p, h);
    if (!o) return NULL;
    s = _ak_slab_first(&h->avail);
  }
  live_add(h, 1);
  if (!s->head.free.first && s->bump == s->end) avail_to_full(p, h, s);
  if (AK_UNLIKELY(p->debug)) {
    _ak_pool_mark_live(p, s, o);
    _ak_pool_track_alloc(p, o);
  }
  return o;
}

/* ak_pool_alloc_slow. */
static void *threads_alloc(_ak_pool_impl *p) {
  _ak_spare_tick(&p->spares); /* spares due for the policy (one clock read) */
  _ak_pool_heap *h = heap_get(p, true);
  if (AK_UNLIKELY(!h)) {
    _ak_pool_error(p, ENOMEM, "ak_pool_alloc", "out of memory for the thread's heap");
    return NULL;
  }
  _ak_spare_tick(&h->spares); /* also without the background thread */
  if (p->max_objects) {
    size_t n = atomic_fetch_add_explicit(&p->threads.live, 1, memory_order_relaxed) + 1;
    if (n > p->max_objects) {
      atomic_fetch_sub_explicit(&p->threads.live, 1, memory_order_relaxed);
      _ak_pool_error(p, ENOMEM, "ak_pool_alloc", "max_objects live objects already");
      return NULL;
    }
    size_t peak = atomic_load_explicit(&p->threads.peak, memory_order_relaxed);
    while (n > peak && !atomic_compare_exchange_weak(&p->threads.peak, &peak, n)) {
    }
  }
  heap_in(p, h, NULL);
  void *o = heap_alloc(p, h);
  heap_out(p, h);
  if (!o && p->max_objects) atomic_fetch_sub_explicit(&p->threads.live, 1, memory_order_relaxed);
  return o;
}

/* Hardened: aborts if `o` is already free (see _ak_slab_is_free). */
static inline void check_double_free(_ak_pool_impl *p, _ak_slab *s, void *o, bool local) {
  if (ak_harden_double_free && AK_UNLIKELY(_ak_slab_is_free(s, o, local))) _ak_pool_double_free(p, o);
}

static void remote_free(_ak_pool_impl *p, _ak_slab *s, void *o) {
  if (_ak_slab_owner(s, __ATOMIC_ACQUIRE) == 0) {
    /* Abandoned: nobody owns the local list; work on it under the mutex. */
    _ak_pool_lock(&p->mu);
    if (_ak_slab_owner(s, __ATOMIC_SEQ_CST) == 0) {
      check_double_free(p, s, o, true);
      _ak_slab_push(s, o);
      (void)_ak_slab_collect(s);
      if (s->head.used == 0) {
        _ak_slab_list_remove(&p->threads.abandoned, s);
        _ak_pool_slab_put(p, &p->spares, s);
      }
      _ak_pool_unlock(&p->mu);
      return;
    }
    _ak_pool_unlock(&p->mu);
  }
  check_double_free(p, s, o, false);
  /* One CAS: push on the slab's remote list (keeping its tag); the owner
   * collects it. `s` is not touched after the CAS. */
  void *head = atomic_load_explicit(&s->remote, memory_order_relaxed);
  do {
    _ak_slab_set_link(s, o, _ak_slab_remote_list(head));
  } while (!atomic_compare_exchange_weak_explicit(
      &s->remote, &head, (void *)((uintptr_t)o | ((uintptr_t)head & AK_SLAB_REMOTE_FULL)),
      memory_order_release, memory_order_relaxed));
  /* The first remote free into a slab on its owner's full list: tell the
   * owners to walk their full lists (full_push). */
  if ((uintptr_t)head == AK_SLAB_REMOTE_FULL)
    atomic_fetch_add_explicit(&p->threads.full_epoch, 1, memory_order_release);
}

/* ak_pool_free_slow. */
static void threads_free(_ak_pool_impl *p, void *o) {
  _ak_spare_tick(&p->spares);
  _ak_slab *s = _ak_pool_slab_find(p, o, "ak_pool_free");
  if (AK_UNLIKELY(p->debug)) {
    _ak_pool_mark_free(p, s, o, "ak_pool_free");
    _ak_pool_track_free(p, o);
  }
  if (p->max_objects) atomic_fetch_sub_explicit(&p->threads.live, 1, memory_order_relaxed);
  _ak_pool_heap *h = heap_get(p, false);
  if (!h || _ak_slab_owner(s, __ATOMIC_RELAXED) != (uintptr_t)h) {
    remote_free(p, s, o);
    return;
  }
  heap_in(p, h, s);
  if (AK_UNLIKELY(o == s->head.free.first)) _ak_pool_double_free(p, o);
  check_double_free(p, s, o, true);
  bool was_full = s->head.state == AK_SLAB_FULL;
  _ak_slab_push(s, o);
  live_sub(h, 1);
  if (was_full) {
    full_remove(h, s); /* no atomic operation: the tag stays (full_push) */
    _ak_pool_list_unfull(p, &h->avail, &h->pending, s);
  } else if (AK_UNLIKELY(atomic_load_explicit(&p->defragment, memory_order_relaxed)) &&
             !(s->flags & AK_SLAB_F_PENDING)) {
    _ak_pool_list_settle(p, &h->avail, s);
  }
  if (s->head.used == 0 && h->avail.n + h->pending.n > 1) {
    _ak_slab_list_remove(avail_list(h, s), s);
    _ak_slab_set_owner(s, 0, __ATOMIC_SEQ_CST);
    give_slab(p, h, s);
  }
  heap_out(p, h);
}

/* ak_pool_trim: the caller's heap, the abandoned slabs and every spare
 * set now; other threads' heaps at their next slow path. */
static void threads_trim(_ak_pool_impl *p) {
  _ak_pool_heap *mine = heap_get(p, false);
  if (mine) {
    heap_in(p, mine, NULL);
    heap_trim(p, mine);
    heap_out(p, mine);
  }
  _ak_pool_lock(&p->mu);
  _ak_threads_collect_abandoned(p, true);
  _ak_spare_drain(&p->spares);
  /* Other threads' heaps: their spare sets now (each has its lock), their
   * lists, theirs alone, at their next slow path. */
  for (_ak_pool_heap *h = heap_first(p); h; h = heap_next(h)) {
    _ak_spare_drain(&h->spares);
    if (h != mine) atomic_store_explicit(&h->trim_req, 1, memory_order_relaxed);
  }
  _ak_pool_unlock(&p->mu);
}

/* ak_pool_reserve: room for `n` objects in the caller's heap. 0 or errno. */
static int threads_reserve(_ak_pool_impl *p, size_t n) {
  _ak_pool_heap *h = heap_get(p, true);
  if (!h) {
    _ak_pool_error(p, ENOMEM, "ak_pool_reserve", "out of memory for the thread's heap");
    return ENOMEM;
  }
  heap_in(p, h, NULL);
  pending_place(p, h);
  size_t room = 0;
  for (_ak_slab *s = _ak_slab_first(&h->avail); s; s = _ak_slab_next(s)) room += s->capacity - s->head.used;
  int rc = 0;
  while (room < n) {
    _ak_slab *s = spare_for(p, h);
    if (!s) {
      _ak_pool_lock(&p->mu);
      s = _ak_pool_slab_get(p);
      _ak_pool_unlock(&p->mu);
    }
    if (!s) {
      rc = errno ? errno : ENOMEM;
      break;
    }
    s->heap = h;
    _ak_slab_set_owner(s, (uintptr_t)h, __ATOMIC_SEQ_CST);
    _ak_slab_list_push_back(&h->avail, s, AK_SLAB_AVAIL);
    room += s->capacity;
  }
  heap_out(p, h);
  return rc;
}

/* Inline paths on unless a check, a tool or max_objects needs the library. */
static void threads_init(_ak_pool_impl *p) {
  _ak_pool_inline_off(p);
  if (p->inline_ok && !_ak_config_checked && !p->tracked && !p->max_objects) p->pub.tkey = _ak_pool_key(p);
}

/* ak_pool_destroy: the abandoned slabs (the heaps gave theirs back). */
static void threads_release(_ak_pool_impl *p) { _ak_pool_slab_list_release(p, &p->threads.abandoned); }

const _ak_pool_mode _ak_mode_threads = {
    .name = "threads",
    .tls = &_ak_threads_tls,
    .init = threads_init,
    .alloc = threads_alloc,
    .free = threads_free,
    .reserve = threads_reserve,
    .trim = threads_trim,
    .release = threads_release,
    .counts = _ak_threads_counts,
    .stats = _ak_threads_stats,
    .tick = _ak_threads_tick,
    .fork_lock = _ak_threads_fork_lock,
    .fork_unlock = _ak_threads_fork_unlock,
    .fork_child = _ak_threads_fork_child,
};
