/* pool_threads.c - AK_SYNC_THREADS: thread-owned slabs with local and
 * remote free lists (the mimalloc design, per pool).
 *
 * Each thread that uses a pool gets a heap: the slabs it allocates from.
 * The owner pops and pushes the local free list of its slabs without any
 * atomic operation; another thread frees by pushing onto the slab's remote
 * list (one CAS); the owner collects remote lists (one exchange) when its
 * local lists run dry. When a thread exits, its heaps are abandoned: empty
 * slabs go back, the others wait on the pool's `abandoned` list, where any
 * thread that needs a slab adopts them (and a free into an abandoned slab
 * is done under the pool mutex).
 *
 * Call tree:
 *   _ak_threads_alloc: heap_get (thread-local cache) -> pop current slab
 *     -> refill: collect remote lists, then full slabs with remote frees,
 *        then adopt an abandoned slab, then a spare or new slab (mutex)
 *   _ak_threads_free: slab by mask -> owner? push local : remote_free
 *
 * Locks: g_mu (the registry of THREADS pools, thread exit, destroy) is
 * taken before a pool's `mu` (slab get/put, abandoned list, heap list). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/track.h"
#include "pool/pool_internal.h"

struct _ak_pool_heap {
  _ak_pool_impl *pool;
  _ak_slab_list avail;          /* owner only: slabs with free slots, fullest first */
  _ak_slab_list full;           /* owner only: slabs without local free slots */
  _Atomic size_t allocs, frees; /* written by the owner, read by stats */
  atomic_int trim_req;          /* another thread asked for a trim */
  _ak_pool_heap *prev, *next;   /* the pool's heap list (under mu) */
};

/* Thread-local: a direct-mapped cache and the list of this thread's heaps.
 * Entries are (pool, id): ids are unique, so a destroyed pool whose address
 * is reused never matches. */
typedef struct tl_entry {
  _ak_pool_impl *pool;
  uint64_t id;
  _ak_pool_heap *h;
} tl_entry;

/* Initial-exec TLS: the fast paths reach it with one %fs-relative access,
 * no __tls_get_addr call (the library is loaded at start-up, or dlopen'ed
 * into glibc's static TLS reserve). */
#define TL static __attribute__((tls_model("initial-exec"))) _Thread_local
TL tl_entry tl_cache[8];
TL tl_entry *tl_all;
TL size_t tl_n, tl_cap;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static _ak_pool_impl *g_threads_pools; /* live THREADS pools (under g_mu) */
static pthread_key_t g_key;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void thread_exit(void *arg);
static void make_key(void) { (void)pthread_key_create(&g_key, thread_exit); }

static bool registered(const _ak_pool_impl *p, uint64_t id) {
  for (_ak_pool_impl *q = g_threads_pools; q; q = q->next_threads_pool)
    if (q == p && q->id == id) return true;
  return false;
}

static inline size_t relaxed_get(_Atomic size_t *v) { return atomic_load_explicit(v, memory_order_relaxed); }
/* Owner-only counters: a plain load and store, no read-modify-write. */
static inline void relaxed_add(_Atomic size_t *v, size_t n) {
  atomic_store_explicit(v, atomic_load_explicit(v, memory_order_relaxed) + n, memory_order_relaxed);
}

/* The calling thread's heap for `p`; creates one if `create`. */
static __attribute__((noinline)) _ak_pool_heap *heap_find(_ak_pool_impl *p, bool create);

/* The calling thread's heap for `p`: one direct-mapped cache probe inline,
 * the search and creation out of line. */
static inline _ak_pool_heap *heap_get(_ak_pool_impl *p, bool create) {
  tl_entry *e = &tl_cache[p->id & 7];
  if (AK_LIKELY(e->pool == p && e->id == p->id)) return e->h;
  return heap_find(p, create);
}

