/* SPDX-License-Identifier: MIT */
/* magazine.c - the per-thread front of AK_SYNC_SPINLOCK and
 * AK_SYNC_LOCKFREE: a magazine of free objects per thread and pool, in
 * front of the pool's shared structure (the serial core under the
 * spinlock, or the lock-free stack of batches).
 *
 * Why: with one shared word touched on every call, two threads on two
 * cores move its cache line between the cores on every allocation and
 * free. A magazine takes and gives objects a batch (p->mag.batch, by
 * object size: _ak_mag_batch_for) at a time, so the shared word (the
 * lock, the stack head, the counters) is touched once per batch.
 *
 * A magazine holds `list` (at most a batch of objects, chained through
 * their first word), `full` (NULL or exactly a batch of objects) and a
 * stash of whole batches (stash.c). Alloc pops `list`, then swaps in
 * `full`, then takes a batch (_ak_stash_take: its own stash, the shared
 * structure, another thread's stash). Free pushes `list`; when it is full
 * it becomes `full` and the previous `full` goes to the stash
 * (_ak_stash_keep). So the objects a thread freed go back to that thread
 * first.
 *
 * Other threads may take a magazine's contents at any time
 * (_ak_mag_flush_all, from ak_pool_trim). The owner marks its work on the
 * chain: it sets `busy` (found set: a signal handler interrupted its own
 * mark, owner_interrupted), tests `taken` (set: it clears `busy`, and the
 * slow path waits the taker out), works on `list` and `n` with plain
 * moves and clears `busy` (release). A taker sets `taken` on every
 * magazine of the pool, issues one membarrier(2)
 * (MEMBARRIER_CMD_PRIVATE_EXPEDITED: a full barrier on every CPU running
 * a thread of the process), waits until `busy` is 0 and takes the chain.
 * After the barrier an owner either was marked (the taker sees the mark
 * and waits) or sees `taken` (and keeps off), so exactly one of them works
 * on a chain and nobody reads a slot it does not hold. The owner pays a
 * compiler barrier instead of a fence or an atomic read-modify-write: the
 * cost falls on the rare taker. Without membarrier(2) (an old kernel, a
 * seccomp filter: barrier_setup) the owners fence their marks themselves
 * (`fenced`, library paths only: the inline paths stay off).
 *
 * Counting: each magazine's allocations minus frees not yet in the pool's
 * `mag.live` (net) are added to it by a refill or spill that finds them
 * AK_MAG_SETTLE batches or more off, and by a drain; the high-water mark
 * is sampled there. The fast paths count nothing: an allocation pops one
 * object and a free pushes one, so net + n (`base`) changes only on slow
 * paths, and net is base - n. The counts and their reader are count.c's.
 * With max_objects every call updates `mag.live` instead, exactly, and
 * the cap is enforced.
 *
 * The fast paths are the mark, a pop or push, and one compare each
 * (alloc: the chain is not empty; free: n is below `hi`, which folds the
 * spill, the last-free check and the counted modes into one bound); every
 * other case is a tail call to the slow path (alloc_slow, free_slow), so
 * that the fast paths set up no frame. With plain links they are written
 * once, in the headers (_ak_pool_mag_pop, _ak_pool_mag_push in
 * arenakit/detail/pool.h): ak_pool_alloc and ak_pool_free run them inline
 * on the magazine they find in the thread cache (_ak_pool_tcache, under
 * the pool's `mkey`; mag_find puts it there), with no call, and the library
 * runs them when the inline paths are off or missed.
 *
 * Thread exit (a pthread key destructor) hands a thread's magazines back.
 * The thread's table of magazines, the registry of live pools, the key and
 * the thread-exit walk are the shared component modes/tls.c; this file
 * gives it its hooks (_ak_mag_tls: magazine creation, mag_empty at thread
 * exit, freeing at destroy, cache reset) and keeps its own direct-mapped
 * caches in front of it (tl_last, tl_cache: mag_is_last, mag_find).
 * Locks: modes/tls.c's g_mu (registry) before a pool's `mu` before its
 * spinlock. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/track.h"
#include "os/os_mem.h"
#include "pool/modes/magazine/count.h"
#include "pool/modes/magazine/magazine.h"

/* Thread-local: a direct-mapped cache of the thread's magazines, in front
 * of its table in modes/tls.c, by pool id, and in front of it the entry of
 * the pool the thread used last (tl_last: one compare on a fast path).
 * Ids are unique over the process lifetime and never 0, so an empty entry
 * or one of a destroyed pool whose address is reused never matches. */
