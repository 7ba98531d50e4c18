/* SPDX-License-Identifier: MIT */
/* heap.c - thread heaps of the general allocator: creation, the slow
 * paths' decisions, thread exit (abandoning segments), adoption of
 * abandoned segments, collection, the purge tick and fork safety. The work
 * on pages, spans and segments is done below (page.c, span.c, segment.c).
 *
 * Call tree (each call goes down the list in malloc_internal.h):
 *   ak_malloc (alloc.c) fast: pop the class's first page
 *     -> _ak_malloc_slow: heap creation; large sizes (large.c); solo
 *          sizes (_ak_heap_solo_alloc); page_refill: the class's pages
 *          (_ak_page_find: remote frees, carving, the next page, full
 *          pages with remote frees), an abandoned segment when the heap
 *          is out of dirty free pages (one, that serves the class from
 *          pages that held data), or a fresh span (_ak_page_fresh)
 *   ak_free (alloc.c) fast: owner pushes on the page's free list; the
 *          page's last block -> _ak_heap_retire
 *     -> _ak_free_slow: huge-aligned and large blocks (large.c); the
 *          block checked and its page found (_ak_block_check); the
 *          checked and hardened builds' double-free search
 *          (_ak_block_free_check); then a remote CAS push (also into an
 *          abandoned segment), or a local push and _ak_page_retire ->
 *          _ak_span_free -> the segment's release
 *   thread exit (heap_exit): empty pages back, segments abandoned with
 *          their pages committed, for heaps that need space to adopt;
 *          sweep_abandoned (slow path, ak_collect) settles the rest
 *
 * Locks (slow paths only): _ak_heaps_mu (heap registry) and
 * _ak_abandoned_mu, each taken alone or abandoned -> spare segments ->
 * segment registry; the full order of the malloc's locks is written
 * beside the fork handlers below. */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "common/error.h"
#include "common/lifecycle.h"
#include "malloc/malloc_internal.h"
#include "os/os_mem.h"
#include "prof/prof.h"

/* Segments on _ak_abandoned: written under the mutex, read without it so
 * the allocation slow path need not lock when there is nothing to adopt. */
static atomic_size_t abandoned_count;
/* Heaps of running threads (_ak_heap_list's length, read without the lock
 * by page_refill). */
static atomic_size_t live_heaps;

static _ak_dlist heap_free_list; /* heaps of exited threads (gnode), under _ak_heaps_mu */

/* The countdown before the first sync: the profiler's "off" (INT64_MAX),
 * more bytes than a thread allocates (_ak_mtls). */
#define AK_COUNTDOWN_OFF INT64_MAX
static pthread_key_t heap_key;
static pthread_once_t heap_once = PTHREAD_ONCE_INIT;
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void heap_exit(void *arg);
static void maybe_purge(_ak_mheap *h);
static uint64_t malloc_tick(uint64_t now);

/* fork(): the child has only the forking thread, so a malloc lock that
 * another thread held at the fork would stay locked in the child for good
 * (a child hung in segment_new on the segment cache's lock). The prepare
 * handler takes every lock of the malloc, in this order, which is also the
 * only order in which any two of them are ever nested:
 *   1. _ak_heaps_mu      heap registry (registry.c) and reused heaps (heap.c; alone)
 *   2. _ak_abandoned_mu  abandoned segments (registry.c, heap.c; held while releasing
 *                        a segment: takes 3 and 6 inside)
 *   3. the spare segments' set lock (segment.c, common/reclaim.c; a leaf:
 *      its callbacks run with it dropped, or take no lock)
 *   4. huge_mu           huge-aligned registry (large.c; a leaf)
 *   5. lcache_mu         large-block cache (large.c; a leaf)
 *   6. _ak_seg_mu        segment registry (registry.c; innermost)
 * The parent releases them in reverse order, and so does the child: its
 * only thread is the one that took them. The child may then malloc and
 * free, including blocks of any thread from before the fork (a block of a
 * thread that does not exist in the child is freed with a remote push, its
 * memory is not reused in the child). The OS layer (src/os) has no locks. */
