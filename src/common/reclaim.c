/* SPDX-License-Identifier: MIT */
/* reclaim.c - the memory-return policy: the coarse clock, the delays and
 * the spare sets (reclaim.h, arenakit/reclaim.h). The registry of sets
 * and the background thread that purges them are reclaim_thread.c's.
 *
 * A set's `mu` is a leaf lock (the owner's locks come before it); the
 * owner's release callbacks run with it dropped. */
#define _GNU_SOURCE
#include "common/reclaim.h"

#include <stdatomic.h>

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/assert.h"
#include "common/error.h"
#include "common/lifecycle.h"
#include "common/list.h"

/* ---- the delays and the clock ----------------------------------------------- */

static _Atomic long g_purge_ms = AK_RECLAIM_PURGE_DELAY_MS;
static _Atomic long g_release_ms = AK_RECLAIM_RELEASE_DELAY_MS;
static uint64_t (*_Atomic g_clock)(void);

uint64_t _ak_reclaim_now(void) {
  uint64_t (*fn)(void) = atomic_load_explicit(&g_clock, memory_order_acquire);
  if (fn) return fn();
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void _ak_reclaim_set_clock(uint64_t (*now_ms)(void)) {
  atomic_store_explicit(&g_clock, now_ms, memory_order_release);
  _ak_reclaim_thread_signal();
}

int ak_reclaim_set_delays(long purge_ms, long release_ms) {
  if (purge_ms < -1 || release_ms < -1) {
    _ak_error(EINVAL, "ak_reclaim_set_delays: delays %ld and %ld ms (each must be >= -1)", purge_ms,
              release_ms);
    return EINVAL;
  }
  atomic_store_explicit(&g_purge_ms, purge_ms, memory_order_relaxed);
  atomic_store_explicit(&g_release_ms, release_ms, memory_order_relaxed);
  _ak_reclaim_thread_signal();
  return 0;
}

void ak_reclaim_get_delays(long *purge_ms, long *release_ms) {
  if (purge_ms) *purge_ms = atomic_load_explicit(&g_purge_ms, memory_order_relaxed);
  if (release_ms) *release_ms = atomic_load_explicit(&g_release_ms, memory_order_relaxed);
}

/* The page delay (arenakit/reclaim.h): free pages among live blocks that
 * no running thread holds, cached large mappings.
 * While such pages are taken again within AK_PAGE_EXTEND_WINDOW_MS after
 * they were decommitted (_ak_reclaim_page_refault), the delay in force
 * doubles, up to AK_PAGE_EXTEND_MAX_MS; once the window passes without
 * such a refault it is the set delay again. So a program that frees and
 * reuses memory in cycles a little longer than the delay (threads that
 * come and go every few tens of ms) does not decommit and fault every page
 * in again on each cycle, and one that goes idle has its memory back
 * within AK_PAGE_EXTEND_WINDOW_MS + AK_PAGE_EXTEND_MAX_MS at worst. The
 * window is a fixed time, not a number of delays, so that cycles which a
 * loaded machine stretches still fall inside it. A delay <= 0 is never
 * extended. */
#define AK_PAGE_EXTEND_MAX_MS 80
#define AK_PAGE_EXTEND_WINDOW_MS 1000u
#define AK_PAGE_DELAY_MAX_MS 86400000L
static _Atomic long g_page_ms = AK_RECLAIM_PAGE_DELAY_MS;
static _Atomic long g_page_extended;      /* the extended delay (ms) */
static _Atomic long g_page_extended_from; /* the set delay it extends (a new value drops it) */
static _Atomic uint64_t g_page_refault;   /* clock of the last refault */

int ak_reclaim_set_page_delay(long ms) {
  if (ms < -1 || ms > AK_PAGE_DELAY_MAX_MS) {
    _ak_error(EINVAL, "ak_reclaim_set_page_delay: %ld ms (must be -1 to %ld)", ms, AK_PAGE_DELAY_MAX_MS);
    return EINVAL;
  }
  atomic_store_explicit(&g_page_ms, ms, memory_order_relaxed);
  return 0;
}

long ak_reclaim_get_page_delay(void) { return atomic_load_explicit(&g_page_ms, memory_order_relaxed); }

long _ak_reclaim_page_delay(uint64_t now) {
  long d = atomic_load_explicit(&g_page_ms, memory_order_relaxed);
  if (d <= 0 || atomic_load_explicit(&g_page_extended_from, memory_order_relaxed) != d) return d;
  long e = atomic_load_explicit(&g_page_extended, memory_order_relaxed);
  if (e > d && _ak_reclaim_since(now, atomic_load_explicit(&g_page_refault, memory_order_relaxed)) <
                   AK_PAGE_EXTEND_WINDOW_MS)
    return e;
  return d;
}

void _ak_reclaim_page_refault(uint64_t purged, uint64_t now) {
  long d = atomic_load_explicit(&g_page_ms, memory_order_relaxed);
  long cur = _ak_reclaim_page_delay(now);
  if (cur <= 0 || _ak_reclaim_since(now, purged) >= AK_PAGE_EXTEND_WINDOW_MS)
    return; /* long after: the purge was right */
  long next = cur >= AK_PAGE_EXTEND_MAX_MS / 2 ? AK_PAGE_EXTEND_MAX_MS : 2 * cur;
  if (next < cur) next = cur; /* a set delay above the bound: itself */
  atomic_store_explicit(&g_page_extended, next, memory_order_relaxed);
  atomic_store_explicit(&g_page_extended_from, d, memory_order_relaxed);
  atomic_store_explicit(&g_page_refault, now, memory_order_relaxed);
}

/* The release delay as it applies: never below the purge delay (a spare is
 * decommitted no later than it is released); -1 never. */
static long release_delay(long purge) {
  long r = atomic_load_explicit(&g_release_ms, memory_order_relaxed);
  return (r >= 0 && purge > r) ? purge : r;
}

int _ak_reclaim_due(uint64_t since, uint64_t now, bool release_ok) {
  long purge = atomic_load_explicit(&g_purge_ms, memory_order_relaxed);
  long release = release_delay(purge);
  uint64_t age = _ak_reclaim_since(now, since);
  if (release_ok && release >= 0 && age >= (uint64_t)release) return 2;
  if (purge >= 0 && age >= (uint64_t)purge) return 1;
  return 0;
}

/* ---- spare sets ------------------------------------------------------------------ */

/* The spare of a node of a set's hot or cold list (NULL stays NULL). */
static inline _ak_spare *spare_of(_ak_dnode *n) { return _AK_DLIST_ENTRY(n, _ak_spare, node); }

/* The oldest spare of the set: cold's tail, else hot's (NULL if none). */
static inline _ak_spare *oldest(_ak_spare_set *set) {
  return spare_of(set->cold.tail ? set->cold.tail : set->hot.tail);
}

/* The counts of a set agree with its lists (under mu; O(1)): `n` and
 * `bytes` count both lists, `hot_bytes` the hot one. */
static inline void check_counts(const _ak_spare_set *set) {
  AK_ASSERT(set->n == set->hot.n + set->cold.n);
  AK_ASSERT(set->hot_bytes <= set->bytes);
  AK_ASSERT((set->hot.n == 0) == (set->hot_bytes == 0));
  AK_ASSERT((set->n == 0) == (set->bytes == 0));
}

/* Checked build, under mu: the whole set walked (O(n); at drain and
 * stats only). Each spare's `cold` flag matches its list, each list's
 * length is its count and the byte counts are the sums of the sizes. (The
 * order by time is not checked: tests swap the clock for a fake one.) */
static void check_lists(const _ak_spare_set *set) {
  if (!AK_CHECKED) return;
  size_t hot = 0, all = 0;
  const _ak_dlist *lists[2] = {&set->hot, &set->cold};
  for (int i = 0; i < 2; i++) {
    size_t n = 0;
    for (_ak_dnode *x = lists[i]->head; x; x = x->next, n++) {
      const _ak_spare *s = spare_of(x);
      AK_ASSERT(s->cold == (unsigned)i);
      all += s->size;
      if (i == 0) hot += s->size;
    }
    AK_ASSERT(n == lists[i]->n);
  }
  AK_ASSERT(hot == set->hot_bytes && all == set->bytes);
  check_counts(set);
}

/* Under mu: sets `hot_bytes`, which _ak_spare_has_hot reads without it. */
static void hot_bytes_set(_ak_spare_set *set, size_t v) {
  __atomic_store_n(&set->hot_bytes, v, __ATOMIC_RELAXED);
}

bool _ak_spare_has_hot(const _ak_spare_set *set) {
  return __atomic_load_n(&set->hot_bytes, __ATOMIC_RELAXED) != 0;
}

/* Takes `s` (hot or cold) out of the set and its counts (under mu). */
static void set_unlink(_ak_spare_set *set, _ak_spare *s) {
  if (s->cold) {
    _ak_dlist_remove(&set->cold, &s->node);
  } else {
    _ak_dlist_remove(&set->hot, &s->node);
    AK_ASSERT(set->hot_bytes >= s->size);
    hot_bytes_set(set, set->hot_bytes - s->size);
  }
  AK_ASSERT(set->n > 0 && set->bytes >= s->size);
  set->n--;
  set->bytes -= s->size;
  check_counts(set);
}

/* Under mu: when the next step of the policy falls due (UINT64_MAX: none).
 * Hot spares are sorted, so only the two lists' tails matter. */
static void set_deadline(_ak_spare_set *set) {
  uint64_t d = UINT64_MAX;
  if (set->flags & AK_SPARE_TIMED) {
    long purge = atomic_load_explicit(&g_purge_ms, memory_order_relaxed);
    long release = set->ops->release ? release_delay(purge) : -1;
    _ak_spare *hot_tail = spare_of(set->hot.tail), *o = oldest(set);
    if (purge >= 0 && hot_tail) d = hot_tail->since + (uint64_t)purge;
    if (release >= 0 && o && o->since + (uint64_t)release < d) d = o->since + (uint64_t)release;
  }
  __atomic_store_n(&set->deadline, d, __ATOMIC_RELAXED);
}

/* Under mu: decommits hot spare `s` and moves it to the cold list's head.
 * Called on the hot list's tail only (or on the only hot spare), so the
 * cold list stays sorted (every hot spare emptied after every cold one). */
static void cool(_ak_spare_set *set, _ak_spare *s) {
  /* Only hot's tail cools, onto cold's head: every hot spare stays newer
   * than every cold one. */
  AK_ASSERT(!s->cold && &s->node == set->hot.tail);
  _ak_dlist_remove(&set->hot, &s->node);
  AK_ASSERT(set->hot_bytes >= s->size);
  hot_bytes_set(set, set->hot_bytes - s->size);
  set->ops->decommit(s, set->ctx);
  s->cold = 1;
  set->purged_bytes += s->size;
  _ak_dlist_push_front(&set->cold, &s->node);
  check_counts(set);
}

/* Under mu: applies the policy at `now`; spares to release are unlinked
 * and put on `out` for the caller to release once mu is dropped. */
static void purge_locked(_ak_spare_set *set, uint64_t now, _ak_dlist *out) {
  if (set->flags & AK_SPARE_TIMED) {
    bool release_ok = set->ops->release != NULL;
    for (;;) { /* the oldest spares first: cold's tail, then hot's */
      _ak_spare *o = oldest(set);
      if (!o || _ak_reclaim_due(o->since, now, release_ok) != 2) break;
      set_unlink(set, o);
      set->released_bytes += o->size;
      _ak_dlist_push_back(out, &o->node);
    }
    while (set->hot.tail && _ak_reclaim_due(spare_of(set->hot.tail)->since, now, false) >= 1)
      cool(set, spare_of(set->hot.tail));
  }
  set_deadline(set);
}

/* Releases the spares of `out` (unlinked from the set; mu dropped). */
static void release_all(_ak_spare_set *set, _ak_dlist *out) {
  for (_ak_dnode *x; (x = _ak_dlist_pop_front(out)) != NULL;) set->ops->release(spare_of(x), set->ctx);
}

/* ---- sets: the API ------------------------------------------------------------------ */

void _ak_spare_set_init(_ak_spare_set *set, const _ak_spare_ops *ops, void *ctx, size_t cap, unsigned flags) {
  memset(set, 0, sizeof *set);
  pthread_mutex_init(&set->mu, NULL);
  set->ops = ops;
  set->ctx = ctx;
  set->cap = cap;
  set->flags = flags;
  __atomic_store_n(&set->deadline, UINT64_MAX, __ATOMIC_RELAXED);
  if (flags & AK_SPARE_REGISTERED) {
    set->flags &= ~(unsigned)AK_SPARE_REGISTERED;
    _ak_spare_set_register(set);
  }
}

void _ak_spare_put(_ak_spare_set *set, _ak_spare *s, size_t size) {
  if (set->cap == 0) {
    set->ops->release(s, set->ctx);
    return;
  }
  uint64_t now = _ak_reclaim_now();
  _ak_dlist out = {0};
  pthread_mutex_lock(&set->mu);
  s->node.prev = s->node.next = NULL; /* the owner's node is on no list of the set */
  s->since = now;
  s->size = size;
  s->cold = 0;
  _ak_dlist_push_front(&set->hot, &s->node);
  set->n++;
  set->bytes += size;
  hot_bytes_set(set, set->hot_bytes + size);
  if (set->n > set->cap) { /* past the cap: the oldest spare goes */
    _ak_spare *o = oldest(set);
    set_unlink(set, o);
    set->released_bytes += o->size;
    _ak_dlist_push_back(&out, &o->node);
  }
  check_counts(set);
  if (now >= __atomic_load_n(&set->deadline, __ATOMIC_RELAXED) || set->hot.tail == &s->node ||
      !(set->flags & AK_SPARE_TIMED))
    purge_locked(set, now, &out); /* a first hot spare sets the deadline; purge 0 cools it at once */
  bool waits = (set->flags & AK_SPARE_REGISTERED) && set->deadline != UINT64_MAX;
  pthread_mutex_unlock(&set->mu);
  release_all(set, &out);
  if (waits) _ak_reclaim_wake(); /* the background thread purges it if the owner goes quiet */
}

_ak_spare *_ak_spare_take(_ak_spare_set *set, bool *cold) {
  _ak_dlist out = {0};
  uint64_t d = __atomic_load_n(&set->deadline, __ATOMIC_RELAXED);
  uint64_t now = d == UINT64_MAX ? 0 : _ak_reclaim_now();
  pthread_mutex_lock(&set->mu);
  if (now >= __atomic_load_n(&set->deadline, __ATOMIC_RELAXED)) purge_locked(set, now, &out);
  _ak_spare *s = spare_of(set->hot.head ? set->hot.head : set->cold.head);
  if (s) {
    set_unlink(set, s);
    set_deadline(set);
  }
  pthread_mutex_unlock(&set->mu);
  release_all(set, &out);
  if (s && cold) *cold = s->cold != 0;
  return s;
}

void _ak_spare_tick(_ak_spare_set *set) {
  uint64_t d = __atomic_load_n(&set->deadline, __ATOMIC_RELAXED);
  if (AK_LIKELY(d == UINT64_MAX)) return;
  uint64_t now = _ak_reclaim_now();
  if (now >= d) _ak_spare_purge(set, now);
}

void _ak_spare_purge(_ak_spare_set *set, uint64_t now) {
  _ak_dlist out = {0};
  pthread_mutex_lock(&set->mu);
  purge_locked(set, now, &out);
  pthread_mutex_unlock(&set->mu);
  release_all(set, &out);
}

void _ak_spare_drain(_ak_spare_set *set) {
  _ak_dlist out = {0};
  pthread_mutex_lock(&set->mu);
  check_lists(set);
  for (_ak_dnode *x; (x = _ak_dlist_pop_front(&set->hot)) != NULL;) _ak_dlist_push_back(&out, x);
  for (_ak_dnode *x; (x = _ak_dlist_pop_front(&set->cold)) != NULL;) _ak_dlist_push_back(&out, x);
  set->n = set->bytes = 0;
  hot_bytes_set(set, 0);
  set_deadline(set);
  pthread_mutex_unlock(&set->mu);
  if (set->ops->release)
    release_all(set, &out);
  else
    while (_ak_dlist_pop_front(&out)) continue; /* only unlinked: each node ends with no links */
}

void _ak_spare_stats(_ak_spare_set *set, _ak_spare_counts *out) {
  pthread_mutex_lock(&set->mu);
  check_lists(set);
  out->spares = set->n;
  out->spare_bytes = set->bytes;
  out->committed = set->hot_bytes;
  out->purged_bytes = set->purged_bytes;
  out->released_bytes = set->released_bytes;
  pthread_mutex_unlock(&set->mu);
}

void _ak_spare_set_lock(_ak_spare_set *set) { pthread_mutex_lock(&set->mu); }
void _ak_spare_set_unlock(_ak_spare_set *set) { pthread_mutex_unlock(&set->mu); }