typedef struct tl_entry {
  uint64_t id;
  _ak_pool_mag *m;
} tl_entry;

#define TL static __attribute__((tls_model("initial-exec"))) _Thread_local
TL tl_entry tl_last;
TL tl_entry tl_cache[8];

/* ---- the owner and a taker ----------------------------------------------------------- */

/* Whether the owners fence their `busy` mark themselves: only in a process
 * where membarrier(2) with MEMBARRIER_CMD_PRIVATE_EXPEDITED is not
 * available (an old kernel, a seccomp filter, an emulator that does not
 * pass it on). Set once, before the first magazine exists. */
static bool g_fenced;
static pthread_once_t g_barrier_once = PTHREAD_ONCE_INIT;

static void barrier_setup(void) { g_fenced = !_ak_os_barrier_register(); }

/* A taker, after setting `taken`: every owner's `busy` mark stored before
 * this is visible afterwards, and every owner's load of `taken` after it
 * sees the flag (a full barrier on each CPU running one of the process's
 * threads; the owners then need no fence of their own). */
static void owners_barrier(void) {
  if (g_fenced) {
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    return;
  }
  if (_ak_os_barrier() == 0) return;
  _ak_fatal("ak_pool_trim: membarrier(2) failed after it was registered (%s)", strerror(errno));
}

/* Whether `busy` is set where the owner is not at work: only the owner
 * sets it, so a signal handler interrupted the owner inside its own mark
 * (an inline path: the library's marks lie inside _ak_pool_inside, which
 * ak_pool_alloc_slow and ak_pool_free_slow test first), and the call must
 * leave the magazine alone (_ak_pool_nested_alloc). */
static inline bool owner_interrupted(_ak_pool_mag *m) {
  return __atomic_load_n(&m->head.busy, __ATOMIC_RELAXED);
}

/* The owner enters its work on `m`, waiting out a taker (slow paths). A
 * mark of its own would never be cleared: the callers test for it first
 * (owner_interrupted), and one that did not would hang here. */
static void owner_enter(_ak_pool_mag *m) {
  if (AK_UNLIKELY(owner_interrupted(m)))
    _ak_fatal("ak_pool: pool '%s': a call nested in the same thread's call reached its magazine",
              m->pool->name);
  while (!_ak_pool_mag_enter(&m->head, g_fenced)) sched_yield();
}

/* Owner: takes the chain (NULL if empty or taken). */
static inline void *list_take(_ak_pool_mag *m) {
  owner_enter(m);
  void *c = __atomic_load_n(&m->head.list, __ATOMIC_RELAXED);
  __atomic_store_n(&m->head.list, NULL, __ATOMIC_RELAXED);
  _ak_pool_mag_leave(&m->head);
  return c;
}
/* The owner stores the chain it holds (back). */
static inline void list_put(_ak_pool_mag *m, void *c) {
  AK_ASSERT((c == NULL) == (_ak_mag_n(m) == 0)); /* `n` is the chain's length */
  owner_enter(m);
  __atomic_store_n(&m->head.list, c, __ATOMIC_RELAXED);
  _ak_pool_mag_leave(&m->head);
}

/* A taker (another thread, under p->mu) announces itself on `m`; after
 * owners_barrier, steal_chain waits out an owner at work and takes the
 * chain. */
static void steal_begin(_ak_pool_mag *m) {
  AK_ASSERT(__atomic_load_n(&m->head.taken, __ATOMIC_RELAXED) == 0); /* one taker at a time (p->mu) */
  __atomic_store_n(&m->head.taken, 1, __ATOMIC_RELAXED);
}
static void *steal_chain(_ak_pool_mag *m) {
  while (__atomic_load_n(&m->head.busy, __ATOMIC_ACQUIRE)) sched_yield();
  AK_ASSERT(__atomic_load_n(&m->head.taken, __ATOMIC_RELAXED) == 1); /* announced by steal_begin */
  void *c = __atomic_load_n(&m->head.list, __ATOMIC_RELAXED);
  __atomic_store_n(&m->head.list, NULL, __ATOMIC_RELAXED);
  __atomic_store_n(&m->head.taken, 0, __ATOMIC_RELEASE);
  return c;
}
/* Owner, at the end of every slow path: the length at which a free must
 * take the slow path (see `hi`). A free that leaves n objects on `list`
 * may have freed the pool's last live object (drain_self) only if net =
 * base - n <= 0 and live_seen + net <= 0, that is n >= base +
 * max(live_seen, 0); and only after two takes. */
