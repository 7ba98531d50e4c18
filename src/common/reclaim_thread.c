/* SPDX-License-Identifier: MIT */
/* reclaim_thread.c - the registry of spare sets and ticks, and the
 * background thread that purges them (arenakit/reclaim.h: ak_background,
 * ak_reclaim_collect; reclaim.h: the wake and the ticks).
 *
 * Locks, in order: g_ctl (start/stop of the thread), g_mu (the registry,
 * the thread's sleep), then a set's `mu` (a leaf; the owner's locks come
 * before it). The thread holds g_mu only between sets: it pins a set,
 * drops g_mu, purges it (the owner's release callbacks take the owner's
 * leaf locks), and takes g_mu again; ticks run with g_mu dropped;
 * _ak_spare_set_fini waits for the pin to go. So the thread never holds
 * g_mu while it waits for any other lock, the wake takes no lock at all,
 * and the atfork handlers (g_mu here; the owners take their own and their
 * sets') cannot deadlock with it in either order. */
#define _GNU_SOURCE
#include <stdatomic.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/assert.h"
#include "common/error.h"
#include "common/lifecycle.h"
#include "common/list.h"
#include "common/reclaim.h"
#include "common/signals.h"

/* The thread's modes (arenakit/reclaim.h, ak_background): AUTO starts it
 * when memory starts to wait for a purge (_ak_reclaim_wake, then
 * _ak_reclaim_start_wanted at a point where the caller holds no lock) and
 * lets it end once nothing has waited for AK_IDLE_EXIT_MS; ON runs it from
 * ak_reclaim_thread_start() until ak_reclaim_thread_stop(); OFF never
 * starts it. g_state: RUNNING while a thread exists that has not decided
 * to end; WORK set by every wake since the thread last looked. The thread
 * ends only by a compare-and-swap from RUNNING alone to 0, so a wake that
 * came first keeps it running, and one that comes after sees it gone and
 * asks for a new one: no wake is lost. */
#define AK_IDLE_EXIT_MS 1000
enum { ST_RUNNING = 1u, ST_WORK = 2u };
static pthread_mutex_t g_ctl = PTHREAD_MUTEX_INITIALIZER; /* start/stop */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;  /* registry, thread state */
static pthread_cond_t g_wake;                             /* the thread sleeps on it */
static pthread_cond_t g_unpinned;                         /* a set's pin went */
static _ak_dlist g_sets;                                  /* registered sets (under g_mu) */
static _ak_reclaim_tick_fn g_ticks[4];                    /* registered ticks (under g_mu; never removed) */
static unsigned g_nticks;
static pthread_t g_thread;
static bool g_joinable;             /* g_thread ended or runs and is not joined yet (under g_ctl) */
static bool g_stop;                 /* under g_mu */
static _Atomic unsigned g_state;    /* ST_* */
static _Atomic int g_mode = -1;     /* ak_background; -1 until AK_BACKGROUND is read */
static _Atomic bool g_start_wanted; /* a wake found no thread in AUTO */
static _Atomic size_t g_passes, g_starts;
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
 * condition variables it may have waited on are made anew. A parent's ON
 * becomes AUTO: the child's thread starts when its memory waits. */
static void fork_child(void) {
  atomic_store(&g_state, 0);
  atomic_store(&g_start_wanted, false);
  g_stop = false;
  g_joinable = false;
  int expect = AK_BACKGROUND_ON;
  atomic_compare_exchange_strong(&g_mode, &expect, AK_BACKGROUND_AUTO);
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

/* AK_BACKGROUND, read once (no malloc: the first wake may come from inside
 * it): auto (or unset), 0 or 1. */
static void mode_init(void) {
  if (atomic_load_explicit(&g_mode, memory_order_acquire) >= 0) return;
  int mode = AK_BACKGROUND_AUTO;
  const char *v = getenv("AK_BACKGROUND");
  if (v && *v && strcmp(v, "auto") != 0) {
    if (strcmp(v, "0") == 0)
      mode = AK_BACKGROUND_OFF;
    else if (strcmp(v, "1") == 0)
      mode = AK_BACKGROUND_ON;
    else
      _ak_warn("AK_BACKGROUND=%s is not auto, 0 or 1; using auto", v);
  }
  int expect = -1;
  atomic_compare_exchange_strong(&g_mode, &expect, mode); /* a call that came first wins */
}

void _ak_reclaim_thread_signal(void) {
  pthread_once(&g_once, once_init);
  pthread_mutex_lock(&g_mu);
  if (atomic_load(&g_state) & ST_RUNNING) pthread_cond_signal(&g_wake);
  pthread_mutex_unlock(&g_mu);
}

/* Under g_mu: one pass over the registered sets and ticks (the thread's,
 * or ak_reclaim_collect's). Returns the ms until the next step falls due
 * (5 to 250), or -1 when nothing waits. */
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
  /* The ticks take their owners' locks: run with g_mu dropped (they are
   * never removed, so the array stays valid). */
  unsigned nticks = g_nticks;
  pthread_mutex_unlock(&g_mu);
  for (unsigned i = 0; i < nticks; i++) {
    uint64_t now = _ak_reclaim_now();
    uint64_t d = g_ticks[i](now);
    if (d != UINT64_MAX) {
      uint64_t wait = d > now ? d - now : 0;
      if (wait < next) next = wait;
    }
  }
  pthread_mutex_lock(&g_mu);
  atomic_fetch_add_explicit(&g_passes, 1, memory_order_relaxed);
  if (next == UINT64_MAX) return -1;
  return next < 5 ? 5 : next > 250 ? 250 : (long)next;
}