static _ak_pool_heap *heap_find(_ak_pool_impl *p, bool create) {
  tl_entry *e = &tl_cache[p->id & 7];
  for (size_t i = 0; i < tl_n; i++) {
    if (tl_all[i].pool == p && tl_all[i].id == p->id) {
      *e = tl_all[i];
      return e->h;
    }
  }
  if (!create) return NULL;
  pthread_once(&g_once, make_key);
  if (tl_n == tl_cap) {
    /* Drop entries of destroyed pools before growing. */
    pthread_mutex_lock(&g_mu);
    size_t k = 0;
    for (size_t i = 0; i < tl_n; i++)
      if (registered(tl_all[i].pool, tl_all[i].id)) tl_all[k++] = tl_all[i];
    tl_n = k;
    pthread_mutex_unlock(&g_mu);
    if (tl_n == tl_cap) {
      size_t cap = tl_cap ? tl_cap * 2 : 8;
      tl_entry *a = realloc(tl_all, cap * sizeof *a);
      if (!a) return NULL;
      tl_all = a;
      tl_cap = cap;
    }
  }
  _ak_pool_heap *h = calloc(1, sizeof *h);
  if (!h) return NULL;
  h->pool = p;
  pthread_mutex_lock(&p->mu);
  h->next = p->heaps;
  if (p->heaps) p->heaps->prev = h;
  p->heaps = h;
  pthread_mutex_unlock(&p->mu);
  tl_all[tl_n++] = (tl_entry){p, p->id, h};
  *e = tl_all[tl_n - 1];
  (void)pthread_setspecific(g_key, (void *)1); /* so thread_exit runs */
  return h;
}

static void heap_unlink(_ak_pool_impl *p, _ak_pool_heap *h) {
  if (h->prev)
    h->prev->next = h->next;
  else
    p->heaps = h->next;
  if (h->next) h->next->prev = h->prev;
}

/* Under p->mu: hands the slabs of `h` to the pool. */
static void abandon(_ak_pool_impl *p, _ak_pool_heap *h) {
  _ak_slab_list *lists[2] = {&h->avail, &h->full};
  for (int i = 0; i < 2; i++) {
    while (lists[i]->head) {
      _ak_slab *s = lists[i]->head;
      _ak_list_remove(lists[i], s);
      atomic_store(&s->owner, 0);
      s->heap = NULL;
      relaxed_add(&h->frees, _ak_slab_collect(s));
      if (s->used == 0) {
        _ak_pool_slab_put(p, s);
      } else {
        _ak_list_push_back(&p->abandoned, s, AK_SLAB_ABANDONED);
      }
    }
  }
  heap_unlink(p, h);
}

/* Live objects of the abandoned slabs: their `used` (under p->mu). */
static size_t abandoned_live(_ak_pool_impl *p) {
  size_t n = 0;
  for (_ak_slab *s = p->abandoned.head; s; s = s->next) n += s->used;
  return n;
}

static void thread_exit(void *arg) {
  (void)arg;
  pthread_mutex_lock(&g_mu);
  for (size_t i = 0; i < tl_n; i++) {
    _ak_pool_impl *p = tl_all[i].pool;
    if (!registered(p, tl_all[i].id)) continue; /* destroyed: heap already freed */
    pthread_mutex_lock(&p->mu);
    abandon(p, tl_all[i].h);
    pthread_mutex_unlock(&p->mu);
    free(tl_all[i].h);
  }
  pthread_mutex_unlock(&g_mu);
  free(tl_all);
  tl_all = NULL;
  tl_n = tl_cap = 0;
  memset(tl_cache, 0, sizeof tl_cache);
}

int _ak_threads_init(_ak_pool_impl *p) {
  pthread_once(&g_once, make_key);
  pthread_mutex_lock(&g_mu);
  p->next_threads_pool = g_threads_pools;
  g_threads_pools = p;
  pthread_mutex_unlock(&g_mu);
  return 0;
}

