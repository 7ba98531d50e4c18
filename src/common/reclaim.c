/* SPDX-License-Identifier: MIT */
/* reclaim.c - the memory-return policy: spare sets, the coarse clock, the
 * delays and the background thread (reclaim.h, arenakit/reclaim.h).
 *
 * Locks, in order: g_ctl (start/stop of the thread), g_mu (the registry of
 * sets, the thread's state), then a set's `mu` (a leaf; the owner's locks
 * come before it). The thread holds g_mu only between sets: it pins a set,
 * drops g_mu, purges it (the owner's release callbacks take the owner's
 * leaf locks), and takes g_mu again; _ak_spare_set_fini waits for the pin
 * to go. So the thread never holds g_mu while it waits for any other lock,
 * and the atfork handlers (g_mu here; the owners take their own and their
 * sets') cannot deadlock with it in either order. */
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

static void wake_thread(void);

uint64_t _ak_reclaim_now(void) {
  uint64_t (*fn)(void) = atomic_load_explicit(&g_clock, memory_order_acquire);
  if (fn) return fn();
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void _ak_reclaim_set_clock(uint64_t (*now_ms)(void)) {
  atomic_store_explicit(&g_clock, now_ms, memory_order_release);
  wake_thread();
}

int ak_reclaim_set_delays(long purge_ms, long release_ms) {
  if (purge_ms < -1 || release_ms < -1) {
    _ak_error(EINVAL, "ak_reclaim_set_delays: delays %ld and %ld ms (each must be >= -1)", purge_ms,
              release_ms);
    return EINVAL;
  }
  atomic_store_explicit(&g_purge_ms, purge_ms, memory_order_relaxed);
  atomic_store_explicit(&g_release_ms, release_ms, memory_order_relaxed);
  wake_thread();
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
 * come and go every few tens of ms) does not fault every page in again on
 * each cycle (on the thread-churn workload 1.5 GiB of madvise a second and
 * 5x glibc's page faults without it), and one that goes idle has its
 * memory back within AK_PAGE_EXTEND_WINDOW_MS + AK_PAGE_EXTEND_MAX_MS at
 * worst. (A window of 4 delays missed the refaults of rounds that a
 * loaded machine stretched past it.) A delay <= 0 is never extended. */
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

/* Takes `s` (hot or cold) out of the set and its counts (under mu). */
static void set_unlink(_ak_spare_set *set, _ak_spare *s) {
  if (s->cold) {
    _ak_dlist_remove(&set->cold, &s->node);
  } else {
    _ak_dlist_remove(&set->hot, &s->node);
    AK_ASSERT(set->hot_bytes >= s->size);
    set->hot_bytes -= s->size;
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
  set->hot_bytes -= s->size;
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

/* ---- the registry and the background thread ---------------------------------- */

static pthread_mutex_t g_ctl = PTHREAD_MUTEX_INITIALIZER; /* start/stop */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;  /* registry, thread state */
static pthread_cond_t g_wake;                             /* the thread sleeps on it */
static pthread_cond_t g_unpinned;                         /* a set's pin went */
static _ak_dlist g_sets;                                  /* registered sets (under g_mu) */
static pthread_t g_thread;
static bool g_running, g_stop; /* under g_mu */
static _Atomic size_t g_passes;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* The set of a node of the registry. */
static inline _ak_spare_set *set_of(_ak_dnode *n) { return _AK_DLIST_ENTRY(n, _ak_spare_set, reg); }

/* fork: g_mu is taken (it is never held while its holder waits for
 * another lock, so this cannot deadlock whatever order the handlers of
 * other modules run in). g_ctl is not: ak_reclaim_thread_stop holds it
 * while it joins the thread, which may wait for an owner's lock that
 * another atfork handler already holds; the child makes it anew. */
static void fork_prepare(void) { pthread_mutex_lock(&g_mu); }

static void fork_parent(void) { pthread_mutex_unlock(&g_mu); }

/* The condition variables: g_wake on the monotonic clock (the thread's
 * timed waits), g_unpinned. */
static void conds_init(void) {
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&g_wake, &ca);
  pthread_condattr_destroy(&ca);
  pthread_cond_init(&g_unpinned, NULL);
}

/* The child has no background thread: its pins are void, and g_ctl (maybe
 * held by a parent thread starting or stopping the thread) and the
 * condition variables it may have waited on are made anew. */
static void fork_child(void) {
  g_running = false;
  g_stop = false;
  for (_ak_dnode *x = g_sets.head; x; x = x->next) set_of(x)->pins = 0;
  conds_init();
  pthread_mutex_init(&g_ctl, NULL);
  pthread_mutex_unlock(&g_mu);
}

/* Once: the condition variables. */
static void once_init(void) { conds_init(); }

/* The fork handlers, at load (common/lifecycle.h). */
__attribute__((constructor(AK_CTOR_RECLAIM))) static void fork_register(void) {
  (void)pthread_atfork(fork_prepare, fork_parent, fork_child);
}

static void wake_thread(void) {
  pthread_once(&g_once, once_init);
  pthread_mutex_lock(&g_mu);
  if (g_running) pthread_cond_signal(&g_wake);
  pthread_mutex_unlock(&g_mu);
}

/* Under g_mu: one pass over the registered sets (the thread's, or
 * ak_reclaim_collect's). Returns the ms until the next step falls due
 * (5 to 250). */
static long pass_locked(void) {
  uint64_t next = UINT64_MAX;
  for (_ak_spare_set *set = set_of(g_sets.head); set;) {
    set->pins++;
    pthread_mutex_unlock(&g_mu);
    uint64_t now = _ak_reclaim_now();
    uint64_t d = __atomic_load_n(&set->deadline, __ATOMIC_RELAXED);
    if (now >= d) {
      _ak_spare_purge(set, now);
      d = __atomic_load_n(&set->deadline, __ATOMIC_RELAXED);
    }
    if (d != UINT64_MAX) {
      uint64_t wait = d > now ? d - now : 0;
      if (wait < next) next = wait;
    }
    pthread_mutex_lock(&g_mu);
    _ak_spare_set *following = set_of(set->reg.next); /* read under g_mu: current */
    if (--set->pins == 0) pthread_cond_broadcast(&g_unpinned);
    set = following;
  }
  atomic_fetch_add_explicit(&g_passes, 1, memory_order_relaxed);
  return next < 5 ? 5 : next > 250 ? 250 : (long)next;
}

static void *thread_main(void *arg) {
  (void)arg;
  pthread_mutex_lock(&g_mu);
  while (!g_stop) {
    long ms = pass_locked();
    if (g_stop) break;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    (void)pthread_cond_timedwait(&g_wake, &g_mu, &ts);
  }
  pthread_mutex_unlock(&g_mu);
  return NULL;
}

int ak_reclaim_thread_start(void) {
  pthread_once(&g_once, once_init);
  pthread_mutex_lock(&g_ctl);
  int rc = 0;
  if (!g_running) {
    g_stop = false;
    /* Signals are blocked in the thread: it must never run a handler. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&g_thread, NULL, thread_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc == 0) {
      pthread_mutex_lock(&g_mu);
      g_running = true;
      pthread_mutex_unlock(&g_mu);
    } else {
      _ak_error(rc, "ak_reclaim_thread_start: pthread_create failed: %s", strerror(rc));
    }
  }
  pthread_mutex_unlock(&g_ctl);
  return rc;
}

void ak_reclaim_thread_stop(void) {
  pthread_once(&g_once, once_init);
  pthread_mutex_lock(&g_ctl);
  pthread_mutex_lock(&g_mu);
  bool running = g_running;
  if (running) {
    g_stop = true;
    pthread_cond_signal(&g_wake);
  }
  pthread_mutex_unlock(&g_mu);
  if (running) {
    pthread_join(g_thread, NULL);
    pthread_mutex_lock(&g_mu);
    g_running = false;
    g_stop = false;
    pthread_mutex_unlock(&g_mu);
  }
  pthread_mutex_unlock(&g_ctl);
}

bool ak_reclaim_thread_running(void) {
  pthread_once(&g_once, once_init);
  pthread_mutex_lock(&g_mu);
  bool r = g_running;
  pthread_mutex_unlock(&g_mu);
  return r;
}

size_t _ak_reclaim_thread_passes(void) { return atomic_load_explicit(&g_passes, memory_order_relaxed); }

void ak_reclaim_collect(void) {
  pthread_once(&g_once, once_init);
  pthread_mutex_lock(&g_mu);
  (void)pass_locked(); /* what one pass of the thread does */
  pthread_mutex_unlock(&g_mu);
}

/* AK_BACKGROUND, read once, at the first registration. */
static pthread_once_t g_env_once = PTHREAD_ONCE_INIT;
static void env_init(void) {
  const char *v = getenv("AK_BACKGROUND");
  if (!v || !*v || strcmp(v, "0") == 0) return;
  if (strcmp(v, "1") != 0) {
    _ak_warn("AK_BACKGROUND=%s is not 0 or 1; the background thread stays off", v);
    return;
  }
  (void)ak_reclaim_thread_start();
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

void _ak_spare_set_register(_ak_spare_set *set) {
  pthread_once(&g_once, once_init);
  pthread_mutex_lock(&g_mu);
  bool add = !(set->flags & AK_SPARE_REGISTERED);
  if (add) {
    set->flags |= AK_SPARE_REGISTERED;
    _ak_dlist_push_front(&g_sets, &set->reg);
  }
  pthread_mutex_unlock(&g_mu);
  if (add) pthread_once(&g_env_once, env_init);
}

void _ak_spare_set_fini(_ak_spare_set *set) {
  if (set->flags & AK_SPARE_REGISTERED) {
    pthread_mutex_lock(&g_mu);
    while (set->pins) pthread_cond_wait(&g_unpinned, &g_mu);
    _ak_dlist_remove(&g_sets, &set->reg);
    pthread_mutex_unlock(&g_mu);
    set->flags &= ~(unsigned)AK_SPARE_REGISTERED;
  }
  pthread_mutex_destroy(&set->mu);
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
  set->hot_bytes += size;
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
  pthread_mutex_unlock(&set->mu);
  release_all(set, &out);
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
  set->n = set->bytes = set->hot_bytes = 0;
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