/* Under g_mu: waits on g_wake for `ms` or a signal. */
static void wait_ms(long ms) {
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

static void *thread_main(void *arg) {
  (void)arg;
  pthread_mutex_lock(&g_mu);
  long idle = 0; /* ms nothing has waited for (AUTO ends the thread after AK_IDLE_EXIT_MS) */
  while (!g_stop) {
    atomic_fetch_and(&g_state, ~(unsigned)ST_WORK);
    long ms = pass_locked();
    if (g_stop) break;
    if (ms >= 0 || atomic_load(&g_mode) != AK_BACKGROUND_AUTO) {
      idle = 0;
      wait_ms(ms >= 0 ? ms : 250);
      continue;
    }
    if (idle >= AK_IDLE_EXIT_MS) {
      unsigned alone = ST_RUNNING; /* no wake since this pass began: end */
      if (atomic_compare_exchange_strong(&g_state, &alone, 0)) {
        /* Nobody joins a thread that ends by itself: it detaches (under
         * g_mu, so a stop that comes now sees it gone and joins nothing). */
        g_joinable = false;
        pthread_mutex_unlock(&g_mu);
        pthread_detach(pthread_self());
        return NULL;
      }
      idle = 0;
      continue;
    }
    wait_ms(250);
    idle += 250;
  }
  pthread_mutex_unlock(&g_mu);
  return NULL;
}

/* Under g_ctl: starts the thread (`state` says it is not running). */
static int start_locked(const char *call) {
  pthread_mutex_lock(&g_mu);
  g_stop = false;
  atomic_fetch_or(&g_state, ST_RUNNING);
  g_joinable = true; /* before the thread can run: an idle end clears it */
  pthread_mutex_unlock(&g_mu);
  /* Signals are blocked in the thread: it must never run a handler. A
   * small stack: it calls only the library. */
  sigset_t old;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  (void)pthread_attr_setstacksize(&attr, 256 * 1024);
  _ak_signals_block_all(&old);
  int rc = pthread_create(&g_thread, &attr, thread_main, NULL);
  _ak_signals_restore(&old);
  pthread_attr_destroy(&attr);
  if (rc == 0) {
    atomic_fetch_add_explicit(&g_starts, 1, memory_order_relaxed);
  } else {
    pthread_mutex_lock(&g_mu);
    g_joinable = false;
    atomic_fetch_and(&g_state, ~(unsigned)ST_RUNNING);
    pthread_mutex_unlock(&g_mu);
    _ak_error(rc, "%s: pthread_create failed: %s", call, strerror(rc));
  }
  return rc;
}

/* Under g_ctl: stops a running thread and waits for it (one that is
 * ending by itself has detached: nothing to wait for). */
static void stop_locked(void) {
  pthread_mutex_lock(&g_mu);
  bool join = g_joinable;
  if (join) {
    g_stop = true;
    pthread_cond_signal(&g_wake);
  }
  pthread_mutex_unlock(&g_mu);
  if (join) pthread_join(g_thread, NULL);
  pthread_mutex_lock(&g_mu);
  g_joinable = false;
  atomic_store(&g_state, 0);
  g_stop = false;
  pthread_mutex_unlock(&g_mu);
}

int ak_reclaim_thread_start(void) {
  pthread_once(&g_once, once_init);
  mode_init();
  pthread_mutex_lock(&g_ctl);
  atomic_store(&g_mode, AK_BACKGROUND_ON);
  int rc = 0;
  if (!(atomic_load(&g_state) & ST_RUNNING)) rc = start_locked("ak_reclaim_thread_start");
  pthread_mutex_unlock(&g_ctl);
  return rc;
}

void ak_reclaim_thread_stop(void) { (void)ak_reclaim_set_background(AK_BACKGROUND_OFF); }

int ak_reclaim_set_background(ak_background mode) {
  if (mode != AK_BACKGROUND_AUTO && mode != AK_BACKGROUND_OFF && mode != AK_BACKGROUND_ON) {
    _ak_error(EINVAL, "ak_reclaim_set_background: %d is not an ak_background mode", (int)mode);
    return EINVAL;
  }
  if (mode == AK_BACKGROUND_ON) return ak_reclaim_thread_start();
  pthread_once(&g_once, once_init);
  mode_init();
  pthread_mutex_lock(&g_ctl);
  atomic_store(&g_mode, mode);
  if (mode == AK_BACKGROUND_OFF) {
    atomic_store(&g_start_wanted, false);
    stop_locked();
  }
  pthread_mutex_unlock(&g_ctl);
  if (mode == AK_BACKGROUND_AUTO) {
    _ak_reclaim_wake(); /* memory may be waiting already */
    _ak_reclaim_start_wanted();
  }
  return 0;
}

ak_background ak_reclaim_get_background(void) {
  mode_init();
  return (ak_background)atomic_load(&g_mode);
}

bool ak_reclaim_thread_running(void) { return (atomic_load(&g_state) & ST_RUNNING) != 0; }

size_t _ak_reclaim_thread_passes(void) { return atomic_load_explicit(&g_passes, memory_order_relaxed); }
size_t _ak_reclaim_thread_starts(void) { return atomic_load_explicit(&g_starts, memory_order_relaxed); }

void _ak_reclaim_wake(void) {
  unsigned s = atomic_load_explicit(&g_state, memory_order_relaxed);
  if ((s & (ST_RUNNING | ST_WORK)) == (ST_RUNNING | ST_WORK)) return; /* seen already */
  s = atomic_fetch_or(&g_state, ST_WORK);
  if (s & ST_RUNNING) return;
  mode_init();
  if (atomic_load_explicit(&g_mode, memory_order_relaxed) == AK_BACKGROUND_AUTO)
    atomic_store_explicit(&g_start_wanted, true, memory_order_relaxed);
}

void _ak_reclaim_start_wanted(void) {
  if (AK_LIKELY(!atomic_load_explicit(&g_start_wanted, memory_order_relaxed))) return;
  if (!atomic_exchange(&g_start_wanted, false)) return;
  pthread_once(&g_once, once_init);
  /* Only a try: g_ctl's holder is starting or stopping the thread, and
   * that may be this very thread. pthread_create takes the new thread's
   * TLS from malloc, which under the preload is this library; when another
   * thread's wake has asked again meanwhile, a slow path there lands here
   * (a lock would wait for itself). The wish stays for the next slow
   * path, which finds the thread running or starts it. */
  if (pthread_mutex_trylock(&g_ctl) != 0) {
    atomic_store_explicit(&g_start_wanted, true, memory_order_relaxed);
    return;
  }
  if (atomic_load(&g_mode) == AK_BACKGROUND_AUTO && !(atomic_load(&g_state) & ST_RUNNING) &&
      start_locked("arenakit: background thread") != 0) {
    /* It cannot be had (a sandbox, a thread limit): AUTO gives up, the
     * slow paths' ticks still return memory as the program calls. */
    atomic_store(&g_mode, AK_BACKGROUND_OFF);
  }
  pthread_mutex_unlock(&g_ctl);
}

void ak_reclaim_collect(void) {
  pthread_once(&g_once, once_init);
  pthread_mutex_lock(&g_mu);
  (void)pass_locked(); /* what one pass of the thread does */
  pthread_mutex_unlock(&g_mu);
}

void _ak_reclaim_register_tick(_ak_reclaim_tick_fn fn) {
  pthread_once(&g_once, once_init);
  pthread_mutex_lock(&g_mu);
  bool known = false;
  for (unsigned i = 0; i < g_nticks; i++) known = known || g_ticks[i] == fn;
  AK_ASSERT(known || g_nticks < sizeof g_ticks / sizeof g_ticks[0]); /* one per component */
  if (!known && g_nticks < sizeof g_ticks / sizeof g_ticks[0]) g_ticks[g_nticks++] = fn;
  pthread_mutex_unlock(&g_mu);
}

/* AK_BACKGROUND=1: the thread from the first registration on. */
static pthread_once_t g_env_once = PTHREAD_ONCE_INIT;
static void env_init(void) {
  mode_init();
  if (atomic_load(&g_mode) == AK_BACKGROUND_ON && !(atomic_load(&g_state) & ST_RUNNING))
    (void)ak_reclaim_thread_start();
}

/* ---- the registry of sets ---------------------------------------------------------- */

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