void _ak_threads_destroy(_ak_pool_impl *p) {
  pthread_mutex_lock(&g_mu);
  for (_ak_pool_impl **pp = &g_threads_pools; *pp; pp = &(*pp)->next_threads_pool) {
    if (*pp == p) {
      *pp = p->next_threads_pool;
      break;
    }
  }
  pthread_mutex_lock(&p->mu);
  while (p->heaps) {
    _ak_pool_heap *h = p->heaps;
    heap_unlink(p, h);
    _ak_slab_list *lists[2] = {&h->avail, &h->full};
    for (int i = 0; i < 2; i++) {
      while (lists[i]->head) {
        _ak_slab *s = lists[i]->head;
        _ak_list_remove(lists[i], s);
        _ak_pool_slab_release(p, s);
      }
    }
    free(h);
  }
  pthread_mutex_unlock(&p->mu);
  pthread_mutex_unlock(&g_mu);
  for (size_t i = 0; i < 8; i++)
    if (tl_cache[i].pool == p) memset(&tl_cache[i], 0, sizeof tl_cache[i]);
}

size_t _ak_threads_live(_ak_pool_impl *p) {
  pthread_mutex_lock(&p->mu);
  size_t allocs = 0, frees = 0;
  for (_ak_pool_heap *h = p->heaps; h; h = h->next) {
    allocs += relaxed_get(&h->allocs);
    frees += relaxed_get(&h->frees);
  }
  size_t live = (allocs > frees ? allocs - frees : 0) + abandoned_live(p);
  pthread_mutex_unlock(&p->mu);
  return live;
}

/* Takes a slab for `h`: an abandoned one (adopted) or a spare/new one. */
static _ak_slab *take_slab(_ak_pool_impl *p, _ak_pool_heap *h) {
  pthread_mutex_lock(&p->mu);
  _ak_slab *s = p->abandoned.head;
  if (s) {
    _ak_list_remove(&p->abandoned, s);
    /* Its live objects now count for this heap. */
    relaxed_add(&h->allocs, s->used);
  } else {
    s = _ak_pool_slab_get(p);
  }
  if (!p->max_objects) {
    /* Sample the high-water mark whenever a heap needs a slab. */
    size_t allocs = 0, frees = 0;
    for (_ak_pool_heap *x = p->heaps; x; x = x->next) {
      allocs += relaxed_get(&x->allocs);
      frees += relaxed_get(&x->frees);
    }
    size_t live = (allocs > frees ? allocs - frees : 0) + abandoned_live(p);
    if (live > atomic_load(&p->t_peak)) atomic_store(&p->t_peak, live);
  }
  if (s) {
    s->heap = h;
    atomic_store(&s->owner, (uintptr_t)h);
  }
  pthread_mutex_unlock(&p->mu);
  if (s) relaxed_add(&h->frees, _ak_slab_collect(s));
  return s;
}

static void heap_trim(_ak_pool_impl *p, _ak_pool_heap *h) {
  for (_ak_slab *s = h->full.head, *next; s; s = next) {
    next = s->next;
    if (atomic_load_explicit(&s->remote, memory_order_relaxed)) {
      relaxed_add(&h->frees, _ak_slab_collect(s));
      _ak_list_remove(&h->full, s);
      _ak_list_push_back(&h->avail, s, AK_SLAB_AVAIL);
    }
  }
  for (_ak_slab *s = h->avail.head, *next; s; s = next) {
    next = s->next;
    relaxed_add(&h->frees, _ak_slab_collect(s));
    if (s->used == 0) {
      _ak_list_remove(&h->avail, s);
      atomic_store(&s->owner, 0);
      pthread_mutex_lock(&p->mu);
      _ak_pool_slab_release(p, s);
      pthread_mutex_unlock(&p->mu);
    }
  }
  atomic_store_explicit(&h->trim_req, 0, memory_order_relaxed);
}

