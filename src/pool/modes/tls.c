/* SPDX-License-Identifier: MIT */
/* tls.c - the per-thread, per-pool state of the concurrent pool modes: a
 * heap per thread and pool for AK_SYNC_THREADS (modes/threads/), a
 * magazine per thread and pool for AK_SYNC_SPINLOCK and AK_SYNC_LOCKFREE
 * (modes/magazine/). What the modes share lives here:
 *
 *   - the registry of live pools (g_mu and a list of them): a pool is
 *     registered at create and unregistered at destroy;
 *   - each thread's table of (pool, id, state) entries, with the search,
 *     the insertion and its growth (entries of destroyed pools are pruned
 *     first);
 *   - the pthread key whose destructor walks the exiting thread's table and
 *     hands each state back to its pool.
 *
 * What a state is and how it is made, handed back and freed is the mode's
 * (its _ak_tls_mode hooks). The fast lookup is the mode's too: each mode
 * keeps a direct-mapped cache of its own in front of _ak_tls_get (THREADS:
 * the public _ak_pool_tcache that the inline paths read; magazines:
 * tl_cache), filled from what _ak_tls_get returns.
 *
 * Thread exit racing pool destroy: a pool's states are freed by destroy
 * (under g_mu, after the pool left the registry) or by the thread's exit
 * (under g_mu, only while the pool is registered), never both. An entry is
 * keyed by the pool's id as well as its address: ids are unique over the
 * process lifetime, so a destroyed pool whose address a new pool reuses is
 * never taken for the new one (registered()).
 *
 * Locks: g_mu (the registry, thread exit, destroy) is taken before a pool's
 * `mu` (its list of states), which comes before its spinlock. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "pool/modes.h"

/* Thread-local: the public direct-mapped cache of heaps (key = pool id:
 * ids are unique, so a destroyed pool whose address is reused never
 * matches), in front of the thread's table (this file). Initial-exec
 * TLS: the fast paths reach it with one %fs-relative access, no
 * __tls_get_addr call (the library is loaded at start-up, or dlopen'ed
 * into glibc's static TLS reserve). */
AK_API __thread _ak_pool_tentry _ak_pool_tcache[AK_POOL_TCACHE] __attribute__((tls_model("initial-exec")));

_Static_assert(sizeof(_ak_pool_tentry) == AK_POOL_TCACHE_STEP, "an entry's offset is its key masked");

/* pool/inside.h: how deep the thread is in the pool's code. */
_Thread_local unsigned _ak_pool_inside __attribute__((tls_model("initial-exec")));

void _ak_pool_tentry_store(uint64_t key, void *state) {
  _ak_pool_tentry *e = _ak_pool_tentry_of(key);
  e->key = 0;
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  e->state.mag = state;
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  e->key = key;
}

/* One entry of a thread's table: the state of `pool` (whose id was `id`
 * when the state was made) and the mode that made it (kept for thread
 * exit, where a destroyed pool can no longer be asked). */
typedef struct tl_entry {
  _ak_pool_impl *pool;
  uint64_t id;
  void *state;
  const _ak_tls_mode *mode;
} tl_entry;

#define TL static __attribute__((tls_model("initial-exec"))) _Thread_local
TL tl_entry *tl_all;
TL size_t tl_n, tl_cap;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static _ak_pool_impl *g_pools; /* live THREADS, SPINLOCK and LOCKFREE pools (under g_mu) */
static pthread_key_t g_key;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void thread_exit(void *arg);

/* Creates the pthread key whose destructor is thread_exit (once). */
static void make_key(void) { (void)pthread_key_create(&g_key, thread_exit); }

/* Under g_mu: is `p` a live pool whose id is `id`? (False for a destroyed
 * pool, even if a new pool took its address.) */
static bool registered(const _ak_pool_impl *p, uint64_t id) {
  for (_ak_pool_impl *q = g_pools; q; q = q->next_tls_pool)
    if (q == p && q->id == id) return true;
  return false;
}

/* Makes room for one more entry in the calling thread's table: drops the
 * entries of destroyed pools, and grows the table if that freed nothing.
 * False if out of memory. */
static bool table_room(void) {
  if (tl_n < tl_cap) return true;
  _ak_pool_lock(&g_mu);
  size_t k = 0;
  for (size_t i = 0; i < tl_n; i++)
    if (registered(tl_all[i].pool, tl_all[i].id)) tl_all[k++] = tl_all[i];
  tl_n = k;
  _ak_pool_unlock(&g_mu);
  AK_ASSERT(k <= tl_cap); /* only kept entries remain */
  if (tl_n < tl_cap) return true;
  size_t cap = tl_cap ? tl_cap * 2 : 8;
  tl_entry *a = realloc(tl_all, cap * sizeof *a);
  if (!a) return false;
  tl_all = a;
  tl_cap = cap;
  AK_ASSERT(tl_n < tl_cap); /* room for one more */
  return true;
}