static void set_hi(_ak_pool_mag *m) {
  intptr_t hi = m->pool->mag.batch;
  if (m->counted) {
    hi = 0;
  } else if (m->takes >= 2) {
    intptr_t seen = (intptr_t)m->live_seen;
    intptr_t drain = _ak_mag_base(m) + (seen > 0 ? seen : 0) - 1; /* n before the push */
    if (drain < hi) hi = drain < 0 ? 0 : drain;
  }
  AK_ASSERT(hi >= 0 && hi <= (intptr_t)m->pool->mag.batch && (!m->counted || hi == 0));
  m->head.hi = (uint32_t)hi;
}

/* ---- finding the calling thread's magazine --------------------------------------- */

/* Whether `p` is the pool the calling thread used last: its magazine is
 * then tl_last.m (not NULL). Otherwise mag_find. */
static inline bool mag_is_last(const _ak_pool_impl *p) { return AK_LIKELY(tl_last.id == p->id); }

/* The calling thread's magazine of `p` from the cache or the thread's
 * table, made if it has none (NULL if out of memory); it becomes tl_last,
 * and the inline paths' entry in _ak_pool_tcache when they are on. */
static _ak_pool_mag *mag_find(_ak_pool_impl *p) {
  tl_entry *e = &tl_cache[p->id & 7];
  if (e->id != p->id) {
    _ak_pool_mag *m = _ak_tls_get(p, true);
    if (!m) return NULL;
    *e = (tl_entry){p->id, m};
  }
  tl_last = *e;
  AK_ASSERT(e->m->pool == p); /* the cache names the pool's own magazine */
  if (p->pub.mkey) _ak_pool_tentry_store(_ak_pool_key(p), &e->m->head);
  return e->m;
}

/* Whether every call on `p` must be counted (max_objects: the exact count
 * and the cap; checked or tracked builds: the hooks): then every call takes
 * the slow path. */
static bool mag_counted(const _ak_pool_impl *p) { return p->max_objects || p->debug; }

/* _ak_tls_mode.create: a new magazine of the calling thread for `p`, on a
 * cache line of its own, on the pool's magazine list (NULL if out of
 * memory). */
static void *mag_create(_ak_pool_impl *p) {
  _ak_pool_mag *m = _ak_tls_state_alloc(sizeof *m);
  if (!m) return NULL;
  AK_ASSERT(m->head.list == NULL && m->head.n == 0 && atomic_load(&m->base) == 0); /* holds nothing */
  m->pool = p;
  m->counted = mag_counted(p);
  _ak_stash_init(p, m);
  set_hi(m);
  _ak_pool_lock(&p->mu);
  _ak_dlist_push_front(&p->mag.list, &m->node);
  _ak_pool_unlock(&p->mu);
  return m;
}

/* Under p->mu: takes `m` off the pool's magazine list. */
static void mag_unlink(_ak_pool_impl *p, _ak_pool_mag *m) { _ak_dlist_remove(&p->mag.list, &m->node); }

/* The owner gives back what `m` holds: its two chains, and its stash
 * when `stash` (the chain's length is stale if a taker took it: then
 * it is NULL and nothing is subtracted for it). */
static void mag_empty(_ak_pool_impl *p, _ak_pool_mag *m, bool stash) {
  void *f = atomic_exchange_explicit(&m->full, NULL, memory_order_acquire);
  if (f) {
    _ak_mag_shared_give(p, f, m->full_n);
    _ak_mag_owed_sub(m, m->full_n);
  }
  uint32_t n = _ak_mag_n(m);
  void *c = list_take(m);
  if (c) {
    _ak_mag_shared_give(p, c, 0);
    _ak_mag_owed_sub(m, n);
  }
  if (stash) _ak_mag_owed_sub(m, _ak_stash_give_all(p, m));
}