static void before_fork(void) {
  pthread_mutex_lock(&_ak_heaps_mu);
  pthread_mutex_lock(&_ak_abandoned_mu);
  _ak_segment_fork_prepare(); /* spare segments */
  _ak_large_fork_prepare();   /* huge_mu, lcache_mu */
  pthread_mutex_lock(&_ak_seg_mu);
}
static void after_fork_parent(void) {
  pthread_mutex_unlock(&_ak_seg_mu);
  _ak_large_fork_parent();
  _ak_segment_fork_parent();
  pthread_mutex_unlock(&_ak_abandoned_mu);
  pthread_mutex_unlock(&_ak_heaps_mu);
}
static void after_fork_child(void) {
  /* Only this thread exists now. The other threads' heaps stay
   * registered; their blocks can still be freed (remote frees). Their
   * segment lists may have been changing at the fork: the background
   * thread's idle purge leaves them alone for good (AK_SEG_LOCK_FROZEN). */
  for (_ak_dnode *x = _ak_heap_list.head; x; x = x->next)
    if (_ak_heap_at(x) != _ak_tl.heap)
      atomic_store_explicit(&_ak_heap_at(x)->seg_lock, AK_SEG_LOCK_FROZEN, memory_order_relaxed);
  after_fork_parent(); /* the forking thread, the child's only one, holds them all */
}

/* What the first allocation needs, and nothing that may call malloc. */
static void tables_init(void) {
  _ak_size_classes_init();
  _ak_options_init();
}

void _ak_malloc_tables_init(void) { pthread_once(&tables_once, tables_init); }

/* At load, before the pool's and the reclaim module's handlers
 * (common/lifecycle.h): a handler the program registers later runs its
 * prepare step before these take the malloc's locks. pthread_atfork may
 * call malloc: the heap starts on demand at any time. */
