/* SPDX-License-Identifier: MIT */
/* heap.c - thread heaps of the general allocator: creation, size-class
 * page queues, the allocation and free slow paths, remote frees, thread
 * exit (abandoning segments), adoption, collection and fork safety.
 *
 * Call tree:
 *   ak_malloc (alloc.c) fast: pop the class's first page
 *     -> _ak_malloc_slow: heap creation; large sizes; page_refill:
 *          collect remote frees, carve more blocks, next page in the
 *          queue, full pages with remote frees, adopt an abandoned
 *          segment, or a fresh span (_ak_span_alloc)
 *   ak_free (alloc.c) fast: owner pushes on the page's free list
 *     -> _ak_free_slow: large, huge-aligned, aligned interior pointers,
 *          full -> queue, empty pages (_ak_page_retire), remote CAS push;
 *          a free into an abandoned segment adopts it (abandoned_take)
 *   thread exit (heap_exit): empty pages back, segments abandoned with
 *          their pages committed; sweep_abandoned (slow path, ak_collect)
 *          settles what nobody adopts
 *
 * Locks (slow paths only): _ak_heaps_mu (heap registry) and
 * _ak_abandoned_mu, each taken alone or abandoned -> spare segments ->
 * segment registry; the full order of the malloc's locks is written
 * beside the fork handlers below. */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "common/error.h"
#include "malloc/malloc_internal.h"
#include "os/os_mem.h"

/* Initial-exec TLS: no __tls_get_addr call (which may itself allocate). */
__attribute__((tls_model("initial-exec"))) _Thread_local _ak_mheap *_ak_tl_heap;

pthread_mutex_t _ak_heaps_mu = PTHREAD_MUTEX_INITIALIZER;
_ak_dlist _ak_heap_list;
pthread_mutex_t _ak_abandoned_mu = PTHREAD_MUTEX_INITIALIZER;
_ak_dlist _ak_abandoned;
/* Segments on _ak_abandoned: written under the mutex, read without it so
 * the allocation slow path need not lock when there is nothing to adopt. */
static atomic_size_t abandoned_count;
_ak_page _ak_empty_page; /* free == NULL: every empty class points here */

static _ak_dlist heap_free_list; /* heaps of exited threads (gnode), under _ak_heaps_mu */
static pthread_key_t heap_key;
static pthread_once_t heap_once = PTHREAD_ONCE_INIT;
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void heap_exit(void *arg);
static void maybe_purge(_ak_mheap *h);

/* fork(): the child has only the forking thread, so a malloc lock that
 * another thread held at the fork would stay locked in the child for good
 * (a child hung in segment_new on the segment cache's lock). The prepare
 * handler takes every lock of the malloc, in this order, which is also the
 * only order in which any two of them are ever nested:
 *   1. _ak_heaps_mu      heap registry and reused heaps (heap.c; alone)
 *   2. _ak_abandoned_mu  abandoned segments (heap.c; held while releasing
 *                        a segment: takes 3 and 6 inside)
 *   3. the spare segments' set lock (segment.c, common/reclaim.c; a leaf:
 *      its callbacks run with it dropped, or take no lock)
 *   4. huge_mu           huge-aligned registry (segment.c; a leaf)
 *   5. lcache_mu         large-block cache (segment.c; a leaf)
 *   6. _ak_seg_mu        segment registry (segment.c; innermost)
 * The parent releases them in reverse order; the child, in which no other
 * thread exists, initialises them afresh. The child may then malloc and
 * free, including blocks of any thread from before the fork (a block of a
 * thread that does not exist in the child is freed with a remote push, its
 * memory is not reused in the child). The OS layer (src/os) has no locks. */
static void before_fork(void) {
  pthread_mutex_lock(&_ak_heaps_mu);
  pthread_mutex_lock(&_ak_abandoned_mu);
  _ak_segment_fork_prepare(); /* spare segments, huge_mu, lcache_mu */
  pthread_mutex_lock(&_ak_seg_mu);
}
static void after_fork_parent(void) {
  pthread_mutex_unlock(&_ak_seg_mu);
  _ak_segment_fork_parent();
  pthread_mutex_unlock(&_ak_abandoned_mu);
  pthread_mutex_unlock(&_ak_heaps_mu);
}
static void after_fork_child(void) {
  /* Only this thread exists now: fresh mutexes. The other threads' heaps
   * stay registered; their blocks can still be freed (remote frees). */
  pthread_mutex_init(&_ak_seg_mu, NULL);
  _ak_segment_fork_child();
  pthread_mutex_init(&_ak_abandoned_mu, NULL);
  pthread_mutex_init(&_ak_heaps_mu, NULL);
}