/* _ak_tls_mode.thread_exit (under g_mu): the exiting thread's magazine of
 * `p` leaves the pool's list, its count goes to the pool's, its contents
 * go back to the shared structure, and it is freed. */
static void mag_exit(_ak_pool_impl *p, void *state) {
  _ak_pool_mag *m = state;
  AK_ASSERT(m->pool == p); /* the thread's table pairs each state with its pool */
  _ak_pool_lock(&p->mu);
  mag_unlink(p, m);
  atomic_fetch_add(&p->mag.live, (size_t)_ak_mag_net(m));
  _ak_pool_unlock(&p->mu);
  mag_empty(p, m, true);
  AK_ASSERT(!_ak_dnode_linked(&m->node) && atomic_load(&m->full) == NULL &&
            _ak_batch_top(atomic_load(&m->stash)) == NULL); /* off the list, emptied */
  bool stashes = m->stashes;
  free(m);
  if (stashes && _ak_mag_live(p) == 0) _ak_stash_flush_all(p);
  if (p->mode->thread_left) p->mode->thread_left(p);
}

/* _ak_tls_mode.forget: the exiting thread's caches of magazines are
 * emptied (modes/tls.c empties the inline paths' _ak_pool_tcache). */
static void mag_forget(void) {
  memset(tl_cache, 0, sizeof tl_cache);
  memset(&tl_last, 0, sizeof tl_last);
}

/* _ak_tls_mode.destroy (under g_mu, `p` unregistered): every magazine of
 * `p` is freed (their objects die with the slabs), and `p` leaves the
 * calling thread's cache. */
static void mags_destroy(_ak_pool_impl *p) {
  _ak_pool_lock(&p->mu);
  for (_ak_pool_mag *m; (m = _ak_mag_first(p)) != NULL;) {
    AK_ASSERT(m->pool == p); /* the pool's list holds its own magazines */
    mag_unlink(p, m);
    free(m);
  }
  AK_ASSERT(p->mag.list.n == 0 && p->mag.list.head == NULL); /* no magazine outlives its pool */
  _ak_pool_unlock(&p->mu);
  for (size_t i = 0; i < 8; i++)
    if (tl_cache[i].id == p->id) memset(&tl_cache[i], 0, sizeof tl_cache[i]);
  if (tl_last.id == p->id) memset(&tl_last, 0, sizeof tl_last);
}

const _ak_tls_mode _ak_mag_tls = {
    .create = mag_create, .thread_exit = mag_exit, .destroy = mags_destroy, .forget = mag_forget};

/* _ak_pool_mode.tick (ak_pool_stats_get, the reclaim thread's pass): a
 * drain that deferred the stashes (_ak_stash_drain_now) is done once due,
 * if the pool is still empty (a pool in use drains again when it next
 * empties). */
uint64_t _ak_mag_tick(_ak_pool_impl *p) {
  uint64_t at = UINT64_MAX;
  if (_ak_stash_drain_due(p, &at) && _ak_mag_live(p) == 0) _ak_stash_flush_all(p);
  return at;
}

/* Takes every magazine's contents (ak_pool_trim, any thread): one
 * barrier for all of them. */
void _ak_mag_flush_all(_ak_pool_impl *p) {
  _ak_pool_lock(&p->mu);
  for (_ak_pool_mag *m = _ak_mag_first(p); m; m = _ak_mag_next(m)) steal_begin(m);
  owners_barrier();
  for (_ak_pool_mag *m = _ak_mag_first(p); m; m = _ak_mag_next(m)) {
    _ak_mag_shared_give(p, atomic_exchange_explicit(&m->full, NULL, memory_order_acquire), 0);
    _ak_mag_shared_give(p, steal_chain(m), 0);
    (void)_ak_stash_give_all(p, m);
  }
  _ak_pool_unlock(&p->mu);
}

/* fork() child: the threads that owned the other magazines are gone, and
 * one may have been at work on its magazine: nobody is now. A count left
 * odd (a change under way at the fork) is closed, else every stats read
 * would wait it out to the end of its tries. */