/* Finds a slab of `h` with a free slot and pops it (slow path). */
static void *refill(_ak_pool_impl *p, _ak_pool_heap *h) {
  if (atomic_load_explicit(&h->trim_req, memory_order_relaxed)) heap_trim(p, h);
  /* 1. The avail slabs' remote lists. */
  while (h->avail.head) {
    _ak_slab *s = h->avail.head;
    relaxed_add(&h->frees, _ak_slab_collect(s));
    void *o = _ak_slab_pop(s);
    if (o) return o;
    _ak_list_remove(&h->avail, s);
    _ak_list_push_back(&h->full, s, AK_SLAB_FULL);
  }
  /* 2. Full slabs that other threads freed into. */
  for (_ak_slab *s = h->full.head, *next; s; s = next) {
    next = s->next;
    if (!atomic_load_explicit(&s->remote, memory_order_relaxed)) continue;
    uint32_t n = _ak_slab_collect(s);
    relaxed_add(&h->frees, n);
    if (n) {
      _ak_list_remove(&h->full, s);
      _ak_list_push_front(&h->avail, s, AK_SLAB_AVAIL);
    }
  }
  if (h->avail.head) return _ak_slab_pop(h->avail.head);
  /* 3. An abandoned, spare or new slab (an adopted one may be full: keep
   * it and take the next). */
  for (;;) {
    _ak_slab *s = take_slab(p, h);
    if (!s) return NULL;
    void *o = _ak_slab_pop(s);
    if (o) {
      _ak_list_push_front(&h->avail, s, AK_SLAB_AVAIL);
      return o;
    }
    _ak_list_push_back(&h->full, s, AK_SLAB_FULL);
  }
}

void *_ak_threads_alloc(_ak_pool_impl *p) {
  _ak_pool_heap *h = heap_get(p, true);
  if (AK_UNLIKELY(!h)) {
    _ak_pool_error(p, ENOMEM, "ak_pool_alloc", "out of memory for the thread's heap");
    return NULL;
  }
  if (p->max_objects) {
    size_t n = atomic_fetch_add_explicit(&p->t_live, 1, memory_order_relaxed) + 1;
    if (n > p->max_objects) {
      atomic_fetch_sub_explicit(&p->t_live, 1, memory_order_relaxed);
      _ak_pool_error(p, ENOMEM, "ak_pool_alloc", "max_objects live objects already");
      return NULL;
    }
    size_t peak = atomic_load_explicit(&p->t_peak, memory_order_relaxed);
    while (n > peak && !atomic_compare_exchange_weak(&p->t_peak, &peak, n)) {
    }
  }
  _ak_slab *s = h->avail.head;
  void *o = s ? _ak_slab_pop(s) : NULL;
  if (AK_UNLIKELY(!o)) {
    o = refill(p, h);
    if (!o) {
      if (p->max_objects) atomic_fetch_sub_explicit(&p->t_live, 1, memory_order_relaxed);
      return NULL;
    }
    s = h->avail.head;
  }
  relaxed_add(&h->allocs, 1);
  if (!s->free && s->bump == s->end) {
    _ak_list_remove(&h->avail, s);
    _ak_list_push_back(&h->full, s, AK_SLAB_FULL);
  }
  if (AK_UNLIKELY(p->debug)) {
    _ak_pool_mark_live(p, s, o);
    _ak_pool_track_alloc(p, o);
  }
  return o;
}

static _Noreturn AK_COLD void double_free(_ak_pool_impl *p, void *o) {
  fprintf(stderr, "arenakit: ak_pool_free(%p): double free in pool '%s'\n", o, p->name);
  abort();
}

/* Hardened: aborts if `o` is already free (see _ak_slab_is_free). */
static inline void check_double_free(_ak_pool_impl *p, _ak_slab *s, void *o, bool local) {
  if (ak_harden_double_free && AK_UNLIKELY(_ak_slab_is_free(s, o, local))) double_free(p, o);
}