__attribute__((constructor(AK_CTOR_MALLOC))) static void fork_register(void) {
  (void)pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

/* May call malloc (atexit): runs once the calling thread's heap is in
 * place, so such a call is served normally. */
static void global_init(void) {
  (void)pthread_key_create(&heap_key, heap_exit);
  _ak_stats_at_exit();
  _ak_reclaim_register_tick(malloc_tick);
  _ak_segment_spares_register(); /* may start the background thread (AK_BACKGROUND=1) */
}

static _ak_mheap *heap_new(void) {
  _ak_malloc_tables_init();
  /* Heaps of exited threads are reused (threads that come and go). */
  pthread_mutex_lock(&_ak_heaps_mu);
  _ak_mheap *h = _ak_heap_at(_ak_dlist_pop_front(&heap_free_list));
  pthread_mutex_unlock(&_ak_heaps_mu);
  if (h) {
    memset(h, 0, sizeof *h);
  } else {
    h = _ak_os_alloc(sizeof(_ak_mheap), 1);
    if (!h) return NULL;
  }
  for (unsigned c = 0; c < AK_NCLS; c++) h->pages[c] = &_ak_empty_page;
  h->thread = pthread_self();
  /* Visible before anything below can re-enter malloc; then the countdown
   * (left >= 0 only with a heap), in step with the profiler's from the
   * first sync on (the generation 0 is none). */
  _ak_tl.heap = h;
  _ak_tl.left = h->left_base = AK_COUNTDOWN_OFF;
  _ak_tl.allocs = 0;
  pthread_once(&heap_once, global_init);
  pthread_mutex_lock(&_ak_heaps_mu);
  _ak_dlist_push_front(&_ak_heap_list, &h->gnode);
  atomic_fetch_add_explicit(&live_heaps, 1, memory_order_relaxed);
  pthread_mutex_unlock(&_ak_heaps_mu);
  (void)pthread_setspecific(heap_key, h); /* heap_exit at thread exit */
  return h;
}

_ak_mheap *_ak_heap_get(void) {
  _ak_mheap *h = _ak_tl.heap;
  return h ? h : heap_new();
}

/* True if `s` has `k` consecutive pages in no span (from page 1 when
 * k > 1: page 0 holds one-page spans only); with `dirty`, pages that were
 * in use and are still committed (no fault to reuse). */
static bool seg_has_run(const _ak_segment *s, unsigned k, bool dirty) {
  uint64_t f = dirty ? s->dirty_mask : s->free_mask;
  if (k > 1) f &= ~UINT64_C(1);
  for (unsigned i = 1; i < k && f; i++) f &= f >> 1; /* bit j: pages j .. j+k-1 free */
  return f != 0;
}

/* True if one of h's segments has such a run. */
static bool heap_has_run(const _ak_mheap *h, unsigned k, bool dirty) {
  for (_ak_dnode *n = h->segs.head; n; n = n->next)
    if (seg_has_run(_ak_seg_at(n), k, dirty)) return true;
  return false;
}

/* What adopt() looks for in an abandoned segment (read under
 * _ak_abandoned_mu, which stands in for the owner): `cls` and `k` are the
 * caller's class and span length. */
typedef bool (*adopt_fit)(const _ak_segment *s, unsigned cls, unsigned k);

static bool fits_any(const _ak_segment *s, unsigned cls, unsigned k) {
  (void)s, (void)cls, (void)k;
  return true;
}

/* Room for a solo span of k pages. */
static bool fits_run(const _ak_segment *s, unsigned cls, unsigned k) {
  (void)cls;
  return seg_has_run(s, k, false);
}

/* Serves class `cls` from memory a span already touched: a span of the
 * class with a block to spare, or k dirty pages in a row. */
static bool fits_class(const _ak_segment *s, unsigned cls, unsigned k) {
  if (seg_has_run(s, k, true)) return true;
  for (uint64_t m = s->carved_mask & ~s->free_mask; m; m &= m - 1) {
    const _ak_page *pg = &s->pages[__builtin_ctzll(m)];
    if (!pg->head_off && pg->cls == cls && !(pg->flags & AK_PG_SOLO) && _ak_used(pg) < pg->capacity)
      return true;
  }
  return false;
}

/* Abandoned segments adopt() looks at, most recent first: a bound on the
 * work under _ak_abandoned_mu when many threads exited. */
#define AK_ADOPT_SCAN 16

/* Adopts the most recently abandoned segment that `fit` accepts among the
 * first AK_ADOPT_SCAN, if any: its pages join this heap's queues
 * (_ak_pages_adopt). One segment, the one that serves the need: a heap
 * that took every abandoned segment it could would leave the threads
 * starting beside it to map fresh ones. */
static bool adopt(_ak_mheap *h, adopt_fit fit, unsigned cls, unsigned k) {
  if (!atomic_load_explicit(&abandoned_count, memory_order_relaxed)) return false;
  pthread_mutex_lock(&_ak_abandoned_mu);
  /* The abandoned list's length is what the count mirrors. */
  AK_ASSERT(_ak_abandoned.n == atomic_load_explicit(&abandoned_count, memory_order_relaxed));
  _ak_dnode *n = _ak_abandoned.head;
  for (int seen = 1; n && !fit(_ak_seg_at(n), cls, k); seen++) n = seen < AK_ADOPT_SCAN ? n->next : NULL;
  _ak_segment *seg = n ? _ak_seg_at(n) : NULL;
  if (seg) {
    _ak_dlist_remove(&_ak_abandoned, n);
    AK_ASSERT(atomic_load_explicit(&seg->owner, memory_order_relaxed) == AK_OWNER_NONE);
    atomic_fetch_sub_explicit(&abandoned_count, 1, memory_order_relaxed);
    atomic_store_explicit(&seg->owner, (uintptr_t)h, memory_order_release);
  }
  pthread_mutex_unlock(&_ak_abandoned_mu);
  if (!seg) return false;
  /* The adopter is about to reuse the free pages: the segment's aging
   * starts again, rather than decommitting pages that are faulted in next. */
  _ak_heap_seg_enter(h);
  seg->active_ms = _ak_reclaim_now();
  _ak_dlist_push_front(&h->segs, &seg->node);
  _ak_heap_seg_leave(h);
  _ak_pages_adopt(h, seg);
  return true;
}

/* Adopts an abandoned segment with `k` consecutive free pages for a solo
 * span: true then. Its free pages are reused instead of a fresh segment's. */
static bool adopt_for(_ak_mheap *h, unsigned k) { return adopt(h, fits_run, AK_CLS_SOLO, k); }

/* A page of class `cls` with a free block on its list, or NULL: the
 * class's own pages (_ak_page_find), then an abandoned segment that
 * serves the class from touched memory, then a fresh span
 * (_ak_page_fresh: touched free pages, a spare's, pages never touched);
 * a heap with no free page at all adopts any abandoned segment before a
 * fresh segment is mapped. */
static _ak_page *page_refill_locked(_ak_mheap *h, unsigned cls);
static _ak_page *page_refill(_ak_mheap *h, unsigned cls) {
  _ak_page *pg = h->pages[cls];
  if (pg->free) return pg; /* blocks above 1 KiB come here with one on the list: no call */
  pg = _ak_page_find(h, cls);
  if (pg) return pg;
  _ak_heap_seg_enter(h); /* the segments' masks are read below */
  pg = page_refill_locked(h, cls);
  _ak_heap_seg_leave(h);
  return pg;
}

/* page_refill past the class's own pages, under h's segment lock. */
static _ak_page *page_refill_locked(_ak_mheap *h, unsigned cls) {
  _ak_page *pg;
  unsigned k = _ak_cls_span[cls];
  /* Only a heap out of touched free pages adopts: one that took abandoned
   * segments while it had pages of its own would leave the threads
   * starting beside it none, and they would map fresh ones. */
  bool adopted = false;
  if (!heap_has_run(h, k, true)) adopted = adopt(h, fits_class, cls, k);
  if (!adopted && !heap_has_run(h, k, false) && !_ak_segment_hot_spare())
    adopted = adopt(h, fits_any, cls, k);
  if (adopted && h->pages[cls] != &_ak_empty_page &&
      ((pg = h->pages[cls])->free || (pg = _ak_page_find(h, cls))))
    return pg;
  return _ak_page_fresh(h, cls);
}

/* Settles an abandoned segment, under _ak_abandoned_mu (which stands in
 * for the owner): collects the remote frees and gives back the spans they
 * emptied. True if the segment is now entirely free. */
static bool abandoned_settle(_ak_segment *s) {
  AK_ASSERT(_ak_segment_validate(s, "abandoned_settle"));
  for (uint64_t m = s->carved_mask; m; m &= m - 1) {
    _ak_page *pg = &s->pages[__builtin_ctzll(m)];
    if (!pg->block_size || pg->head_off) continue;
    _ak_page_collect(pg);
    if (_ak_used(pg) == 0) {
      pg->in_queue = 0;
      _ak_span_free(NULL, s, pg);
    }
  }
  return s->free_mask == UINT64_MAX;
}

/* Sweeps the abandoned segments (any thread's slow path, every 64 calls;
 * ak_collect): collects their remote frees, releases those now entirely
 * free and decommits free pages older than the purge delay (all with
 * force). So the memory of exited threads is neither stranded nor kept
 * resident while nobody adopts it. Without `force` a busy lock is skipped. */
static bool sweep_abandoned(bool force, uint64_t now) {
  if (!atomic_load_explicit(&abandoned_count, memory_order_relaxed)) return false;
  /* The page delay in force, extended while decommitted pages are taken
   * again soon after (_ak_reclaim_page_delay): a program that runs threads
   * in rounds adopts its exited threads' segments round after round, and
   * with the set delay alone their free pages would be decommitted between
   * rounds and faulted in again by the next. An adopted segment is stamped
   * active, so its pages are not purged under the thread that took it. */
  long delay = force ? 0 : _ak_reclaim_page_delay(now);
  if (force)
    pthread_mutex_lock(&_ak_abandoned_mu);
  else if (pthread_mutex_trylock(&_ak_abandoned_mu) != 0)
    return true; /* busy: later */
  bool waiting = false;
  for (_ak_dnode *n = _ak_abandoned.head, *next; n; n = next) {
    next = n->next;
    _ak_segment *s = _ak_seg_at(n);
    if (abandoned_settle(s)) {
      _ak_dlist_remove(&_ak_abandoned, &s->node);
      atomic_fetch_sub_explicit(&abandoned_count, 1, memory_order_relaxed);
      _ak_segment_release(s);
    } else {
      waiting = waiting || _ak_segment_purge(s, delay, now) != UINT64_MAX;
    }
  }
  pthread_mutex_unlock(&_ak_abandoned_mu);
  return waiting;
}

/* The malloc's step of the background thread (common/reclaim.h), for a
 * program whose threads make no call: the large-block cache's policy and
 * the abandoned segments' sweep. Runs again while either holds memory the
 * policy will give back. */
/* The free pages of running threads' segments, for threads that make no
 * call: each heap whose segment lock is free is purged as its own purge
 * tick would (the purge delay since the segment was last busy). Returns
 * when the next of them falls due. */
static uint64_t heaps_purge(uint64_t now) {
  if (pthread_mutex_trylock(&_ak_heaps_mu) != 0) return now + 100; /* busy: later */
  long delay = _ak_reclaim_page_delay(now);
  uint64_t next = UINT64_MAX;
  for (_ak_dnode *x = _ak_heap_list.head; x; x = x->next) {
    _ak_mheap *h = _ak_heap_at(x);
    unsigned free_ = 0;
    if (!atomic_compare_exchange_strong_explicit(&h->seg_lock, &free_, 2, memory_order_acquire,
                                                 memory_order_relaxed)) {
      if (free_ != AK_SEG_LOCK_FROZEN && now + 250 < next) next = now + 250; /* its owner is at work: later */
      continue;
    }
    for (_ak_dnode *n = h->segs.head; n; n = n->next) {
      uint64_t due = _ak_segment_purge(_ak_seg_at(n), delay, now);
      if (due < next) next = due;
    }
    atomic_store_explicit(&h->seg_lock, 0, memory_order_release);
  }
  pthread_mutex_unlock(&_ak_heaps_mu);
  return next;
}

static uint64_t malloc_tick(uint64_t now) {
  _ak_large_cache_trim(false, now);
  bool abandoned = sweep_abandoned(false, now);
  uint64_t next = heaps_purge(now);
  if (_ak_large_cache_pending()) next = now + 100;
  if (abandoned) {
    long d = _ak_reclaim_page_delay(now);
    uint64_t at = now + (uint64_t)(d > 5 ? d : 5);
    if (at < next) next = at;
  }
  return next;
}

/* The purge tick, every 64 slow-path calls of a thread (allocations that
 * refill, frees that empty a page or leave the fast path, frees into a
 * segment whose thread exited, blocks above 1 KiB): decommits the free
 * pages of this heap's quiet segments and of abandoned ones, and trims the
 * segment and large-block caches. A clock read and a few compares when
 * there is nothing to do. */
static void maybe_purge(_ak_mheap *h) {
  if ((++h->slow_calls & 63) != 0) return;
  uint64_t now = _ak_reclaim_now();
  long delay = _ak_reclaim_page_delay(now);
  _ak_heap_seg_enter(h);
  for (_ak_dnode *n = h->segs.head; n; n = n->next) (void)_ak_segment_purge(_ak_seg_at(n), delay, now);
  _ak_heap_seg_leave(h);
  (void)sweep_abandoned(false, now);
  _ak_segment_cache_trim(false);
  _ak_large_cache_trim(false, now);
}

void *_ak_heap_solo_alloc(_ak_mheap *h, size_t n, bool zero) {
  unsigned k = _ak_solo_pages(n);
  int at = -1;
  _ak_heap_seg_enter(h); /* the segments' masks are read to place the span */
  _ak_segment *seg = _ak_solo_place(h, k, &at);
  if (!seg) {
    _ak_solo_collect(h); /* blocks other threads freed, before mapping more */
    seg = _ak_solo_place(h, k, &at);
  }
  if (!seg && adopt_for(h, k)) seg = _ak_solo_place(h, k, &at); /* exited threads' pages */
  void *p = _ak_solo_take(h, seg, at, n, zero);                 /* seg NULL: a fresh segment */
  _ak_heap_seg_leave(h);
  /* No segment to be had (an address-space limit, overcommit): a mapping
   * of the block's own size may still be (degrade, not fail). Aligned as
   * a span is (64 KiB): ak_aligned_alloc relies on it. */
  if (!p && !seg) p = _ak_large_alloc(n, AK_PAGE_SIZE, zero);
  return p;
}

static void *malloc_slow(size_t n) {
  _ak_mheap *h = _ak_heap_get();
  if (!h) {
    errno = ENOMEM;
    return NULL;
  }
  maybe_purge(h);
  if (n > AK_SOLO_MIN)
    return n > AK_SOLO_MAX ? _ak_large_alloc(n, 16, false) : _ak_heap_solo_alloc(h, n, false);
  unsigned cls = _ak_size_class(n);
  _ak_page *pg = page_refill(h, cls);
  if (!pg) {
    errno = ENOMEM;
    return NULL;
  }
  void *b = pg->free;
  _ak_blk_pop(pg, b, "malloc");
  AK_ASSERT(_ak_used(pg) < pg->capacity); /* a free block was there: not every block is live */
  _ak_used_set(pg, _ak_used(pg) + 1);
  return b;
}

/* Folds the thread's counts into its heap `h` (owner only) and keeps the
 * countdown in step with the heap profiler's (prof/prof.h: the mirror):
 * when the word went below zero, or the profiler was started or stopped
 * since, the bytes since the last sync go to the profiler's own countdown,
 * which says whether the allocation that ended it is sampled; the word
 * then mirrors the profiler's next countdown (INT64_MAX while it is off).
 * Returns whether the block being allocated is to be sampled. */
static bool count_sync(_ak_mheap *h) {
  _ak_mtls *t = &_ak_tl;
  int64_t used = h->left_base - t->left; /* bytes asked for since the last sync */
  atomic_store_explicit(&h->blocks_allocated,
                        atomic_load_explicit(&h->blocks_allocated, memory_order_relaxed) + t->allocs,
                        memory_order_relaxed);
  atomic_store_explicit(&h->bytes_allocated,
                        atomic_load_explicit(&h->bytes_allocated, memory_order_relaxed) + (uint64_t)used,
                        memory_order_relaxed);
  t->allocs = 0;
  bool sampled = false;
  uint64_t gen = __atomic_load_n(&_ak_prof_gen, __ATOMIC_RELAXED);
  if (h->prof_gen != gen) { /* started or stopped: a fresh countdown to mirror */
    _ak_prof_poll();
    h->prof_gen = gen;
    t->left = _ak_prof_self.left;
  } else { /* the bytes since the last sync go to the profiler's countdown; below zero: the
              mirror ended at this allocation, and so does the profiler's */
    sampled = _ak_prof_sample_due((size_t)used);
    t->left = _ak_prof_self.left;
  }
  h->left_base = t->left;
  return sampled;
}

void _ak_heap_count(_ak_mheap *h, void *p, size_t n) {
  _ak_tl.left -= (int64_t)n;
  _ak_tl.allocs++;
  if (count_sync(h)) _ak_malloc_prof_sampled(p, n);
}

/* Whether count_sync will end the profiler's countdown at the allocation
 * being served (its bytes already taken off the thread's word):
 * count_sync's own test (_ak_prof_sample_due of the bytes since the last
 * sync), read without changing anything. */
static bool sample_ahead(_ak_mheap *h) {
  uint64_t gen = __atomic_load_n(&_ak_prof_gen, __ATOMIC_RELAXED);
  if (!(gen & 1) || h->prof_gen != gen) return false;
  return _ak_prof_self.left < h->left_base - _ak_tl.left;
}

/* A block the profiler is about to sample, of a size the fast path serves
 * (a page holds 64 or more of them), is placed on a span of its own (a
 * solo page, 4 KiB of it touched) rather than in its class's page: the
 * mark that sends a page's frees off the fast path (prof.c) then sits on
 * a page no other block shares, so the frees around a sample keep the fast
 * path (on a shared page every free of the page took the side lane while
 * the sample lived). Larger sizes share a page with few blocks and keep
 * their class page. Done only while the period is at least
 * AK_PROF_ALONE_PERIOD, so that the spans' addresses stay a small share of
 * the bytes each sample stands for, and not with the hardened build's
 * guard pages (a guard per span would split the mapping at every live
 * sample); otherwise, or with no span to be had, the class page is marked. */
#define AK_PROF_ALONE_MAX 1024
#define AK_PROF_ALONE_PERIOD (4 * AK_PAGE_SIZE)

/* The slow paths end where no lock of the library is held: a background
 * thread that memory put aside on the way asked for starts there. */
void *_ak_malloc_slow(size_t n) {
  _ak_mheap *h = _ak_tl.heap;
  bool fresh = h == NULL; /* the fast path's subtraction went to the word before it was armed */
  void *p = NULL;
  if (!ak_harden_guards && h && n <= AK_PROF_ALONE_MAX && sample_ahead(h) &&
      _ak_prof_period() >= AK_PROF_ALONE_PERIOD)
    p = _ak_heap_solo_alloc(h, n, false);
  if (!p) p = malloc_slow(n);
  h = _ak_tl.heap;
  if (p && h) {
    if (n > 1024 || fresh) _ak_tl.left -= (int64_t)n; /* the fast path took only sizes it serves */
    _ak_tl.allocs++;
    if (count_sync(h)) _ak_malloc_prof_sampled(p, n);
  }
  _ak_reclaim_start_wanted();
  return p;
}

void _ak_heap_retire(_ak_mheap *h, _ak_page *pg) {
  maybe_purge(h); /* a loop that allocates and frees one block lands here on each free */
  _ak_page_retire(h, pg);
  _ak_reclaim_start_wanted(); /* see _ak_malloc_slow */
}

static void free_slow(void *p, _ak_segment *seg) {
  if (!p) return;
  if (((uintptr_t)p & AK_SEG_MASK) == 0 && !_ak_segmap_has(seg) && _ak_huge_aligned_free(p)) return;
  _ak_page *pg = _ak_block_check("free", p, seg);
  if (!pg) {
    if (atomic_load_explicit(&seg->large_sampled, memory_order_relaxed))
      _ak_malloc_prof_free(seg, NULL, p, false);
    _ak_large_free(seg);
    return;
  }
  uint8_t flags = __atomic_load_n(&pg->flags, __ATOMIC_RELAXED);
  if (flags & AK_PG_ALIGNED) {
    uintptr_t off = (uintptr_t)p - pg->start;
    p = (void *)(pg->start + off - off % pg->block_size); /* aligned interior pointer */
  }
  _ak_mheap *h = _ak_tl.heap;
  if (flags & AK_PG_SAMPLED)
    _ak_malloc_prof_free(seg, pg, p,
                         h && atomic_load_explicit(&seg->owner, memory_order_relaxed) == (uintptr_t)h);
  /* A free into a segment whose thread exited (owner AK_OWNER_NONE) is a
   * remote free like any other: the segment stays abandoned for a heap that
   * needs space (page_refill), and sweep_abandoned settles it meanwhile. The
   * thread that frees an exited thread's blocks is not the one likeliest to
   * allocate there: adopting on free would let the first thread of a
   * generation take the segments that its peers' blocks share, and the
   * peers would map fresh ones (more page faults and resident memory in
   * larson-style servers). */
  uintptr_t owner = atomic_load_explicit(&seg->owner, memory_order_relaxed);
  bool mine = h && owner == (uintptr_t)h;
  if (_ak_malloc_checked || ak_harden_double_free) _ak_block_free_check(pg, p, mine);
  if (!mine) {
    _ak_blk_push_remote(pg, p);
    /* Into a segment whose thread exited: the purge tick, whose sweep
     * settles such segments, so that the memory a thread frees for an
     * exited one goes back even if it allocates nothing (`owner` as read
     * before the push: once pushed, the segment may be settled, released
     * and unmapped by another thread). */
    if (owner == AK_OWNER_NONE) {
      if (h) maybe_purge(h);
      _ak_reclaim_wake(); /* free pages of a segment nobody holds: purged if no call comes */
    }
    return;
  }
  if (pg->flags & AK_PG_SOLO) { /* its own span: give the pages back to the segment */
    _ak_used_set(pg, 0);
    _ak_span_free(h, seg, pg);
    return;
  }
  maybe_purge(h); /* a local free: the purge tick */
  _ak_blk_push(pg, p);
  _ak_page_retire(h, pg);
}

void _ak_free_slow(void *p, _ak_segment *seg) {
  free_slow(p, seg);
  _ak_reclaim_start_wanted(); /* see _ak_malloc_slow */
}

/* Collects remote frees, releases empty pages, purges (owner only; `h`
 * may be NULL: a thread without a heap), then sweeps the abandoned
 * segments. */
void _ak_heap_collect(_ak_mheap *h, bool force) {
  uint64_t now = _ak_reclaim_now();
  if (h) _ak_pages_collect(h, force);
  if (h) _ak_heap_seg_enter(h);
  for (_ak_dnode *n = h ? h->segs.head : NULL, *next; n; n = next) {
    next = n->next;
    _ak_segment *s = _ak_seg_at(n);
    if (force && s->free_mask == UINT64_MAX) {
      _ak_dlist_remove(&h->segs, &s->node);
      _ak_segment_release(s);
      continue;
    }
    (void)_ak_segment_purge(s, force ? 0 : _ak_reclaim_page_delay(now), now);
  }
  if (h) _ak_heap_seg_leave(h);
  (void)sweep_abandoned(force, now);
}

/* Thread exit: empty pages go back, the rest is abandoned for adoption.
 * Nothing is decommitted here: a thread that comes next and needs space
 * reuses the pages as they are, without a fault per page; free pages are
 * purged after the purge delay like any others (abandoned ones by
 * sweep_abandoned), and an entirely free segment becomes a spare segment,
 * which the reclaim policy decommits and unmaps after its delays. */
static void heap_exit(void *arg) {
  _ak_mheap *h = arg;
  if (!h) return;
  _ak_pages_collect(h, true);
  if (_ak_tl.heap == h) (void)count_sync(h); /* the thread's last counts */
  _ak_heap_exited(h);
  _ak_tl.heap = NULL; /* a later malloc in this thread makes a new heap */
  _ak_tl.left = -1;   /* ... through the slow path */
  _ak_tl.allocs = 0;
  _ak_mtls_forget(NULL); /* its segments are released or abandoned below */
  _ak_heap_seg_enter(h); /* the background thread's idle purge leaves h alone from here on */
  for (_ak_segment *s; (s = _ak_seg_at(_ak_dlist_pop_front(&h->segs))) != NULL;) {
    if (s->free_mask == UINT64_MAX) {
      _ak_segment_release(s);
      continue;
    }
    for (uint64_t m = s->carved_mask; m; m &= m - 1) { /* the others were never queued */
      _ak_page *pg = &s->pages[__builtin_ctzll(m)];
      pg->node.prev = pg->node.next = NULL; /* the heap's lists go with it */
      pg->in_queue = 0;
    }
    pthread_mutex_lock(&_ak_abandoned_mu);
    AK_ASSERT(atomic_load_explicit(&s->owner, memory_order_relaxed) == (uintptr_t)h);
    atomic_store_explicit(&s->owner, AK_OWNER_NONE, memory_order_seq_cst);
    /* Frees that raced with abandoning are on remote lists: settle them,
     * and give back the pages they emptied. */
    if (abandoned_settle(s)) {
      pthread_mutex_unlock(&_ak_abandoned_mu);
      _ak_segment_release(s);
      continue;
    }
    _ak_dlist_push_front(&_ak_abandoned, &s->node);
    atomic_fetch_add_explicit(&abandoned_count, 1, memory_order_relaxed);
    pthread_mutex_unlock(&_ak_abandoned_mu);
    _ak_reclaim_wake(); /* its free pages wait the page delay */
  }
  _ak_heap_seg_leave(h);
  pthread_mutex_lock(&_ak_heaps_mu);
  _ak_dlist_remove(&_ak_heap_list, &h->gnode);
  atomic_fetch_sub_explicit(&live_heaps, 1, memory_order_relaxed);
  _ak_dlist_push_front(&heap_free_list, &h->gnode); /* kept for the next thread */
  pthread_mutex_unlock(&_ak_heaps_mu);
}