void _ak_mag_fork_child(_ak_pool_impl *p) {
  _ak_pool_lock(&p->mu);
  for (_ak_pool_mag *m = _ak_mag_first(p); m; m = _ak_mag_next(m)) {
    __atomic_store_n(&m->head.busy, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&m->head.taken, 0, __ATOMIC_RELAXED);
    unsigned seq = atomic_load_explicit(&m->seq, memory_order_relaxed);
    if (seq & 1) atomic_store_explicit(&m->seq, seq + 1, memory_order_relaxed);
  }
  _ak_pool_unlock(&p->mu);
}

/* ---- alloc and free --------------------------------------------------------------- */

/* The fast paths work on the chain inside the owner's mark (or, in the
 * hardened build, take it and store it back): `list` non-NULL holds
 * _ak_mag_n(m) >= 1 free slots of the pool, held by nobody else. Everything
 * else (an empty or stolen chain, a spill, the drain check, a counted
 * magazine) is the slow path, which keeps `base`, `hi` and the counts.
 * With plain links the fast paths are the headers' _ak_pool_mag_pop and
 * _ak_pool_mag_push (arenakit/detail/pool.h), which the inline paths of
 * ak_pool_alloc and ak_pool_free run before any call; the hardened build
 * (links encoded) has its own below, which check the links. */

static _Noreturn AK_COLD void corrupt(_ak_pool_impl *p, void *o, void *next) {
  _ak_slab_corrupt(_ak_slab_of(o, p->slab_size), o, next, "ak_pool_alloc");
}

/* The owner found `list` NULL: empty, or a thief took it (n is then
 * stale). Either way it holds nothing now; net is unchanged. */
static void claim_lost(_ak_pool_mag *m) { _ak_mag_n_move(m, 0); }

/* Pops the first slot of chain `o` (n objects, claimed) and stores the
 * rest back. */
static inline void *chain_pop(_ak_pool_impl *p, _ak_pool_mag *m, void *o, uint32_t n) {
  void *next = _ak_chain_next(p, o);
  if (ak_harden_links && AK_UNLIKELY(!_ak_pool_plausible(p, (uintptr_t)next))) corrupt(p, o, next);
  AK_ASSERT(n > 0 && n <= p->mag.batch); /* `list` holds at most one batch */
  _ak_mag_n_set(m, n - 1);
  list_put(m, next);
  /* The next allocation reads `next` and its caller writes it: fetch its
   * line now (it may sit in another core's cache), overlapping the miss
   * with the caller's work on `o`. */
  __builtin_prefetch(next, 1, 3);
  /* No stale link in a handed-out slot: freeing it untouched must not look
   * like a double free. */
  if (ak_harden_double_free && !p->tracked) _ak_link_set(o, NULL, 0);
  return o;
}

/* `list` is empty (n 0): the full batch, else a batch from the shared
 * structure. Returns the chain (NULL: out of memory), its length in n. */
static void *refill(_ak_pool_impl *p, _ak_pool_mag *m) {
  void *c = atomic_exchange_explicit(&m->full, NULL, memory_order_acquire);
  uint32_t n = m->full_n;
  if (!c) {
    _ak_mag_net_settle(p, m);
    n = _ak_stash_take(p, m, &c);
    if (m->takes < 2) m->takes++;
  }
  if (c) _ak_mag_n_move(m, n);
  AK_ASSERT(!c || (n > 0 && n <= p->mag.batch)); /* a chain of at most one batch */
  return c;
}

/* The tests' seam (modes.h); NULL otherwise. */
void (*_ak_mag_test_point)(void);

static inline void test_point(void) {
  if (AK_UNLIKELY(_ak_mag_test_point != NULL)) _ak_mag_test_point();
}