/* What the first allocation needs, and nothing that may call malloc. */
static void tables_init(void) {
  _ak_size_classes_init();
  _ak_options_init();
}

void _ak_malloc_tables_init(void) { pthread_once(&tables_once, tables_init); }

/* May call malloc (pthread_atfork, atexit): runs once the calling thread's
 * heap is in place, so such a call is served normally. */
static void global_init(void) {
  (void)pthread_key_create(&heap_key, heap_exit);
  (void)pthread_atfork(before_fork, after_fork_parent, after_fork_child);
  _ak_stats_at_exit();
}

/* Runs inside malloc and free: _ak_fatal allocates nothing. */
_Noreturn void _ak_malloc_fatal(const char *call, const void *p, const char *why, unsigned cls) {
  if (cls < AK_NCLS)
    _ak_fatal("%s(%p): %s (size class %u, %u-byte blocks)", call, p, why, cls, _ak_cls_size[cls]);
  _ak_fatal("%s(%p): %s", call, p, why);
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
  /* Visible before anything below can re-enter malloc. */
  _ak_tl_heap = h;
  pthread_once(&heap_once, global_init);
  pthread_mutex_lock(&_ak_heaps_mu);
  _ak_dlist_push_front(&_ak_heap_list, &h->gnode);
  pthread_mutex_unlock(&_ak_heaps_mu);
  (void)pthread_setspecific(heap_key, h); /* heap_exit at thread exit */
  return h;
}

_ak_mheap *_ak_heap_get(void) {
  _ak_mheap *h = _ak_tl_heap;
  return h ? h : heap_new();
}

/* ---- class queues --------------------------------------------------------------- */

/* The fast path's view of class `cls`: the first page of its queue, or
 * the sentinel when the queue is empty. */
static void queue_sync(_ak_mheap *h, unsigned cls) {
  _ak_page *first = _ak_page_at(h->queue[cls].head);
  h->pages[cls] = first ? first : &_ak_empty_page;
}

static void queue_push_front(_ak_mheap *h, _ak_page *pg) {
  _ak_dlist_push_front(&h->queue[pg->cls], &pg->node);
  h->pages[pg->cls] = pg;
  pg->in_queue = 1;
}

static void queue_remove(_ak_mheap *h, _ak_page *pg) {
  _ak_dlist_remove(&h->queue[pg->cls], &pg->node);
  queue_sync(h, pg->cls);
  pg->in_queue = 0;
}

static void full_push(_ak_mheap *h, _ak_page *pg) {
  _ak_dlist_push_front(&h->full[pg->cls], &pg->node);
  pg->in_queue = 2;
  __atomic_fetch_or(&pg->flags, AK_PG_FULL, __ATOMIC_RELAXED); /* atomic: remote frees read flags */
}

static void full_remove(_ak_mheap *h, _ak_page *pg) {
  _ak_dlist_remove(&h->full[pg->cls], &pg->node);
  pg->in_queue = 0;
  __atomic_fetch_and(&pg->flags, (uint8_t)~AK_PG_FULL,
                     __ATOMIC_RELAXED); /* atomic: remote frees read flags */
}

/* Moves the remote list onto the free list; returns how many. */
static uint32_t collect_remote(_ak_page *pg) {
  if (!atomic_load_explicit(&pg->remote, memory_order_relaxed)) return 0;
  void *list = atomic_exchange_explicit(&pg->remote, NULL, memory_order_acquire);
  uint32_t n = 0;
  void *tail = NULL;
  for (void *b = list; b; b = _ak_blk_next(pg, b)) {
    if (ak_harden_links && AK_UNLIKELY(!_ak_blk_in(pg, b)))
      _ak_malloc_fatal("malloc", tail, "corrupted remote free list (a write after free or a forged link)",
                       pg->cls);
    tail = b;
    n++;
  }
  if (tail) {
    _ak_blk_set_next(pg, tail, pg->free);
    pg->free = list;
  }
  _ak_used_set(pg, _ak_used(pg) - n);
  return n;
}