static void remote_free(_ak_pool_impl *p, _ak_slab *s, void *o) {
  if (atomic_load_explicit(&s->owner, memory_order_acquire) == 0) {
    /* Abandoned: nobody owns the local list; work on it under the mutex. */
    pthread_mutex_lock(&p->mu);
    if (atomic_load(&s->owner) == 0) {
      check_double_free(p, s, o, true);
      _ak_slab_push(s, o);
      (void)_ak_slab_collect(s);
      if (s->used == 0) {
        _ak_list_remove(&p->abandoned, s);
        _ak_pool_slab_put(p, s);
      }
      pthread_mutex_unlock(&p->mu);
      return;
    }
    pthread_mutex_unlock(&p->mu);
  }
  check_double_free(p, s, o, false);
  /* One CAS: push on the slab's remote list; the owner collects it. */
  void *head = atomic_load_explicit(&s->remote, memory_order_relaxed);
  do {
    _ak_slab_set_link(s, o, head);
  } while (!atomic_compare_exchange_weak_explicit(&s->remote, &head, o, memory_order_release,
                                                  memory_order_relaxed));
}

void _ak_threads_free(_ak_pool_impl *p, void *o) {
  _ak_slab *s = _ak_pool_slab_fast(p, o, "ak_pool_free");
  if (AK_UNLIKELY(p->debug)) {
    _ak_pool_mark_free(p, s, o, "ak_pool_free");
    _ak_pool_track_free(p, o);
  }
  if (p->max_objects) atomic_fetch_sub_explicit(&p->t_live, 1, memory_order_relaxed);
  _ak_pool_heap *h = heap_get(p, false);
  if (!h || atomic_load_explicit(&s->owner, memory_order_relaxed) != (uintptr_t)h) {
    remote_free(p, s, o);
    return;
  }
  if (AK_UNLIKELY(o == s->free)) double_free(p, o);
  check_double_free(p, s, o, true);
  bool was_full = s->list == AK_SLAB_FULL;
  _ak_slab_push(s, o);
  relaxed_add(&h->frees, 1);
  if (was_full) {
    _ak_list_remove(&h->full, s);
    _ak_pool_list_place(p, &h->avail, s);
  } else {
    if (AK_UNLIKELY(atomic_load_explicit(&p->defragment, memory_order_relaxed)))
      _ak_pool_list_settle(p, &h->avail, s);
  }
  if (s->used == 0 && h->avail.n > 1) {
    _ak_list_remove(&h->avail, s);
    atomic_store(&s->owner, 0);
    pthread_mutex_lock(&p->mu);
    _ak_pool_slab_put(p, s);
    pthread_mutex_unlock(&p->mu);
  }
}

void _ak_threads_trim(_ak_pool_impl *p) {
  _ak_pool_heap *mine = heap_get(p, false);
  if (mine) heap_trim(p, mine);
  pthread_mutex_lock(&p->mu);
  for (_ak_slab *s = p->abandoned.head, *next; s; s = next) {
    next = s->next;
    (void)_ak_slab_collect(s);
    if (s->used == 0) {
      _ak_list_remove(&p->abandoned, s);
      _ak_pool_slab_release(p, s);
    }
  }
  while (p->spare.head) {
    _ak_slab *s = p->spare.head;
    _ak_list_remove(&p->spare, s);
    _ak_pool_slab_release(p, s);
  }
  /* Other threads' heaps: their lists are theirs alone; ask them to trim
   * at their next slow path. */
  for (_ak_pool_heap *h = p->heaps; h; h = h->next)
    if (h != mine) atomic_store_explicit(&h->trim_req, 1, memory_order_relaxed);
  pthread_mutex_unlock(&p->mu);
}

int _ak_threads_reserve(_ak_pool_impl *p, size_t n) {
  _ak_pool_heap *h = heap_get(p, true);
  if (!h) {
    _ak_pool_error(p, ENOMEM, "ak_pool_reserve", "out of memory for the thread's heap");
    return ENOMEM;
  }
  size_t room = 0;
  for (_ak_slab *s = h->avail.head; s; s = s->next) room += s->capacity - s->used;
  while (room < n) {
    pthread_mutex_lock(&p->mu);
    _ak_slab *s = _ak_pool_slab_get(p);
    pthread_mutex_unlock(&p->mu);
    if (!s) return errno ? errno : ENOMEM;
    s->heap = h;
    atomic_store(&s->owner, (uintptr_t)h);
    _ak_list_push_back(&h->avail, s, AK_SLAB_AVAIL);
    room += s->capacity;
  }
  return 0;
}