/* The slow allocation: `o` is the chain the caller claimed (NULL: none). */
static AK_COLD __attribute__((noinline)) void *alloc_slow(_ak_pool_impl *p, _ak_pool_mag *m, void *o) {
  test_point();
  if (!o) claim_lost(m);
  /* The cap needs an exact count: one shared atomic per call, only then. */
  if (p->max_objects) {
    size_t live = atomic_fetch_add_explicit(&p->mag.live, 1, memory_order_relaxed) + 1;
    if (AK_UNLIKELY(live > p->max_objects)) {
      atomic_fetch_sub_explicit(&p->mag.live, 1, memory_order_relaxed);
      if (o) list_put(m, o);
      _ak_pool_error(p, ENOMEM, "ak_pool_alloc", "max_objects live objects already");
      return NULL;
    }
    _ak_mag_peak_raise(p, live);
  }
  if (!o && !(o = refill(p, m))) {
    if (p->max_objects) atomic_fetch_sub_explicit(&p->mag.live, 1, memory_order_relaxed);
    set_hi(m);
    return NULL;
  }
  if (p->max_objects) { /* counted in mag.live: net stays 0 */
    _ak_mag_count_begin(m);
    chain_pop(p, m, o, _ak_mag_n(m));
    _ak_mag_base_set(m, (intptr_t)_ak_mag_n(m));
    _ak_mag_count_end(m);
  } else {
    chain_pop(p, m, o, _ak_mag_n(m));
  }
  if (AK_UNLIKELY(p->debug)) {
    _ak_pool_mark_live(p, _ak_slab_of(o, p->slab_size), o);
    _ak_pool_track_alloc(p, o);
  }
  set_hi(m);
  return o;
}

/* The fast pop found nothing: the chain is empty or being taken (the
 * slow path), or the owner was interrupted inside its mark (nested). */
static AK_COLD __attribute__((noinline)) void *alloc_miss(_ak_pool_impl *p, _ak_pool_mag *m) {
  if (AK_UNLIKELY(owner_interrupted(m))) return _ak_pool_nested_alloc(p);
  return alloc_slow(p, m, list_take(m));
}

/* The allocation from magazine `m` of the calling thread. Invariant: a
 * counted magazine's pool allocates through alloc_counted, never here. */
static inline void *alloc_in(_ak_pool_impl *p, _ak_pool_mag *m) {
  AK_ASSERT(!m->counted);
  if (!ak_harden_encode) { /* plain links: the headers' pop (their inline path's) */
    void *o = _ak_pool_mag_pop(&m->head, g_fenced);
    return AK_LIKELY(o != NULL) ? o : alloc_miss(p, m);
  }
  void *o = list_take(m);
  if (AK_UNLIKELY(o == NULL)) return alloc_slow(p, m, o);
  /* net + 1 and n - 1: base unchanged. */
  return chain_pop(p, m, o, _ak_mag_n(m));
}

/* The calling thread's magazine of `p` (NULL and an error if there is no
 * memory for one). */
static _ak_pool_mag *mag_or_error(_ak_pool_impl *p) {
  _ak_pool_mag *m = mag_find(p);
  if (AK_UNLIKELY(!m)) _ak_pool_error(p, ENOMEM, "ak_pool_alloc", "out of memory for the thread's magazine");
  return m;
}

/* _ak_mag_alloc when `p` is not the pool the thread used last. */
static __attribute__((noinline)) void *alloc_find(_ak_pool_impl *p) {
  _ak_pool_mag *m = mag_or_error(p);
  return m ? alloc_in(p, m) : NULL;
}

/* Every slow path is a tail call, so that the fast path saves no
 * register and sets up no frame. */
void *_ak_mag_alloc(_ak_pool_impl *p) {
  if (AK_UNLIKELY(!mag_is_last(p))) return alloc_find(p);
  return alloc_in(p, tl_last.m);
}

/* p->alloc of a pool whose every call is counted: always the slow path. */
static void *alloc_counted(_ak_pool_impl *p) {
  _ak_pool_mag *m = mag_is_last(p) ? tl_last.m : mag_or_error(p);
  if (!m) return NULL;
  AK_ASSERT(m->counted); /* a pool counts every call or none */
  return alloc_slow(p, m, list_take(m));
}

/* The inline paths (arenakit/detail/pool.h: _ak_pool_mag_alloc and
 * _ak_pool_mag_free, the fast paths below written in the headers) are on
 * unless every call is counted, the links are encoded (the library's pops
 * and frees check them), or the caller's headers do not match. */
void _ak_mag_init(_ak_pool_impl *p) {
  pthread_once(&g_barrier_once, barrier_setup);
  p->mag.batch = _ak_mag_batch_for(p->slot);
  _ak_pool_inline_off(p);
  if (mag_counted(p)) p->alloc = alloc_counted;
  AK_ASSERT(p->pub.cur.hot_slab == 1 && p->pub.tkey == 0); /* the heap inline paths stay off */
  if (p->inline_ok && !mag_counted(p) && !ak_harden_encode && !_ak_config_checked && !p->tracked &&
      !g_fenced) {
    p->pub.mkey = _ak_pool_key(p);
    p->pub.mag_mask = _ak_slab_mask(p->slab_size);
  }
}