/* Carves up to a page's worth of never-used blocks onto the free list. */
static bool carve(_ak_page *pg) {
  if (pg->bump >= pg->end) return false;
  uintptr_t stop = pg->bump + 4096;
  if (stop < pg->bump + pg->block_size) stop = pg->bump + pg->block_size;
  if (stop > pg->end) stop = pg->end;
  size_t n = (stop - pg->bump) / pg->block_size;
  uintptr_t b = pg->bump;
  if (_ak_malloc_checked && pg->block_size > sizeof(void *))
    for (size_t i = 0; i < n; i++)
      memset((char *)(b + i * pg->block_size) + sizeof(void *), 0xdf, pg->block_size - sizeof(void *));
  /* Address order (the list pops low addresses first), or random order
   * with the shuffle mitigation. */
  pg->free = _ak_chain_blocks(b, pg->block_size, n, pg->free, pg->key, ak_harden_shuffle);
  pg->bump = b + n * pg->block_size;
  return true;
}

/* Releases an empty page's span (and its segment if all free). */
static void page_release(_ak_mheap *h, _ak_page *pg) {
  _ak_segment *seg = _ak_seg_of((void *)pg->start);
  if (pg->in_queue == 1)
    queue_remove(h, pg);
  else if (pg->in_queue == 2)
    full_remove(h, pg);
  _ak_span_free(h, seg, pg);
}

void _ak_page_retire(_ak_mheap *h, _ak_page *pg) {
  maybe_purge(h); /* a loop that allocates and frees one block lands here on each free */
  if (pg->flags & AK_PG_FULL) {
    full_remove(h, pg);
    queue_push_front(h, pg);
  }
  /* An empty page goes back to its segment unless it is the last of its
   * class and a one-page span (kept, so that one block allocated and freed
   * over and over does not take and give a span each time). Multi-page
   * spans (classes above 8 KiB) go at once: kept empty, one per class,
   * they would hold several segments' worth of pages. */
  if (_ak_used(pg) == 0 && (h->queue[pg->cls].n > 1 || pg->span > 1)) page_release(h, pg);
}

/* Takes `seg`, just unlinked from the abandoned list with its owner set to
 * `h`, into `h`: remote frees are collected, empty spans go back to the
 * segment, the rest join h's class queues (or full lists). */
static void segment_adopt(_ak_mheap *h, _ak_segment *seg) {
  /* The adopter is about to reuse the free pages: the segment's aging
   * starts again, rather than decommitting pages that are faulted in next. */
  seg->active_ms = _ak_now_ms();
  _ak_dlist_push_front(&h->segs, &seg->node);
  for (unsigned i = 0; i < AK_SEG_PAGES; i++) {
    _ak_page *pg = &seg->pages[i];
    if (pg->head_off || !pg->block_size) continue;
    collect_remote(pg);
    __atomic_fetch_and(&pg->flags, (uint8_t)~AK_PG_FULL, __ATOMIC_RELAXED); /* remote frees read flags */
    pg->in_queue = 0;
    if (_ak_used(pg) == 0) {
      /* Freeing the last span in use may release the segment: stop, since
       * every page after it is free. */
      uint64_t bits = (pg->span == 64 ? UINT64_MAX : ((UINT64_C(1) << pg->span) - 1)) << i;
      bool last = (seg->free_mask | bits) == UINT64_MAX;
      _ak_span_free(h, seg, pg);
      if (last) return;
    } else if (pg->flags & AK_PG_SOLO) {
      /* a live solo block: on no queue */
    } else if (pg->free || pg->bump < pg->end) {
      queue_push_front(h, pg);
    } else {
      full_push(h, pg);
    }
  }
}

/* Unlinks `seg` from the abandoned list and makes `h` its owner, if it is
 * still abandoned (another thread may have adopted it first). */
static bool abandoned_take(_ak_mheap *h, _ak_segment *seg) {
  pthread_mutex_lock(&_ak_abandoned_mu);
  bool taken = atomic_load_explicit(&seg->owner, memory_order_relaxed) == AK_OWNER_NONE;
  if (taken) {
    _ak_dlist_remove(&_ak_abandoned, &seg->node);
    atomic_fetch_sub_explicit(&abandoned_count, 1, memory_order_relaxed);
    atomic_store_explicit(&seg->owner, (uintptr_t)h, memory_order_release);
  }
  pthread_mutex_unlock(&_ak_abandoned_mu);
  return taken;
}