void *_ak_tls_state_alloc(size_t size) {
  size = (size + 63) & ~(size_t)63;
  void *s = aligned_alloc(64, size);
  if (s) memset(s, 0, size);
  AK_ASSERT(((uintptr_t)s & 63) == 0); /* a line of its own: no false sharing with another state */
  return s;
}

void *_ak_tls_get(_ak_pool_impl *p, bool create) {
  for (size_t i = 0; i < tl_n; i++)
    if (tl_all[i].pool == p && tl_all[i].id == p->id) {
      AK_ASSERT(tl_all[i].mode == p->tls_mode); /* made by its pool's mode */
      return tl_all[i].state;
    }
  if (!create) return NULL;
  pthread_once(&g_once, make_key);
  if (!table_room()) return NULL;
  AK_ASSERT(p->tls_mode != NULL && tl_n < tl_cap); /* a registered pool, room for its entry */
  void *state = p->tls_mode->create(p);
  if (!state) return NULL;
  tl_all[tl_n++] = (tl_entry){p, p->id, state, p->tls_mode};
  (void)pthread_setspecific(g_key, (void *)1); /* so thread_exit runs */
  return state;
}

/* Empties the calling thread's entries of _ak_pool_tcache whose key is
 * `id` (a pool's _ak_pool_key; all of them if 0): each key cleared with one store, so
 * that a signal handler's inline path sees the entry whole or empty. A
 * loop of stores, not memset: GCC 12's UBSan check of a TLS array's
 * address passed to memset tests stale flags and reports a null pointer
 * at random. */
static void tcache_drop(uint64_t id) {
  for (size_t i = 0; i < AK_POOL_TCACHE; i++)
    if (id == 0 || _ak_pool_tcache[i].key == id) _ak_pool_tcache[i].key = 0; /* one store: never torn */
}

/* The pthread key's destructor: hands each state of the exiting thread
 * back to its pool (skipping destroyed pools, whose states destroy freed),
 * frees the table and empties the thread caches (_ak_pool_tcache and the
 * modes' own). A later use of a pool by this thread (another destructor)
 * starts a new table and sets the key again, so this runs again. */
static void thread_exit(void *arg) {
  (void)arg;
  _ak_pool_enter();
  tcache_drop(0); /* first: the inline paths must not reach a state the walk frees */
  _ak_pool_lock(&g_mu);
  for (size_t i = 0; i < tl_n; i++) {
    if (!registered(tl_all[i].pool, tl_all[i].id)) continue; /* destroyed: state already freed */
    tl_all[i].mode->thread_exit(tl_all[i].pool, tl_all[i].state);
  }
  _ak_pool_unlock(&g_mu);
  for (size_t i = 0; i < tl_n; i++) {
    size_t j = 0;
    while (j < i && tl_all[j].mode != tl_all[i].mode) j++;
    if (j == i && tl_all[i].mode->forget) tl_all[i].mode->forget(); /* once per mode */
  }
  free(tl_all);
  tl_all = NULL;
  tl_n = tl_cap = 0;
  _ak_pool_leave();
}

void _ak_tls_register(_ak_pool_impl *p, const _ak_tls_mode *mode) {
  pthread_once(&g_once, make_key);
  AK_ASSERT(mode != NULL && p->tls_mode == NULL && p->next_tls_pool == NULL); /* registered once */
  p->tls_mode = mode;
  _ak_pool_lock(&g_mu);
  p->next_tls_pool = g_pools;
  g_pools = p;
  _ak_pool_unlock(&g_mu);
}

void _ak_tls_fork_lock(void) { _ak_pool_lock(&g_mu); }

/* The child's only thread is the one that forked and took g_mu, so it
 * unlocks it there as in the parent (a default mutex has no owner check). */
void _ak_tls_fork_unlock(void) { _ak_pool_unlock(&g_mu); }

void _ak_tls_unregister(_ak_pool_impl *p) {
  _ak_pool_lock(&g_mu);
  for (_ak_pool_impl **pp = &g_pools; *pp; pp = &(*pp)->next_tls_pool) {
    if (*pp == p) {
      *pp = p->next_tls_pool;
      break;
    }
  }
  AK_ASSERT(!registered(p, p->id)); /* it was listed once, and is no more */
  p->tls_mode->destroy(p);
  _ak_pool_unlock(&g_mu);
  tcache_drop(_ak_pool_key(p));
}