/* True if `o` is on the chain `c` (which the caller holds). */
static bool chain_has(_ak_pool_impl *p, void *c, const void *o) {
  for (size_t limit = 2 * AK_MAG_BATCH + 1; c && limit--; c = _ak_chain_next(p, c))
    if (c == o) return true;
  return false;
}

/* Hardened double-free search: the caller's chain `c`, its full batch, and
 * the shared structure (LOCKFREE: the stack; SPINLOCK: the slab's lists).
 * Only when the first word of `o` decodes like a link (hardened_looks_free),
 * so a live object costs one load and a compare, inline. Not searched:
 * other threads' magazines (a double free whose two frees sit in two
 * threads' magazines at once is not caught; docs/hardening.md). */
static inline bool hardened_looks_free(const _ak_pool_impl *p, const void *o) {
  return _ak_pool_plausible(p, (uintptr_t)_ak_chain_next(p, o));
}

static AK_COLD bool hardened_is_free(_ak_pool_impl *p, _ak_pool_mag *m, _ak_slab *s, void *c, void *o) {
  if (chain_has(p, c, o)) return true;
  void *f = atomic_exchange_explicit(&m->full, NULL, memory_order_acquire);
  bool found = chain_has(p, f, o);
  if (f) atomic_store_explicit(&m->full, f, memory_order_release);
  return found || p->mode->on_lists(p, s, o);
}

/* `list` (`c`, n objects) is done: it becomes the full batch and the
 * previous full batch goes back to the shared structure. */
static void spill(_ak_pool_impl *p, _ak_pool_mag *m, void *c, uint32_t n) {
  AK_ASSERT(c != NULL && n == p->mag.batch); /* only a whole batch is spilled */
  _ak_mag_net_settle(p, m);
  uint32_t old_n = m->full_n;
  m->full_n = n;
  _ak_mag_n_move(m, 0);
  _ak_stash_keep(p, m, atomic_exchange_explicit(&m->full, c, memory_order_acq_rel), old_n);
}

/* The calling thread freed what looked like the pool's last live object:
 * its magazine goes back too, with its stash, so that empty slabs are
 * released (SPINLOCK) and memory returns to near zero when everything is
 * freed; within the release delay of the last such drain (_ak_stash_drain_now) the
 * chains join the stash instead, and the deferred drain gives it all back
 * once due. Only after the thread took at least two batches since its
 * last drain: a loop that allocates and frees one object at a time empties
 * the pool on every free, and must not give back and take again a batch
 * each time. */
static void drain_self(_ak_pool_impl *p, _ak_pool_mag *m) {
  m->takes = 0;
  _ak_mag_net_flush(p, m);
  if (_ak_stash_drain_now(p)) {
    mag_empty(p, m, true);
  } else { /* deferred: both chains wait in the stash with the rest */
    _ak_stash_keep(p, m, atomic_exchange_explicit(&m->full, NULL, memory_order_acquire), m->full_n);
    uint32_t n = _ak_mag_n(m);
    void *c = list_take(m);
    if (c) _ak_stash_keep(p, m, c, n);
  }
  claim_lost(m);
  AK_ASSERT(_ak_mag_n(m) == 0 && atomic_load(&m->full) == NULL); /* both chains went back */
}

/* The slow free of `o` (slab `s`): `c` is the chain the caller claimed
 * (NULL: none). */