/* Adopts one abandoned segment: its pages join this heap's queues. */
static bool adopt(_ak_mheap *h) {
  if (!atomic_load_explicit(&abandoned_count, memory_order_relaxed)) return false;
  pthread_mutex_lock(&_ak_abandoned_mu);
  _ak_segment *seg = _ak_seg_at(_ak_dlist_pop_front(&_ak_abandoned));
  if (seg) {
    atomic_fetch_sub_explicit(&abandoned_count, 1, memory_order_relaxed);
    atomic_store_explicit(&seg->owner, (uintptr_t)h, memory_order_release);
  }
  pthread_mutex_unlock(&_ak_abandoned_mu);
  if (!seg) return false;
  seg->flags &= ~(uint32_t)AK_SEG_RELEASE_EMPTY; /* taken for its space: kept like any other */
  segment_adopt(h, seg);
  return true;
}

/* True if one of h's segments has `k` consecutive pages in no span (from
 * page 1 when k > 1: page 0 holds one-page spans only). */
static bool heap_has_free_run(const _ak_mheap *h, unsigned k) {
  for (_ak_dnode *n = h->segs.head; n; n = n->next) {
    const _ak_segment *s = _ak_seg_at(n);
    uint64_t f = k > 1 ? s->free_mask & ~UINT64_C(1) : s->free_mask;
    for (unsigned i = 1; i < k && f; i++) f &= f >> 1; /* bit j: pages j .. j+k-1 free */
    if (f) return true;
  }
  return false;
}

bool _ak_heap_adopt_for(_ak_mheap *h, unsigned k) {
  for (int tries = 0; tries < 4 && adopt(h); tries++) /* a few: not every exited thread's segments */
    if (heap_has_free_run(h, k)) return true;
  return false;
}

/* A page of class `cls` with a free block on its list, or NULL. */
static _ak_page *page_refill(_ak_mheap *h, unsigned cls) {
  for (;;) {
    _ak_page *pg = h->pages[cls];
    if (pg == &_ak_empty_page) break;
    if (pg->free) return pg;
    if (collect_remote(pg) || carve(pg)) return pg;
    queue_remove(h, pg);
    full_push(h, pg);
  }
  /* Full pages that other threads freed into. */
  for (_ak_dnode *n = h->full[cls].head, *next; n; n = next) {
    next = n->next;
    _ak_page *pg = _ak_page_at(n);
    if (collect_remote(pg)) {
      full_remove(h, pg);
      if (_ak_used(pg) == 0 && h->pages[cls] != &_ak_empty_page) {
        _ak_span_free(h, _ak_seg_of((void *)pg->start), pg);
      } else {
        queue_push_front(h, pg);
      }
    }
  }
  if (h->pages[cls] != &_ak_empty_page) return h->pages[cls];
  /* Abandoned segments before fresh spans, but no more of them than it
   * takes to have a page of this class or a free page to carve one from
   * (a thread that starts adopts one, not all of its predecessors'). */
  while (adopt(h)) {
    if (h->pages[cls] != &_ak_empty_page) return page_refill(h, cls);
    if (heap_has_free_run(h, _ak_cls_span[cls])) break;
  }
  _ak_page *pg = _ak_span_alloc(h, cls);
  if (!pg) return NULL;
  queue_push_front(h, pg);
  carve(pg);
  return pg;
}

/* Settles an abandoned segment, under _ak_abandoned_mu (which stands in
 * for the owner): collects the remote frees and gives back the spans they
 * emptied. True if the segment is now entirely free. */
