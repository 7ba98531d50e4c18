/* SPDX-License-Identifier: MIT */
/* segment.c - the general heap's segments: 4 MiB aligned blocks of 64
 * pages, spans of pages for size classes, large and huge-aligned mappings,
 * and purging (decommit) of free pages. Memory comes from the OS layer. */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

#include "common/error.h"
#include "common/reclaim.h"
#include "malloc/malloc_internal.h"
#include "os/os_mem.h"

pthread_mutex_t _ak_seg_mu = PTHREAD_MUTEX_INITIALIZER;
_ak_dlist _ak_seg_list;
atomic_size_t _ak_large_count, _ak_large_bytes, _ak_committed, _ak_peak_committed;

#define AK_ALL_PAGES UINT64_MAX
#define AK_GUARD ((size_t)4096) /* hardened: guard page at the end of each span */

uint64_t _ak_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts); /* the vDSO's tick: no system call, ~5 ns */
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The purge delay in force. Free memory is decommitted once it has been
 * unused for the purge delay d (AK_PURGE_DELAY, 10 ms by default), so
 * that a program that stops using memory gives it back soon. A program
 * that frees and reuses memory in cycles a little longer than d (threads
 * that come and go every few tens of ms, a buffer freed and allocated
 * again each frame) would have it decommitted just before each reuse and
 * fault every page in again (on the thread-churn workload 1.5 GiB of
 * madvise a second, 5x glibc's page faults). So when memory is taken again
 * within AK_PURGE_EXTEND_WINDOW_MS after it was decommitted, the delay in
 * force doubles, up to AK_PURGE_EXTEND_MAX_MS; once AK_PURGE_EXTEND_WINDOW_MS
 * pass without such a refault it is d again. (A window of 4 delays missed
 * the refaults of rounds that a loaded machine stretched past it.) A program that goes idle thus
 * has its memory back within AK_PURGE_EXTEND_WINDOW_MS + AK_PURGE_EXTEND_MAX_MS
 * at worst, d after a quiet period. d <= 0 is never extended. */
#define AK_PURGE_EXTEND_MAX_MS 80
#define AK_PURGE_EXTEND_WINDOW_MS 1000u
static _Atomic long purge_extended;       /* the extended delay (ms) */
static _Atomic long purge_extended_from;  /* the option's value it extends (a new value drops it) */
static _Atomic uint64_t purge_refault_ms; /* the last refault */

long _ak_purge_delay(uint64_t now) {
  long d = atomic_load_explicit(&_ak_options[AK_OPTION_PURGE_DELAY], memory_order_relaxed);
  if (d <= 0 || atomic_load_explicit(&purge_extended_from, memory_order_relaxed) != d) return d;
  long e = atomic_load_explicit(&purge_extended, memory_order_relaxed);
  if (e > d && _ak_ms_since(now, atomic_load_explicit(&purge_refault_ms, memory_order_relaxed)) <
                   AK_PURGE_EXTEND_WINDOW_MS)
    return e;
  return d;
}

void _ak_purge_refault(uint64_t purged_ms, uint64_t now) {
  long d = atomic_load_explicit(&_ak_options[AK_OPTION_PURGE_DELAY], memory_order_relaxed);
  long cur = _ak_purge_delay(now);
  if (cur <= 0 || _ak_ms_since(now, purged_ms) >= AK_PURGE_EXTEND_WINDOW_MS)
    return; /* long after: the purge was right */
  long next = cur >= AK_PURGE_EXTEND_MAX_MS / 2 ? AK_PURGE_EXTEND_MAX_MS : 2 * cur;
  if (next < cur) next = cur; /* d above the bound: d */
  atomic_store_explicit(&purge_extended, next, memory_order_relaxed);
  atomic_store_explicit(&purge_extended_from, d, memory_order_relaxed);
  atomic_store_explicit(&purge_refault_ms, now, memory_order_relaxed);
}

static void committed_add(size_t n) {
  size_t c = atomic_fetch_add_explicit(&_ak_committed, n, memory_order_relaxed) + n;
  size_t peak = atomic_load_explicit(&_ak_peak_committed, memory_order_relaxed);
  while (c > peak && !atomic_compare_exchange_weak(&_ak_peak_committed, &peak, c)) {
  }
}

static void committed_sub(size_t n) { atomic_fetch_sub_explicit(&_ak_committed, n, memory_order_relaxed); }

bool _ak_segment_known(uintptr_t s) { return _ak_segmap_has((const void *)s); }

/* The segment map (malloc_internal.h). */
uint64_t _ak_segmap[AK_SEGMAP_WORDS];

bool _ak_segmap_set(const void *seg, bool on) {
  uintptr_t n = (uintptr_t)seg >> AK_SEG_SHIFT;
  if ((n >> 6) >= AK_SEGMAP_WORDS) {
    errno = ENOMEM; /* above the map: the kernel maps nothing there unless asked */
    return false;
  }
  uint64_t bit = UINT64_C(1) << (n & 63);
  if (on)
    __atomic_fetch_or(&_ak_segmap[n >> 6], bit, __ATOMIC_RELEASE);
  else
    __atomic_fetch_and(&_ak_segmap[n >> 6], ~bit, __ATOMIC_RELEASE);
  return true;
}

static void registry_add(_ak_segment *seg) {
  pthread_mutex_lock(&_ak_seg_mu);
  _ak_dlist_push_front(&_ak_seg_list, &seg->gnode);
  pthread_mutex_unlock(&_ak_seg_mu);
}

static void registry_remove(_ak_segment *seg) {
  pthread_mutex_lock(&_ak_seg_mu);
  _ak_dlist_remove(&_ak_seg_list, &seg->gnode);
  pthread_mutex_unlock(&_ak_seg_mu);
}

/* Empty segments are spares of the reclaim policy (common/reclaim.h), the
 * one every component uses, so that threads that come and go do not map,
 * fault in and unmap a segment each: reused newest first, their free
 * pages decommitted after the reclaim purge delay, unmapped after the
 * release delay or when more than AK_SEG_CACHE are kept (the oldest first),
 * all of them at ak_collect(true). The set's node sits in the segment
 * header, which a decommit leaves alone. Not registered with the
 * background thread (it may start from inside malloc). */
#define AK_SEG_CACHE 4
static _ak_spare_set seg_spares;
static pthread_once_t seg_spares_once = PTHREAD_ONCE_INIT;

static void segment_unmap(_ak_segment *seg) {
  committed_sub(AK_SEG_SIZE - (size_t)__builtin_popcountll(seg->decommit_mask) * AK_PAGE_SIZE);
  seg->magic = 0;
  (void)_ak_segmap_set(seg, false);
  _ak_os_free(seg, AK_SEG_SIZE);
}

static _ak_segment *seg_of_spare(_ak_spare *sp) {
  return (_ak_segment *)(void *)((char *)sp - offsetof(_ak_segment, spare));
}

/* The set's callbacks: decommit takes no lock (the purge is atomics and
 * madvise); release unmaps. */
static void spare_decommit(_ak_spare *sp, void *ctx) {
  (void)ctx;
  _ak_segment_purge(seg_of_spare(sp), 0, _ak_now_ms());
}
static void spare_release(_ak_spare *sp, void *ctx) {
  (void)ctx;
  segment_unmap(seg_of_spare(sp));
}
static const _ak_spare_ops seg_spare_ops = {spare_decommit, spare_release};
static void seg_spares_init(void) {
  _ak_spare_set_init(&seg_spares, &seg_spare_ops, NULL, AK_SEG_CACHE, AK_SPARE_TIMED);
}
static _ak_spare_set *spares(void) {
  pthread_once(&seg_spares_once, seg_spares_init);
  return &seg_spares;
}

/* The policy's step on a slow path (one clock read when nothing is due);
 * with force every spare segment is unmapped. */
void _ak_segment_cache_trim(bool force) {
  if (force)
    _ak_spare_drain(spares());
  else
    _ak_spare_tick(spares());
}

static _ak_segment *segment_new(_ak_mheap *h) {
  _ak_segment *seg = NULL;
  _ak_spare *sp = _ak_spare_take(spares(), NULL);
  if (sp) seg = seg_of_spare(sp);
  if (seg) {
    /* Reused: clear the header, keep the decommit record for accounting;
     * the other free pages are committed (dirty, purgeable). The page
     * descriptors are all free (block_size 0) and stay as they are: their
     * last class guides find_same_class. */
    uint64_t decommitted = seg->decommit_mask, guarded = seg->guard_mask;
    memset(seg, 0, offsetof(_ak_segment, pages));
    seg->decommit_mask = decommitted;
    seg->guard_mask = guarded;
    seg->dirty_mask = AK_ALL_PAGES & ~decommitted;
  } else {
    seg = _ak_os_alloc(AK_SEG_SIZE, AK_SEG_SIZE);
    if (!seg) return NULL;
    if (!_ak_segmap_set(seg, true)) {
      _ak_os_free(seg, AK_SEG_SIZE);
      errno = ENOMEM;
      return NULL;
    }
    committed_add(AK_SEG_SIZE); /* fresh mmap memory is zero: only set what is not */
  }
  seg->magic = AK_SEG_MAGIC;
  seg->kind = AK_SEG_SMALL;
  seg->active_ms = _ak_now_ms();
  atomic_store_explicit(&seg->owner, (uintptr_t)h, memory_order_relaxed);
  seg->free_mask = AK_ALL_PAGES;
  seg->first_page_start = (sizeof(_ak_segment) + 4095) & ~(size_t)4095;
  registry_add(seg);
  _ak_peak_sample(); /* the high-water mark can only have grown here */
  _ak_dlist_push_front(&h->segs, &seg->node);
  return seg;
}

void _ak_segment_release(_ak_segment *seg) {
  registry_remove(seg);
  seg->magic = 0;
  _ak_spare_put(spares(), &seg->spare, AK_SEG_SIZE); /* past the cap the oldest spare is unmapped */
}

/* Mask of `k` pages from page `at`. */
static inline uint64_t run_bits(unsigned at, unsigned k) {
  return (k == 64 ? AK_ALL_PAGES : ((UINT64_C(1) << k) - 1)) << at;
}

/* The lowest run of `k` free pages in `free_mask` starting at page `from`
 * or later, or -1: bit i of the AND of the mask shifted by 0 .. k-1 is set
 * when pages i .. i+k-1 are all free. */
static int find_run(uint64_t free_mask, unsigned k, unsigned from) {
  uint64_t starts = free_mask;
  for (unsigned j = 1; j < k && starts; j++) starts &= free_mask >> j;
  starts &= from ? ~(uint64_t)0 << from : ~(uint64_t)0;
  return starts ? (int)__builtin_ctzll(starts) : -1;
}

/* A free, still committed one-page span whose last class was `cls`, or
 * -1. Reusing it touches no more of the page than that class did before;
 * another class would carve further into it (a thread that follows
 * another with the same sizes keeps each page's resident part small). */
static int find_same_class(const _ak_segment *s, unsigned cls) {
  for (uint64_t m = s->free_mask & ~s->decommit_mask; m; m &= m - 1) {
    unsigned i = (unsigned)__builtin_ctzll(m);
    if (s->pages[i].cls == cls && s->pages[i].span == 1 && !s->pages[i].head_off) return (int)i;
  }
  return -1;
}

/* Takes pages [at, at + k) of `seg` for a span: opens hardened guards
 * inside it, updates the masks, links the pages to their head. Returns the
 * head descriptor with start/end set (end before the hardened guard) and
 * the rest of its fields for the caller to fill; NULL + errno. */
static _ak_page *span_take(_ak_mheap *h, _ak_segment *seg, unsigned at, unsigned k) {
  uint64_t bits = run_bits(at, k);
  /* Hardened: guard_mask holds the pages whose last 4 KiB is PROT_NONE. A
   * freed span keeps its guard (no system call on every free and reuse of
   * a span); guards inside the new span are opened now, and its last page
   * keeps or gets one below. */
  uint64_t last = UINT64_C(1) << (at + k - 1);
  for (uint64_t inner = seg->guard_mask & bits & ~last; inner; inner &= inner - 1) {
    unsigned i = (unsigned)__builtin_ctzll(inner);
    void *g = (char *)seg + (size_t)(i + 1) * AK_PAGE_SIZE - AK_GUARD;
    if (_ak_os_guard(g, AK_GUARD, false) != 0) {
      errno = ENOMEM;
      return NULL;
    }
    seg->guard_mask &= ~(UINT64_C(1) << i);
  }
  /* Pages that were decommitted come back on first touch: count them. */
  uint64_t now = _ak_now_ms();
  if (bits & seg->decommit_mask) {
    committed_add((size_t)__builtin_popcountll(bits & seg->decommit_mask) * AK_PAGE_SIZE);
    _ak_purge_refault(seg->purged_ms, now);
  }
  seg->active_ms = now;
  seg->free_mask &= ~bits;
  seg->dirty_mask &= ~bits;
  seg->decommit_mask &= ~bits;
  _ak_page *pg = &seg->pages[at];
  /* Relaxed atomic stores: the stats walker reads these fields from other
   * threads (under _ak_seg_mu, which the owner does not take here). */
  for (unsigned i = 1; i < k; i++) {
    __atomic_store_n(&seg->pages[at + i].head_off, (uint8_t)i, __ATOMIC_RELAXED);
    seg->pages[at + i].head = pg;
  }
  pg->head = pg;
  __atomic_store_n(&pg->head_off, (uint8_t)0, __ATOMIC_RELAXED);
  pg->span = (uint8_t)k;
  pg->flags = 0;
  pg->free = NULL;
  _ak_used_set(pg, 0);
  atomic_store_explicit(&pg->remote, NULL, memory_order_relaxed);
  uintptr_t base = (uintptr_t)seg + (uintptr_t)at * AK_PAGE_SIZE;
  pg->start = at == 0 ? (uintptr_t)seg + seg->first_page_start : base;
  pg->end = base + k * AK_PAGE_SIZE;
  pg->key = ak_harden_encode ? _ak_random_key() : 0;
  pg->node.prev = pg->node.next = NULL;
  pg->in_queue = 0;
  if (ak_harden_guards) {
    /* Hardened: the span's last 4 KiB is a guard page; blocks end before it. */
    pg->end -= AK_GUARD;
    if (!(seg->guard_mask & last)) {
      if (_ak_os_guard((void *)pg->end, AK_GUARD, true) != 0) {
        _ak_span_free(h, seg, pg);
        errno = ENOMEM;
        return NULL;
      }
      seg->guard_mask |= last;
    }
  }
  return pg;
}

_ak_page *_ak_span_alloc(_ak_mheap *h, unsigned cls) {
  unsigned k = _ak_cls_span[cls];
  _ak_segment *seg = NULL;
  int at = -1;
  if (k == 1) {
    for (_ak_dnode *n = h->segs.head; n && at < 0; n = n->next)
      if ((at = find_same_class(_ak_seg_at(n), cls)) >= 0) seg = _ak_seg_at(n);
  }
  /* Committed free pages before decommitted ones (a decommitted page
   * faults in again as it is carved, and a committed one left alone is
   * decommitted after the delay), and among those the fullest segment of
   * h's: new spans pack into segments in use, so that sparse ones (a few
   * blocks left by threads that exited) drain, empty and go back instead of
   * every segment keeping a few live spans among many free pages. */
  if (at < 0) {
    unsigned from = k == 1 ? 0 : 1, best = ~0u; /* page 0: one-page spans only */
    for (_ak_dnode *n = h->segs.head; n; n = n->next) {
      _ak_segment *s = _ak_seg_at(n);
      unsigned score = (unsigned)__builtin_popcountll(s->free_mask);
      if (score >= best) continue;
      int a = find_run(s->free_mask & ~s->decommit_mask, k, from);
      if (a < 0) {
        score += AK_SEG_PAGES; /* decommitted pages only: after any committed run */
        if (score >= best || (a = find_run(s->free_mask, k, from)) < 0) continue;
      }
      best = score;
      seg = s;
      at = a;
    }
  }
  if (!seg) {
    seg = segment_new(h);
    if (!seg) return NULL;
    at = find_run(seg->free_mask, k, k == 1 ? 0 : 1);
  }
  _ak_page *pg = span_take(h, seg, (unsigned)at, k);
  if (!pg) return NULL;
  __atomic_store_n(&pg->cls, (uint16_t)cls, __ATOMIC_RELAXED);
  __atomic_store_n(&pg->block_size, _ak_cls_size[cls], __ATOMIC_RELAXED);
  /* For _ak_blk_is_start: block_size = odd << shift, and the inverse of
   * odd mod 2^64 (Newton's iteration doubles the correct low bits from 3). */
  unsigned shift = (unsigned)__builtin_ctz(pg->block_size);
  uint64_t odd = pg->block_size >> shift, inv = odd;
  for (int i = 0; i < 5; i++) inv *= 2 - odd * inv;
  pg->blk_inv = inv;
  pg->blk_shift = (uint8_t)shift;
  pg->capacity = (uint32_t)((pg->end - pg->start) / pg->block_size);
  pg->end = pg->start + (uintptr_t)pg->capacity * pg->block_size;
  pg->bump = pg->start;
  return pg;
}

void _ak_span_free(_ak_mheap *h, _ak_segment *seg, _ak_page *pg) {
  unsigned at = (unsigned)(pg - seg->pages), k = pg->span;
  uint64_t bits = run_bits(at, k);
  __atomic_store_n(&pg->block_size, 0u, __ATOMIC_RELAXED);
  pg->free = NULL;
  pg->flags = 0;
  seg->free_mask |= bits;
  seg->dirty_mask |= bits;
  seg->active_ms = _ak_now_ms(); /* a busy segment is not purged */
  long delay = atomic_load_explicit(&_ak_options[AK_OPTION_PURGE_DELAY], memory_order_relaxed);
  if (delay == 0) _ak_segment_purge(seg, 0, seg->active_ms);
  if (seg->free_mask == AK_ALL_PAGES && h) {
    /* Keep one empty segment per heap; release any other at once, and one
     * that the heap took over only to settle frees (AK_SEG_RELEASE_EMPTY). */
    for (_ak_dnode *n = h->segs.head; n; n = n->next) {
      _ak_segment *s = _ak_seg_at(n);
      if ((s != seg && s->free_mask == AK_ALL_PAGES) || (seg->flags & AK_SEG_RELEASE_EMPTY)) {
        _ak_dlist_remove(&h->segs, &seg->node);
        _ak_segment_release(seg);
        return;
      }
    }
  }
}

/* Purge policy: the free pages of a segment are decommitted once the
 * segment has been quiet - no span taken, freed, grown or shrunk in it,
 * no adoption - for the purge delay in force (active_ms, stamped by each
 * of those), at the first purge tick after that (maybe_purge in heap.c,
 * every 64 slow-path calls of a thread; sweep_abandoned; ak_collect). So
 * the pages of a segment that a program keeps freeing and taking stay
 * committed and do not fault again, and once the program stops using the
 * segment its free pages go back at the next call that reaches a slow
 * path. */
void _ak_segment_purge(_ak_segment *seg, long delay, uint64_t now_ms) {
  if (!seg->dirty_mask || delay < 0 || _ak_ms_since(now_ms, seg->active_ms) < (uint64_t)delay) return;
  uint64_t purge = seg->dirty_mask;
  for (unsigned i = 0; i < AK_SEG_PAGES; i++) {
    if (!(purge & (UINT64_C(1) << i))) continue;
    unsigned j = i;
    while (j < AK_SEG_PAGES && (purge & (UINT64_C(1) << j))) j++;
    uintptr_t from = (uintptr_t)seg + (uintptr_t)i * AK_PAGE_SIZE;
    if (i == 0) from = (uintptr_t)seg + seg->first_page_start; /* keep the header */
    uintptr_t to = (uintptr_t)seg + (uintptr_t)j * AK_PAGE_SIZE;
    if (to > from) (void)_ak_os_decommit((void *)from, to - from);
    committed_sub((size_t)(j - i) * AK_PAGE_SIZE);
    i = j;
  }
  seg->decommit_mask |= purge;
  seg->dirty_mask &= ~purge;
  seg->purged_ms = now_ms;
}

/* ---- solo spans --------------------------------------------------------------------
 * A block above AK_SOLO_MIN is a span of its own: pages [at, at + k), at >= 1,
 * block = [start, end), block_size = end - start, used = 1, flags AK_PG_SOLO,
 * cls AK_CLS_SOLO, on no queue. Its owner frees it by freeing the span; other
 * threads push it on its remote list and the owner frees it when it
 * collects (_ak_solo_collect: before mapping a segment, ak_collect, thread
 * exit). realloc grows it into the free pages that follow it, so a buffer
 * grown step by step is copied only when its neighbour is taken. */

/* Pages of a solo span holding `n` bytes (and the hardened guard). */
/* The end of a solo block of `n` bytes starting at `start`: n rounded up
 * to 4 KiB, so that a request just above a page multiple is not handed
 * the rest of its last 64 KiB page (65,537 bytes got 131,072 usable). The
 * span's pages after the end stay untouched. */
static uintptr_t solo_end(uintptr_t start, size_t n) { return start + ((n + 4095) & ~(uintptr_t)4095); }

static unsigned solo_pages(size_t n) {
  return (unsigned)((n + (ak_harden_guards ? AK_GUARD : 0) + AK_PAGE_SIZE - 1) >> AK_PAGE_SHIFT);
}

void _ak_solo_collect(_ak_mheap *h) {
  for (_ak_dnode *n = h->segs.head, *next; n; n = next) {
    next = n->next; /* _ak_span_free may release s */
    _ak_segment *s = _ak_seg_at(n);
    for (unsigned i = 1; i < AK_SEG_PAGES; i++) {
      _ak_page *pg = &s->pages[i];
      if (pg->head_off || !(pg->flags & AK_PG_SOLO) ||
          !atomic_load_explicit(&pg->remote, memory_order_relaxed))
        continue;
      (void)atomic_exchange_explicit(&pg->remote, NULL, memory_order_acquire); /* one block: the list is it */
      _ak_used_set(pg, 0);
      bool emptied = (s->free_mask | run_bits(i, pg->span)) == AK_ALL_PAGES;
      _ak_span_free(h, s, pg);
      if (emptied) break; /* s may be released: do not touch it again */
    }
  }
}

/* The place for a solo span of k pages in h's segments: best fit, the
 * shortest run of free pages (pages 1..63) that holds it, so that long
 * runs stay whole for long blocks. Measured on realloc growth: first fit,
 * or leaving room after the block, copies less but holds more segments. */
static _ak_segment *solo_place(_ak_mheap *h, unsigned k, int *at) {
  _ak_segment *best = NULL;
  unsigned best_len = AK_SEG_PAGES + 1;
  for (_ak_dnode *n = h->segs.head; n && best_len > k; n = n->next) {
    _ak_segment *s = _ak_seg_at(n);
    for (uint64_t f = s->free_mask & ~UINT64_C(1); f;) {
      unsigned i = (unsigned)__builtin_ctzll(f);
      uint64_t rest = ~(f >> i);
      unsigned len = rest ? (unsigned)__builtin_ctzll(rest) : 64 - i; /* maximal run from i */
      if (len >= k && len < best_len) {
        best = s;
        best_len = len;
        *at = (int)i;
      }
      f &= ~run_bits(i, len);
    }
  }
  return best;
}

void *_ak_solo_alloc(_ak_mheap *h, size_t n, bool zero) {
  unsigned k = solo_pages(n);
  int at = -1;
  _ak_segment *seg = solo_place(h, k, &at);
  if (!seg) {
    _ak_solo_collect(h); /* blocks other threads freed, before mapping more */
    seg = solo_place(h, k, &at);
  }
  if (!seg && _ak_heap_adopt_for(h, k)) seg = solo_place(h, k, &at); /* exited threads' pages */
  if (!seg) {
    seg = segment_new(h);
    if (!seg) return NULL;
    at = find_run(seg->free_mask, k, 1);
  }
  uint64_t dirty = seg->dirty_mask & run_bits((unsigned)at, k); /* pages holding old data */
  _ak_page *pg = span_take(h, seg, (unsigned)at, k);
  if (!pg) return NULL;
  __atomic_store_n(&pg->cls, (uint16_t)AK_CLS_SOLO, __ATOMIC_RELAXED);
  pg->end = solo_end(pg->start, n); /* within the span (and before a hardened guard) */
  __atomic_store_n(&pg->block_size, (uint32_t)(pg->end - pg->start), __ATOMIC_RELAXED);
  pg->capacity = 1;
  pg->bump = pg->end;
  pg->flags = AK_PG_SOLO;
  _ak_used_set(pg, 1);
  if (zero) /* fresh and decommitted pages read as zero already */
    for (; dirty; dirty &= dirty - 1) {
      uintptr_t from = (uintptr_t)seg + (uintptr_t)__builtin_ctzll(dirty) * AK_PAGE_SIZE;
      uintptr_t to = from + AK_PAGE_SIZE < pg->start + n ? from + AK_PAGE_SIZE : pg->start + n;
      if (to > from) memset((void *)from, 0, to - from);
    }
  return (void *)pg->start;
}

bool _ak_solo_resize(_ak_mheap *h, _ak_segment *seg, _ak_page *pg, size_t n) {
  if (n <= AK_SOLO_MIN || n > AK_SOLO_MAX) return false;
  unsigned at = (unsigned)(pg - seg->pages), k = pg->span, want = solo_pages(n);
  size_t have = pg->end - pg->start;
  if (want == k || (want < k && n >= have / 2)) { /* the span fits, not too loose */
    if (n > have) {                               /* the block grows within its span */
      pg->end = pg->bump = solo_end(pg->start, n);
      __atomic_store_n(&pg->block_size, (uint32_t)(pg->end - pg->start), __ATOMIC_RELAXED);
    }
    return true;
  }
  if (ak_harden_guards) return false; /* the guard would have to move: copy instead */
  if (want > k) {
    if (at + want > AK_SEG_PAGES) return false;
    uint64_t more = run_bits(at + k, want - k);
    if ((seg->free_mask & more) != more) return false;
    if (more & seg->decommit_mask) {
      committed_add((size_t)__builtin_popcountll(more & seg->decommit_mask) * AK_PAGE_SIZE);
      _ak_purge_refault(seg->purged_ms, _ak_now_ms());
    }
    seg->free_mask &= ~more;
    seg->dirty_mask &= ~more;
    seg->decommit_mask &= ~more;
    for (unsigned i = k; i < want; i++) {
      __atomic_store_n(&seg->pages[at + i].head_off, (uint8_t)i, __ATOMIC_RELAXED);
      seg->pages[at + i].head = pg;
    }
  } else {
    /* Shrink: the tail pages go back as free (dirty) pages. */
    uint64_t less = run_bits(at + want, k - want);
    seg->free_mask |= less;
    seg->dirty_mask |= less;
  }
  seg->active_ms = _ak_now_ms(); /* a segment whose blocks grow or shrink is busy */
  pg->span = (uint8_t)want;
  pg->end = solo_end(pg->start, n);
  pg->bump = pg->end;
  __atomic_store_n(&pg->block_size, (uint32_t)(pg->end - pg->start), __ATOMIC_RELAXED);
  (void)h;
  return true;
}

/* ---- large and huge-aligned blocks ------------------------------------------------ */

#define AK_LARGE_HDR ((size_t)4096)

/* The large-block cache. A freed large block's mapping ([header | block],
 * the block AK_LARGE_HDR in) is kept instead of unmapped, so that a program
 * that allocates and frees blocks above AK_SOLO_MAX in a loop, or grows one by
 * realloc, reuses pages that are mapped and resident: no system call, no
 * page fault per page (glibc's adaptive mmap threshold keeps such blocks
 * in its heap likewise; a fresh mapping each time cost 4.35 s against
 * glibc's 0.05 s for 300 frees and mallocs of 5 MB). The policy, with the
 * purge delay d (AK_PURGE_DELAY, ms):
 *   reuse     a malloc takes the smallest cached mapping that holds it and
 *             is at most twice its size (the most recently freed among
 *             equals); a realloc that grows moves its pages into one
 *             (mremap onto it: no copy, the cached pages past them stay)
 *   decommit  a mapping cached for the purge delay in force (d, longer
 *             while memory is reused soon after it was decommitted:
 *             _ak_purge_delay) gives its pages back (madvise), keeping its
 *             range and its header page
 *   unmap     after AK_LCACHE_UNMAP_MS, or the oldest first when the cache
 *             would pass AK_LCACHE_SLOTS mappings or AK_LCACHE_BYTES; all of
 *             them before a fresh mapping is retried after ENOMEM, and at
 *             ak_collect(true)
 *   d == 0: nothing is cached (unmapped at once); d < 0: never decommitted.
 * A cached mapping is no block: its segment-map bit is cleared and its
 * magic zeroed, so free, realloc and malloc_usable_size of it end in the
 * "not from arenakit" message like any freed large block; the kernel puts
 * nothing else in its range while it is mapped, so the bit is set again
 * when the mapping is reused. Committed bytes (stats) count a cached
 * mapping until it is decommitted. lcache_mu is a leaf lock (nothing is
 * taken under it); the system calls that unmap run after it is released. */
#define AK_LCACHE_SLOTS 16
#define AK_LCACHE_BYTES ((size_t)256 << 20)
#define AK_LCACHE_UNMAP_MS 1000u
typedef struct lcache_entry {
  _ak_segment *seg;
  size_t size;        /* bytes mapped */
  uint64_t freed_ms;  /* when it was freed */
  uint64_t purged_ms; /* when it was decommitted */
  bool decommitted;   /* pages past the header given back */
} lcache_entry;
static pthread_mutex_t lcache_mu = PTHREAD_MUTEX_INITIALIZER;
static lcache_entry lcache[AK_LCACHE_SLOTS];
static _Atomic int lcache_n; /* atomic: peeked at without lcache_mu */
static size_t lcache_bytes;

static long purge_delay(void) {
  return atomic_load_explicit(&_ak_options[AK_OPTION_PURGE_DELAY], memory_order_relaxed);
}

/* Removes entry i (under lcache_mu); returns it. */
static lcache_entry lcache_remove(int i) {
  lcache_entry e = lcache[i];
  lcache[i] = lcache[--lcache_n];
  lcache_bytes -= e.size;
  return e;
}

/* Unmaps a mapping taken out of the cache (no lock held). */
static void lcache_unmap(const lcache_entry *e) {
  committed_sub(e->decommitted ? AK_LARGE_HDR : e->size);
  _ak_os_free(e->seg, e->size);
}

/* Decommits the entries cached for the purge delay and unmaps those past
 * AK_LCACHE_UNMAP_MS (all with `force`). */
void _ak_large_cache_trim(bool force, uint64_t now) {
  lcache_entry out[AK_LCACHE_SLOTS];
  int nout = 0;
  if (!force && !atomic_load_explicit(&lcache_n, memory_order_relaxed))
    return; /* racy peek: no lock when empty */
  long delay = _ak_purge_delay(now);
  pthread_mutex_lock(&lcache_mu);
  for (int i = 0; i < lcache_n;) {
    lcache_entry *e = &lcache[i];
    uint64_t age = _ak_ms_since(now, e->freed_ms);
    if (force || age >= AK_LCACHE_UNMAP_MS) {
      out[nout++] = lcache_remove(i);
      continue;
    }
    if (!e->decommitted && delay >= 0 && age >= (uint64_t)delay) {
      (void)_ak_os_decommit((char *)e->seg + AK_LARGE_HDR, e->size - AK_LARGE_HDR);
      committed_sub(e->size - AK_LARGE_HDR);
      e->decommitted = true;
      e->purged_ms = now;
    }
    i++;
  }
  pthread_mutex_unlock(&lcache_mu);
  for (int i = 0; i < nout; i++) lcache_unmap(&out[i]);
}

/* Takes the best cached mapping for `need` bytes (need .. 2 x need, the
 * smallest, the most recently freed among equals) out of the cache: its
 * size in *size, whether its pages still hold old data in *dirty; the
 * mapping counts as committed again. NULL if none fits. */
static _ak_segment *lcache_take(size_t need, size_t *size, bool *dirty) {
  if (!atomic_load_explicit(&lcache_n, memory_order_relaxed))
    return NULL; /* a racy peek: the common case costs no lock */
  pthread_mutex_lock(&lcache_mu);
  int best = -1;
  for (int i = 0; i < lcache_n; i++) {
    size_t sz = lcache[i].size;
    if (sz < need || sz / 2 > need) continue;
    if (best < 0 || sz < lcache[best].size ||
        (sz == lcache[best].size && lcache[i].freed_ms > lcache[best].freed_ms))
      best = i;
  }
  lcache_entry e = {NULL, 0, 0, 0, false};
  if (best >= 0) e = lcache_remove(best);
  pthread_mutex_unlock(&lcache_mu);
  if (!e.seg) return NULL;
  if (e.decommitted) { /* faulted in again as it is used */
    committed_add(e.size - AK_LARGE_HDR);
    _ak_purge_refault(e.purged_ms, _ak_now_ms());
  }
  *size = e.size;
  *dirty = !e.decommitted;
  return e.seg;
}

/* Puts the mapping of a freed large block (segment-map bit cleared, magic
 * zeroed, still counted as committed) into the cache, or unmaps it. */
static void lcache_put(_ak_segment *seg, size_t size) {
  long delay = purge_delay();
  uint64_t now = _ak_now_ms();
  lcache_entry out[AK_LCACHE_SLOTS + 1];
  int nout = 0;
  if (delay == 0 || size > AK_LCACHE_BYTES) {
    out[nout++] = (lcache_entry){seg, size, now, 0, false};
  } else {
    pthread_mutex_lock(&lcache_mu);
    while (lcache_n == AK_LCACHE_SLOTS || lcache_bytes + size > AK_LCACHE_BYTES) { /* room: the oldest go */
      int old = 0;
      for (int i = 1; i < lcache_n; i++)
        if (lcache[i].freed_ms < lcache[old].freed_ms) old = i;
      out[nout++] = lcache_remove(old);
    }
    lcache[lcache_n++] = (lcache_entry){seg, size, now, 0, false};
    lcache_bytes += size;
    pthread_mutex_unlock(&lcache_mu);
  }
  for (int i = 0; i < nout; i++) lcache_unmap(&out[i]);
  _ak_large_cache_trim(false, now);
}

/* Makes `seg` (mapping of `map` bytes, block `off` in) a live large block. */
static void *large_setup(_ak_segment *seg, size_t map, size_t off) {
  seg->magic = AK_SEG_MAGIC;
  seg->kind = AK_SEG_LARGE;
  seg->map_size = map;
  seg->large_block = (uintptr_t)seg + off;
  atomic_store_explicit(&seg->owner, AK_OWNER_NONE, memory_order_relaxed); /* no free fast path */
  registry_add(seg);
  atomic_fetch_add_explicit(&_ak_large_count, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&_ak_large_bytes, map, memory_order_relaxed);
  _ak_peak_note_large();
  return (void *)seg->large_block;
}

void *_ak_large_alloc(size_t n, size_t align, bool zero) {
  /* At least one byte: the mapping must contain the block's address (a
   * zero-byte block at `align` >= 4 MiB would sit one past the mapping's
   * end, where another segment may be mapped, and its usable size, 0,
   * would read as "not a huge-aligned block"). */
  if (n == 0) n = 1;
  size_t off = AK_LARGE_HDR;
  if (align > AK_LARGE_HDR) off = align;
  if (n > SIZE_MAX - off - AK_SEG_SIZE) {
    errno = ENOMEM;
    return NULL;
  }
  size_t map = _ak_os_round_page(off + n);
  if (off == AK_LARGE_HDR) {
    size_t size;
    bool dirty;
    _ak_segment *seg = lcache_take(map, &size, &dirty);
    if (seg) {
      (void)_ak_segmap_set(seg, true); /* it was set for this address before: covered */
      if (zero && dirty) memset((char *)seg + off, 0, n);
      return large_setup(seg, size, off);
    }
  }
  /* The header precedes the block within the same 4 MiB, so masking finds
   * it; with align >= 4 MiB that is impossible and the block goes through
   * the huge-aligned registry instead. */
  size_t seg_align = align >= AK_SEG_SIZE ? align : AK_SEG_SIZE;
  _ak_segment *seg = _ak_os_alloc(map, seg_align);
  if (!seg && errno == ENOMEM && atomic_load_explicit(&lcache_n, memory_order_relaxed)) {
    _ak_large_cache_trim(true, 0); /* what the cache holds may be what the system lacks */
    seg = _ak_os_alloc(map, seg_align);
  }
  if (!seg) return NULL;
  if (!_ak_segmap_set(seg, true)) {
    _ak_os_free(seg, map);
    errno = ENOMEM;
    return NULL;
  }
  committed_add(map);
  return large_setup(seg, map, off); /* fresh mapping: zero */
}

void _ak_large_free(_ak_segment *seg) {
  registry_remove(seg);
  atomic_fetch_sub_explicit(&_ak_large_count, 1, memory_order_relaxed);
  atomic_fetch_sub_explicit(&_ak_large_bytes, seg->map_size, memory_order_relaxed);
  seg->magic = 0;
  (void)_ak_segmap_set(seg, false);
  if (seg->large_block - (uintptr_t)seg == AK_LARGE_HDR) {
    lcache_put(seg, seg->map_size);
  } else { /* aligned past the header (rare): not reused */
    committed_sub(seg->map_size);
    _ak_os_free(seg, seg->map_size);
  }
}

/* A growing large block `seg` (old bytes mapped) moved into a cached
 * mapping of at least `map` bytes: its pages go over the start of that
 * mapping, whose later pages are resident already. NULL if none fits. */
static _ak_segment *large_grow_cached(_ak_segment *seg, size_t old, size_t map) {
  size_t size;
  bool dirty;
  _ak_segment *to = lcache_take(map, &size, &dirty);
  if (!to) return NULL;
  if (_ak_os_move_into(seg, old, to) != 0) {
    lcache_put(to, size); /* still as it was */
    return NULL;
  }
  committed_sub(old); /* the pages moved replace as many of the cached mapping's */
  to->map_size = size;
  return to;
}

void *_ak_large_realloc(_ak_segment *seg, void *p, size_t n) {
  size_t off = (uintptr_t)p - (uintptr_t)seg;
  if (n > SIZE_MAX - off - AK_SEG_SIZE) {
    errno = ENOMEM;
    return NULL;
  }
  size_t map = _ak_os_round_page(off + n);
  /* Fits and is not too loose (a mapping from the cache may be up to
   * twice what was asked): stays. */
  if (map <= seg->map_size && map >= seg->map_size / 2) return p;
  size_t old = seg->map_size;
  registry_remove(seg); /* it may move */
  /* The map's bit is cleared before the remap and set again after, where
   * the block now is: once mremap has moved it, another thread may map a
   * new segment at the old address and set that bit, which a clear after
   * the remap would undo (mremap moves below the map's limit, as every
   * mapping the kernel places without a hint above it). */
  (void)_ak_segmap_set(seg, false);
  _ak_segment *ns = map > old && off == AK_LARGE_HDR ? large_grow_cached(seg, old, map) : NULL;
  if (ns) {
    map = ns->map_size;
  } else {
    ns = _ak_os_remap(seg, old, map, AK_SEG_SIZE);
    if (ns) {
      if (map > old)
        committed_add(map - old);
      else
        committed_sub(old - map);
    }
  }
  (void)_ak_segmap_set(ns ? ns : seg, true);
  registry_add(ns ? ns : seg);
  if (!ns) return NULL;
  ns->map_size = map;
  ns->large_block = (uintptr_t)ns + off;
  if (map > old)
    atomic_fetch_add_explicit(&_ak_large_bytes, map - old, memory_order_relaxed);
  else
    atomic_fetch_sub_explicit(&_ak_large_bytes, old - map, memory_order_relaxed);
  _ak_peak_note_large();
  return (void *)ns->large_block;
}

/* Huge-aligned blocks: mapping at B (aligned to `align` >= 4 MiB), header
 * at B, block at B + align. The block masks to itself, so free() looks it
 * up here whenever a pointer sits on a 4 MiB boundary. The registry is an
 * array of (block, header) sorted by block address, found by binary search
 * and grown by doubling (memory from the OS layer, never from malloc;
 * unmapped once empty): no limit on the number of live blocks. Under huge_mu, a leaf lock (nothing
 * else is taken under it). */
typedef struct huge_entry {
  uintptr_t block;
  _ak_segment *seg;
} huge_entry;
static pthread_mutex_t huge_mu = PTHREAD_MUTEX_INITIALIZER;
static huge_entry *huge;        /* sorted by block */
static size_t huge_n, huge_cap; /* entries used, entries mapped */

/* Index of the first entry with block >= b (under huge_mu). */
static size_t huge_find(uintptr_t b) {
  size_t lo = 0, hi = huge_n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (huge[mid].block < b)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

bool _ak_huge_aligned_free(void *p) {
  _ak_segment *seg = NULL;
  pthread_mutex_lock(&huge_mu);
  size_t i = huge_find((uintptr_t)p);
  if (i < huge_n && huge[i].block == (uintptr_t)p) {
    seg = huge[i].seg;
    memmove(&huge[i], &huge[i + 1], (huge_n - i - 1) * sizeof huge[0]);
    if (--huge_n == 0) { /* empty: the array goes back too, nothing stays mapped */
      _ak_os_free(huge, huge_cap * sizeof *huge);
      huge = NULL;
      huge_cap = 0;
    }
  }
  pthread_mutex_unlock(&huge_mu);
  if (seg) _ak_large_free(seg);
  return seg != NULL;
}

size_t _ak_huge_aligned_size(const void *p) {
  size_t n = 0;
  pthread_mutex_lock(&huge_mu);
  size_t i = huge_find((uintptr_t)p);
  if (i < huge_n && huge[i].block == (uintptr_t)p)
    n = huge[i].seg->map_size - ((uintptr_t)p - (uintptr_t)huge[i].seg);
  pthread_mutex_unlock(&huge_mu);
  return n;
}

/* Room for one more entry (under huge_mu): doubles the array. */
static bool huge_reserve(void) {
  if (huge_n < huge_cap) return true;
  size_t cap = huge_cap ? 2 * huge_cap : 4096 / sizeof(huge_entry);
  huge_entry *a = _ak_os_alloc(cap * sizeof *a, 1);
  if (!a) return false;
  if (huge_n) memcpy(a, huge, huge_n * sizeof *a);
  if (huge) _ak_os_free(huge, huge_cap * sizeof *huge);
  huge = a;
  huge_cap = cap;
  return true;
}

void *_ak_huge_aligned_alloc(size_t n, size_t align);
void *_ak_huge_aligned_alloc(size_t n, size_t align) {
  void *p = _ak_large_alloc(n, align, false);
  if (!p) return NULL;
  _ak_segment *seg = (_ak_segment *)((uintptr_t)p - align); /* the block sits `align` in */
  pthread_mutex_lock(&huge_mu);
  bool ok = huge_reserve();
  if (ok) {
    size_t i = huge_find((uintptr_t)p);
    memmove(&huge[i + 1], &huge[i], (huge_n - i) * sizeof huge[0]);
    huge[i].block = (uintptr_t)p;
    huge[i].seg = seg;
    huge_n++;
  }
  pthread_mutex_unlock(&huge_mu);
  if (ok) return p;
  int e = errno;
  _ak_large_free(seg);
  errno = e;
  return NULL;
}

/* fork() (heap.c's handlers, which give the order of every malloc lock):
 * the spare segments' set lock, the huge-aligned registry's, then the
 * large cache's. The child, where the forking thread holds the set's lock,
 * releases it. */
void _ak_segment_fork_prepare(void) {
  _ak_spare_set_lock(spares());
  pthread_mutex_lock(&huge_mu);
  pthread_mutex_lock(&lcache_mu);
}

void _ak_segment_fork_parent(void) {
  pthread_mutex_unlock(&lcache_mu);
  pthread_mutex_unlock(&huge_mu);
  _ak_spare_set_unlock(&seg_spares);
}

void _ak_segment_fork_child(void) {
  pthread_mutex_init(&lcache_mu, NULL);
  pthread_mutex_init(&huge_mu, NULL);
  _ak_spare_set_unlock(&seg_spares);
}