static AK_COLD __attribute__((noinline)) void free_slow(_ak_pool_impl *p, _ak_pool_mag *m, _ak_slab *s,
                                                        void *o, void *c) {
  test_point();
  if (AK_UNLIKELY(p->debug)) {
    _ak_pool_mark_free(p, s, o, "ak_pool_free");
    _ak_pool_track_free(p, o);
  }
  if (AK_UNLIKELY(o == c)) _ak_pool_double_free(p, o);
  if (!c) claim_lost(m);
  uint32_t n = _ak_mag_n(m);
  if (n == p->mag.batch) { /* a whole batch: spill it */
    spill(p, m, c, n);
    c = NULL;
    n = 0;
  }
  _ak_chain_set(p, o, c);
  AK_ASSERT(n < p->mag.batch);                /* a full batch was spilled above */
  if (p->max_objects) _ak_mag_count_begin(m); /* counted in mag.live: net stays 0 */
  _ak_mag_n_set(m, n + 1);
  list_put(m, o);
  if (p->max_objects) {
    _ak_mag_base_set(m, (intptr_t)(n + 1));
    _ak_mag_count_end(m);
    if (AK_UNLIKELY(atomic_fetch_sub_explicit(&p->mag.live, 1, memory_order_relaxed) == 1) && m->takes >= 2)
      drain_self(p, m);
  } else {
    /* Everything freed? Judged from the pool's count as this thread last
     * saw it (no shared read on the fast path: set_hi), then confirmed:
     * exact when one thread uses the pool, a heuristic otherwise (trim and
     * thread exit are exact). */
    intptr_t net = _ak_mag_net(m);
    if (net <= 0 && (intptr_t)m->live_seen + net <= 0 && m->takes >= 2 &&
        (intptr_t)atomic_load_explicit(&p->mag.live, memory_order_relaxed) + net <= 0)
      drain_self(p, m);
  }
  set_hi(m);
}

/* The fast push did not take `o`: the slow path, or nested (alloc_miss). */
static AK_COLD __attribute__((noinline)) void free_miss(_ak_pool_impl *p, _ak_pool_mag *m, _ak_slab *s,
                                                        void *o) {
  if (AK_UNLIKELY(owner_interrupted(m))) {
    _ak_pool_nested_free(p, o);
    return;
  }
  free_slow(p, m, s, o, list_take(m));
}

/* The free of `o` (slot of `s`) into magazine `m` of the calling thread. */
static inline void free_in(_ak_pool_impl *p, _ak_pool_mag *m, _ak_slab *s, void *o) {
  if (!ak_harden_encode) { /* plain links: the headers' push (their inline path's) */
    if (AK_UNLIKELY(!_ak_pool_mag_push(&m->head, o, g_fenced))) free_miss(p, m, s, o);
    return;
  }
  void *c = list_take(m);
  uint32_t n = _ak_mag_n(m);
  if (ak_harden_double_free && AK_UNLIKELY(hardened_looks_free(p, o)) && hardened_is_free(p, m, s, c, o))
    _ak_pool_double_free(p, o);
  /* Fast path: a chain to push on, not the head of it (a double free in a
   * row), below `hi` (no spill, no drain check, not counted). net - 1 and
   * n + 1: base unchanged. */
  if (AK_UNLIKELY(c == NULL || o == c || n >= m->head.hi)) {
    free_slow(p, m, s, o, c);
    return;
  }
  AK_ASSERT(n < p->mag.batch); /* below `hi`, which is at most a batch */
  _ak_chain_set(p, o, c);
  _ak_mag_n_set(m, n + 1);
  list_put(m, o);
}

/* _ak_mag_free when the quick ownership check fails (the report) or `p` is
 * not the pool the thread used last. */
static __attribute__((noinline)) void free_find(_ak_pool_impl *p, void *o) {
  _ak_slab *s = _ak_pool_slab_find(p, o, "ak_pool_free"); /* aborts on a foreign `o` */
  _ak_pool_mag *m = mag_find(p);
  if (AK_UNLIKELY(!m)) { /* no memory for a magazine: straight to the shared structure */
    _ak_chain_set(p, o, NULL);
    _ak_mag_shared_give(p, o, 1);
    return;
  }
  free_in(p, m, s, o);
}

void _ak_mag_free(_ak_pool_impl *p, void *o) {
  /* A cheap ownership check (_ak_pool_slab_find's; free_find reports). */
  _ak_slab *s = _ak_slab_of(o, p->slab_size);
  if (AK_UNLIKELY(!_ak_pool_slab_ok(p, o, s) || !mag_is_last(p))) {
    free_find(p, o);
    return;
  }
  free_in(p, tl_last.m, s, o);
}

void _ak_mag_counts(_ak_pool_impl *p, size_t *live, size_t *peak) {
  /* Counted by the magazines (objects they cache are not live). */
  *live = _ak_mag_live(p);
  *peak = _ak_mag_peak(p);
}