static bool abandoned_settle(_ak_segment *s) {
  for (unsigned i = 0; i < AK_SEG_PAGES; i++) {
    _ak_page *pg = &s->pages[i];
    if (!pg->block_size || pg->head_off) continue;
    collect_remote(pg);
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
static void sweep_abandoned(bool force, uint64_t now) {
  if (!atomic_load_explicit(&abandoned_count, memory_order_relaxed)) return;
  /* The option's delay, not the extended one (_ak_purge_delay): exited
   * threads' segments hold few live blocks among many free pages, and a
   * program that runs threads in rounds would keep most of its memory
   * there (thread churn: 1.5x mimalloc's peak with the extended delay,
   * 1.0x with this one, at fewer page faults than mimalloc either way).
   * An adopted segment is stamped active, so its pages are not purged
   * under the thread that took it. */
  long delay = force ? 0 : atomic_load_explicit(&_ak_options[AK_OPTION_PURGE_DELAY], memory_order_relaxed);
  if (force)
    pthread_mutex_lock(&_ak_abandoned_mu);
  else if (pthread_mutex_trylock(&_ak_abandoned_mu) != 0)
    return;
  for (_ak_dnode *n = _ak_abandoned.head, *next; n; n = next) {
    next = n->next;
    _ak_segment *s = _ak_seg_at(n);
    if (abandoned_settle(s)) {
      _ak_dlist_remove(&_ak_abandoned, &s->node);
      atomic_fetch_sub_explicit(&abandoned_count, 1, memory_order_relaxed);
      _ak_segment_release(s);
    } else {
      _ak_segment_purge(s, delay, now);
    }
  }
  pthread_mutex_unlock(&_ak_abandoned_mu);
}

/* The purge tick, every 64 slow-path calls of a thread (allocations that
 * refill, frees that empty a page or come from another thread, blocks
 * above 1 KiB): decommits the free pages of this heap's quiet segments and
 * of abandoned ones, and trims the segment and large-block caches. A clock
 * read and a few compares when there is nothing to do. */
static void maybe_purge(_ak_mheap *h) {
  if ((++h->slow_calls & 63) != 0) return;
  uint64_t now = _ak_now_ms();
  long delay = _ak_purge_delay(now);
  for (_ak_dnode *n = h->segs.head; n; n = n->next) _ak_segment_purge(_ak_seg_at(n), delay, now);
  sweep_abandoned(false, now);
  _ak_segment_cache_trim(false);
  _ak_large_cache_trim(false, now);
}

void *_ak_malloc_slow(size_t n) {
  _ak_mheap *h = _ak_heap_get();
  if (!h) {
    errno = ENOMEM;
    return NULL;
  }
  maybe_purge(h);
  if (n > AK_SOLO_MIN) return n > AK_SOLO_MAX ? _ak_large_alloc(n, 16, false) : _ak_solo_alloc(h, n, false);
  unsigned cls = _ak_size_class(n);
  _ak_page *pg = page_refill(h, cls);
  if (!pg) {
    errno = ENOMEM;
    return NULL;
  }
  void *b = pg->free;
  _ak_blk_pop(pg, b, "malloc");
  _ak_used_set(pg, _ak_used(pg) + 1);
  return b;
}

/* Pushes `b` on the remote list of a page this thread does not own: one
 * CAS, no lock. The owner collects it; for an abandoned segment (owner
 * AK_OWNER_NONE) the thread that adopts it, or sweep_abandoned. */
static void remote_free(_ak_page *pg, void *b) {
  void *head = atomic_load_explicit(&pg->remote, memory_order_relaxed);
  do {
    _ak_blk_set_next(pg, b, head);
  } while (!atomic_compare_exchange_weak_explicit(&pg->remote, &head, b, memory_order_release,
                                                  memory_order_relaxed));
}

/* Walks a free list from `head` for at most the page's capacity; ends at
 * a link that leaves the page (a remote list may change under a walker
 * that does not own it: that only ends the search). */
static bool list_has(const _ak_page *pg, const void *head, const void *p) {
  size_t limit = (size_t)pg->capacity + 1;
  for (const void *b = head; b && limit--; b = _ak_blk_next(pg, b)) {
    if (b == p) return true;
    if (!_ak_blk_in(pg, b)) return false;
  }
  return false;
}

/* Hardened double-free check: `p` on the remote list, or on the local one
 * when this thread owns the page (only the owner may walk that). */
static bool on_free_list(const _ak_page *pg, const void *p, bool mine) {
  return (mine && list_has(pg, pg->free, p)) ||
         list_has(pg, atomic_load_explicit(&((_ak_page *)(uintptr_t)pg)->remote, memory_order_acquire), p);
}

/* Checks `p` (not NULL, in segment `seg`) for `call` before anything of
 * the segment is read: the segment map must know the segment, then the
 * header and page must agree that `p` starts a live block (or lies in a
 * block of a page of aligned blocks). Returns the page, or NULL for a large
 * block; otherwise one message naming the call, the pointer and the
 * reason, then abort() - in every build, as glibc's "free(): invalid
 * pointer". Huge-aligned blocks are the caller's to look up first. */
static _ak_page *block_check(const char *call, const void *p, _ak_segment *seg) {
  if (AK_UNLIKELY(!_ak_segmap_has(seg))) /* stack, static, foreign, unmapped, a large block freed */
    _ak_malloc_fatal(call, p, "invalid pointer (not from arenakit)", AK_NCLS);
  if (AK_UNLIKELY(seg->magic != AK_SEG_MAGIC))
    _ak_malloc_fatal(call, p, "invalid pointer (bad segment header)", AK_NCLS);
  if (seg->kind == AK_SEG_LARGE) {
    if ((uintptr_t)p != seg->large_block)
      _ak_malloc_fatal(call, p, "invalid pointer (inside a large block)", AK_NCLS);
    return NULL;
  }
  _ak_page *pg = _ak_page_of(seg, p);
  if (AK_UNLIKELY(!__atomic_load_n(&pg->block_size, __ATOMIC_RELAXED)))
    _ak_malloc_fatal(call, p, "invalid pointer (page not in use)", AK_NCLS);
  /* Atomic: the owner thread may be updating AK_PG_FULL in the same byte. */
  uint8_t flags = __atomic_load_n(&pg->flags, __ATOMIC_RELAXED);
  bool ok = (flags & AK_PG_ALIGNED) ? (uintptr_t)p - pg->start < pg->end - pg->start
            : (flags & AK_PG_SOLO)  ? (uintptr_t)p == pg->start
                                    : _ak_blk_is_start(pg, p);
  if (AK_UNLIKELY(!ok)) _ak_malloc_fatal(call, p, "invalid pointer (not the start of a block)", pg->cls);
  return pg;
}

size_t _ak_block_checked_size(const char *call, const void *p) {
  _ak_segment *seg = _ak_seg_of(p);
  if (((uintptr_t)p & AK_SEG_MASK) == 0 && !_ak_segmap_has(seg)) {
    size_t n = _ak_huge_aligned_size(p);
    if (n) return n;
  }
  _ak_page *pg = block_check(call, p, seg);
  if (!pg) return seg->map_size - ((uintptr_t)p - (uintptr_t)seg);
  uint32_t bs = __atomic_load_n(&pg->block_size, __ATOMIC_RELAXED);
  /* Only a page with aligned blocks holds pointers inside blocks: no
   * division otherwise (realloc asks this on every call). */
  if (!(__atomic_load_n(&pg->flags, __ATOMIC_RELAXED) & AK_PG_ALIGNED)) return bs;
  return bs - ((uintptr_t)p - pg->start) % bs;
}

void _ak_free_slow(void *p, _ak_segment *seg) {
  if (!p) return;
  if (((uintptr_t)p & AK_SEG_MASK) == 0 && !_ak_segmap_has(seg) && _ak_huge_aligned_free(p)) return;
  _ak_page *pg = block_check("free", p, seg);
  if (!pg) {
    _ak_large_free(seg);
    return;
  }
  if (__atomic_load_n(&pg->flags, __ATOMIC_RELAXED) & AK_PG_ALIGNED) {
    uintptr_t off = (uintptr_t)p - pg->start;
    p = (void *)(pg->start + off - off % pg->block_size); /* aligned interior pointer */
  }
  _ak_mheap *h = _ak_tl_heap;
  uintptr_t owner = atomic_load_explicit(&seg->owner, memory_order_relaxed);
  bool mine = h && owner == (uintptr_t)h;
  /* A free into a segment whose thread exited: this thread adopts the
   * segment (one lock per segment, not per free), so this free and the
   * ones after it are local and the pages they empty are reused or released
   * at once. It adopted the segment to settle it, not for its space: once
   * entirely free the segment goes to the spare segments for the next thread
   * (AK_SEG_RELEASE_EMPTY) instead of staying with this heap. */
  if (owner == AK_OWNER_NONE && h && abandoned_take(h, seg)) {
    seg->flags |= AK_SEG_RELEASE_EMPTY;
    segment_adopt(h, seg);
    mine = true;
  }
  if (_ak_malloc_checked) {
    /* A block already on the owner's free list is a double free (only the
     * owner may walk that list); freed blocks are filled with 0xdf after
     * the link, and malloc verifies the fill to catch writes after free. */
    if (mine)
      for (void *b = pg->free; b; b = _ak_blk_next(pg, b))
        if (b == p) _ak_malloc_fatal("free", p, "double free", pg->cls);
    if (pg->block_size > sizeof(void *))
      memset((char *)p + sizeof(void *), 0xdf, pg->block_size - sizeof(void *));
  }
  if (ak_harden_double_free && _ak_blk_looks_free(pg, p) && on_free_list(pg, p, mine))
    _ak_malloc_fatal("free", p, "double free", pg->cls);
  if (!mine) {
    remote_free(pg, p);
    return;
  }
  if (pg->flags & AK_PG_SOLO) { /* its own span: give the pages back to the segment */
    _ak_used_set(pg, 0);
    _ak_span_free(h, seg, pg);
    return;
  }
  _ak_blk_set_next(pg, p, pg->free);
  pg->free = p;
  _ak_used_set(pg, _ak_used(pg) - 1);
  _ak_page_retire(h, pg);
}

/* Collects remote frees and releases empty pages (all with force, else
 * those that are not the last page of their class). Owner only. */
static void heap_collect_pages(_ak_mheap *h, bool force) {
  for (unsigned c = 0; c < AK_NCLS; c++) {
    for (_ak_dnode *n = h->full[c].head, *next; n; n = next) {
      next = n->next;
      _ak_page *pg = _ak_page_at(n);
      if (collect_remote(pg)) {
        full_remove(h, pg);
        queue_push_front(h, pg);
      }
    }
    for (_ak_dnode *n = h->queue[c].head, *next; n; n = next) {
      next = n->next;
      _ak_page *pg = _ak_page_at(n);
      collect_remote(pg);
      if (_ak_used(pg) == 0 && (force || h->queue[c].n > 1)) page_release(h, pg);
    }
  }
  _ak_solo_collect(h); /* solo blocks other threads freed */
}

/* Collects remote frees, releases empty pages, purges (owner only; `h`
 * may be NULL: a thread without a heap), then sweeps the abandoned
 * segments. */
void _ak_heap_collect(_ak_mheap *h, bool force) {
  uint64_t now = _ak_now_ms();
  if (h) heap_collect_pages(h, force);
  for (_ak_dnode *n = h ? h->segs.head : NULL, *next; n; n = next) {
    next = n->next;
    _ak_segment *s = _ak_seg_at(n);
    if (force && s->free_mask == UINT64_MAX) {
      _ak_dlist_remove(&h->segs, &s->node);
      _ak_segment_release(s);
      continue;
    }
    _ak_segment_purge(s, force ? 0 : _ak_purge_delay(now), now);
  }
  sweep_abandoned(force, now);
}

/* Thread exit: empty pages go back, the rest is abandoned for adoption.
 * Nothing is decommitted here: a thread that comes next (or the one that
 * frees the survivors and so adopts the segment) reuses the pages as they
 * are, without a fault per page; free pages are purged after the purge
 * delay like any others (abandoned ones by sweep_abandoned), and an entirely
 * free segment becomes a spare segment, which the reclaim policy decommits and unmaps after its delays. */
static void heap_exit(void *arg) {
  _ak_mheap *h = arg;
  if (!h) return;
  heap_collect_pages(h, true);
  _ak_tl_heap = NULL; /* a later malloc in this thread makes a new heap */
  for (_ak_segment *s; (s = _ak_seg_at(_ak_dlist_pop_front(&h->segs))) != NULL;) {
    if (s->free_mask == UINT64_MAX) {
      _ak_segment_release(s);
      continue;
    }
    for (unsigned i = 0; i < AK_SEG_PAGES; i++) {
      s->pages[i].node.prev = s->pages[i].node.next = NULL; /* the heap's lists go with it */
      s->pages[i].in_queue = 0;
    }
    pthread_mutex_lock(&_ak_abandoned_mu);
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
  }
  pthread_mutex_lock(&_ak_heaps_mu);
  _ak_dlist_remove(&_ak_heap_list, &h->gnode);
  _ak_dlist_push_front(&heap_free_list, &h->gnode); /* kept for the next thread */
  pthread_mutex_unlock(&_ak_heaps_mu);
}
