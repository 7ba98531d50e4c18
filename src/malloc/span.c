/* SPDX-License-Identifier: MIT */
/* span.c - spans: runs of 1..32 pages of a segment serving one size class
 * (placement, taking the pages, the per-span block geometry, giving them
 * back) and solo spans (one block of whole pages above AK_SOLO_MIN, grown
 * and shrunk in place). Below the pages (page.c) and above the segments
 * (segment.c): a span freed here goes back to its segment's free pages,
 * and a segment whose pages are all free is released from here. A segment
 * that cannot be mapped for want of memory is retried once the large-block
 * cache (large.c) gave its mappings back. */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "common/error.h"
#include "malloc/malloc_internal.h"
#include "os/os_mem.h"

/* Hardened: the guard at the end of each span, one system page (0: no
 * guards). A system page above a quarter of AK_PAGE_SIZE (64 KiB pages on
 * some aarch64 systems) would take too much of a one-page span: spans
 * then get no guard, as pool slabs under four system pages do. */
static size_t span_guard(void) {
  size_t ps = _ak_os_page_size();
  return ak_harden_guards && ps <= AK_PAGE_SIZE / 4 ? ps : 0;
}

/* A segment for `h` (_ak_segment_new: a spare one, else a fresh mapping).
 * When the system has no memory for a mapping, the large-block cache's
 * mappings go back first (they may be what it lacks) and it is asked once
 * more. NULL + errno. */
static _ak_segment *segment_new(_ak_mheap *h) {
  _ak_segment *seg = _ak_segment_new(h);
  if (!seg && errno == ENOMEM) {
    _ak_large_cache_trim(true, 0);
    seg = _ak_segment_new(h);
  }
  return seg;
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

/* The lowest run of `k` free pages of `s` from page `from` in the
 * cheapest tier that has one (`*tier`): 0 dirty (held data, committed), 1
 * never touched, 2 decommitted; the last two fault in as they are carved.
 * -1 if none. */
static int find_cheapest_run(const _ak_segment *s, unsigned k, unsigned from, unsigned *tier) {
  const uint64_t tiers[3] = {s->dirty_mask, s->free_mask & ~s->decommit_mask, s->free_mask};
  for (*tier = 0; *tier < 3; ++*tier) {
    int a = find_run(tiers[*tier], k, from);
    if (a >= 0) return a;
  }
  return -1;
}

/* A free, still committed one-page span whose last class was `cls`, or
 * -1. Reusing it touches no more of the page than that class did before;
 * another class would carve further into it (a thread that follows
 * another with the same sizes keeps each page's resident part small). */
static int find_same_class(const _ak_segment *s, unsigned cls) {
  /* Never-carved pages have no class to match (and no header line to read). */
  for (uint64_t m = s->free_mask & ~s->decommit_mask & s->carved_mask; m; m &= m - 1) {
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
  uint64_t bits = _ak_run_bits(at, k);
  /* A span: 1..32 pages (63 for a solo span) within the segment, all free
   * (page 0 only as a one-page span: the header is at its start). */
  AK_ASSERT(k >= 1 && at + k <= AK_SEG_PAGES && (seg->free_mask & bits) == bits && (at > 0 || k == 1));
  /* Hardened: guard_mask holds the pages whose last system page (the
   * guard, span_guard()) is PROT_NONE. A
   * freed span keeps its guard (no system call on every free and reuse of
   * a span); guards inside the new span are opened now, and its last page
   * keeps or gets one below. */
  uint64_t last = UINT64_C(1) << (at + k - 1);
  size_t guard = span_guard();
  for (uint64_t inner = seg->guard_mask & bits & ~last; inner; inner &= inner - 1) {
    unsigned i = (unsigned)__builtin_ctzll(inner);
    void *g = (char *)seg + (size_t)(i + 1) * AK_PAGE_SIZE - guard;
    if (_ak_os_guard(g, guard, false) != 0) {
      errno = ENOMEM;
      return NULL;
    }
    seg->guard_mask &= ~(UINT64_C(1) << i);
  }
  /* Pages that were decommitted come back on first touch: count them. */
  uint64_t now = _ak_reclaim_now();
  if (bits & seg->decommit_mask) {
    _ak_committed_add((size_t)__builtin_popcountll(bits & seg->decommit_mask) * AK_PAGE_SIZE);
    _ak_reclaim_page_refault(seg->purged_ms, now);
  }
  seg->active_ms = now;
  seg->free_mask &= ~bits;
  seg->dirty_mask &= ~bits;
  seg->decommit_mask &= ~bits;
  _ak_seg_carve(seg, bits); /* before the walkers may read the descriptors */
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
  if (guard) {
    /* Hardened: the span's last system page is a guard; blocks end before it. */
    pg->end -= guard;
    if (!(seg->guard_mask & last)) {
      if (_ak_os_guard((void *)pg->end, guard, true) != 0) {
        _ak_span_free(h, seg, pg);
        errno = ENOMEM;
        return NULL;
      }
      seg->guard_mask |= last;
    }
  }
  return pg;
}

/* _ak_span_alloc under h's segment lock. */
static _ak_page *span_alloc(_ak_mheap *h, unsigned cls) {
  unsigned k = _ak_cls_span[cls];
  _ak_segment *seg = NULL;
  int at = -1;
  if (k == 1) {
    for (_ak_dnode *n = h->segs.head; n && at < 0; n = n->next)
      if ((at = find_same_class(_ak_seg_at(n), cls)) >= 0) seg = _ak_seg_at(n);
  }
  /* Pages that held data and are still committed (dirty) first, then a
   * spare segment's dirty pages, then pages never touched, then
   * decommitted ones: a page that never held data, or was decommitted,
   * faults in as it is carved, while a dirty one is resident already (and
   * left alone, is decommitted after the delay). Within a tier the fullest
   * segment of h's: new spans pack into segments in use, so that sparse
   * ones (a few blocks left by threads that exited) drain, empty and go
   * back instead of every segment keeping a few live spans among many free
   * pages. */
  unsigned from = k == 1 ? 0 : 1, tier; /* page 0: one-page spans only */
  if (at < 0) {
    unsigned best = ~0u; /* tier * 65 + free pages: 0..64 dirty, 65.. untouched, 130.. decommitted */
    for (_ak_dnode *n = h->segs.head; n; n = n->next) {
      _ak_segment *s = _ak_seg_at(n);
      unsigned nfree = (unsigned)__builtin_popcountll(s->free_mask);
      if (nfree >= best) continue;
      int a = find_cheapest_run(s, k, from, &tier);
      unsigned score = tier * (unsigned)(AK_SEG_PAGES + 1) + nfree;
      if (a < 0 || score >= best) continue;
      best = score;
      seg = s;
      at = a;
    }
    if (best > AK_SEG_PAGES && _ak_segment_hot_spare()) seg = NULL; /* no dirty run: a spare's */
  }
  if (!seg) {
    seg = segment_new(h); /* a spare (committed ones first), else a fresh mapping */
    if (!seg) return NULL;
    at = find_cheapest_run(seg, k, from, &tier);
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
  /* Span bounds: the blocks lie after the header and inside the span's
   * pages (before a hardened guard). */
  AK_ASSERT(pg->capacity >= 1 && pg->start >= (uintptr_t)seg + seg->first_page_start &&
            pg->end <= (uintptr_t)seg + (uintptr_t)(at + k) * AK_PAGE_SIZE);
  AK_ASSERT(_ak_segment_validate(seg, "span_alloc") && _ak_page_validate(pg, "span_alloc"));
  return pg;
}

_ak_page *_ak_span_alloc(_ak_mheap *h, unsigned cls) {
  _ak_heap_seg_enter(h);
  _ak_page *pg = span_alloc(h, cls);
  _ak_heap_seg_leave(h);
  return pg;
}

/* _ak_span_free under h's segment lock (h NULL: under _ak_abandoned_mu). */
static void span_free(_ak_mheap *h, _ak_segment *seg, _ak_page *pg) {
  unsigned at = (unsigned)(pg - seg->pages), k = pg->span;
  uint64_t bits = _ak_run_bits(at, k);
  /* A span head in use, on no list, whose pages are all taken. */
  AK_ASSERT(pg->head_off == 0 && pg->in_queue == 0 && !_ak_dnode_linked(&pg->node));
  AK_ASSERT(at + k <= AK_SEG_PAGES && (seg->free_mask & bits) == 0);
  __atomic_store_n(&pg->block_size, 0u, __ATOMIC_RELAXED);
  pg->free = NULL;
  pg->flags = 0;
  seg->free_mask |= bits;
  seg->dirty_mask |= bits;
  AK_ASSERT(_ak_segment_validate(seg, "span_free"));
  seg->active_ms = _ak_reclaim_now(); /* a busy segment is not purged */
  long delay = ak_reclaim_get_page_delay();
  if (delay == 0) (void)_ak_segment_purge(seg, 0, seg->active_ms);
  if (seg->free_mask == AK_ALL_PAGES && h) {
    /* Keep one empty segment per heap; release any other at once. */
    for (_ak_dnode *n = h->segs.head; n; n = n->next) {
      _ak_segment *s = _ak_seg_at(n);
      if (s != seg && s->free_mask == AK_ALL_PAGES) {
        _ak_dlist_remove(&h->segs, &seg->node);
        _ak_segment_release(seg);
        return;
      }
    }
  }
}

void _ak_span_free(_ak_mheap *h, _ak_segment *seg, _ak_page *pg) {
  if (!h) {
    span_free(NULL, seg, pg);
    return;
  }
  _ak_heap_seg_enter(h);
  span_free(h, seg, pg);
  _ak_heap_seg_leave(h);
  _ak_reclaim_wake(); /* free pages wait the purge delay: the background thread gives them back if h goes
                         quiet */
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
 * to a grain, so that a request just above a page multiple is not handed
 * the rest of its last 64 KiB page (65,537 bytes got 131,072 usable). The
 * span's pages after the end stay untouched. */
static uintptr_t solo_end(uintptr_t start, size_t n) { return start + AK_GRAIN_UP(n); }

unsigned _ak_solo_pages(size_t n) {
  return (unsigned)((n + span_guard() + AK_PAGE_SIZE - 1) >> AK_PAGE_SHIFT);
}

void _ak_solo_collect(_ak_mheap *h) {
  _ak_heap_seg_enter(h);
  for (_ak_dnode *n = h->segs.head, *next; n; n = next) {
    next = n->next; /* _ak_span_free may release s */
    _ak_segment *s = _ak_seg_at(n);
    for (uint64_t m = s->carved_mask & ~UINT64_C(1); m; m &= m - 1) { /* a solo span is never page 0 */
      unsigned i = (unsigned)__builtin_ctzll(m);
      _ak_page *pg = &s->pages[i];
      if (pg->head_off || !(pg->flags & AK_PG_SOLO) ||
          !atomic_load_explicit(&pg->remote, memory_order_relaxed))
        continue;
      (void)atomic_exchange_explicit(&pg->remote, NULL, memory_order_acquire); /* one block: the list is it */
      _ak_used_set(pg, 0);
      bool emptied = (s->free_mask | _ak_run_bits(i, pg->span)) == AK_ALL_PAGES;
      _ak_span_free(h, s, pg);
      if (emptied) break; /* s may be released: do not touch it again */
    }
  }
  _ak_heap_seg_leave(h);
}

/* The place for a solo span of k pages in h's segments: best fit, the
 * shortest run of free pages (pages 1..63) that holds it, so that long
 * runs stay whole for long blocks (first fit, or leaving room after the
 * block, copies less on realloc growth but holds more segments). A place
 * whose pages are all committed comes before any with a decommitted page,
 * as for class spans: the decommitted ones would fault in again as the
 * block is written (realloc growth would take the long decommitted run
 * of a quiet segment). */
_ak_segment *_ak_solo_place(_ak_mheap *h, unsigned k, int *at) {
  _ak_segment *best = NULL;
  unsigned best_score = 2 * AK_SEG_PAGES + 1; /* the run's length, + AK_SEG_PAGES if decommitted */
  for (_ak_dnode *n = h->segs.head; n && best_score > k; n = n->next) {
    _ak_segment *s = _ak_seg_at(n);
    for (uint64_t f = s->free_mask & ~UINT64_C(1); f;) {
      unsigned i = (unsigned)__builtin_ctzll(f);
      uint64_t rest = ~(f >> i);
      unsigned len = rest ? (unsigned)__builtin_ctzll(rest) : 64 - i; /* maximal run from i */
      unsigned score = len >= k && (s->decommit_mask & _ak_run_bits(i, k)) ? len + AK_SEG_PAGES : len;
      if (len >= k && score < best_score) {
        best = s;
        best_score = score;
        *at = (int)i;
      }
      f &= ~_ak_run_bits(i, len);
    }
  }
  return best;
}

void *_ak_solo_take(_ak_mheap *h, _ak_segment *seg, int at, size_t n, bool zero) {
  unsigned k = _ak_solo_pages(n);
  _ak_heap_seg_enter(h);
  if (!seg) {
    seg = segment_new(h);
    if (!seg) {
      _ak_heap_seg_leave(h);
      return NULL;
    }
    at = find_run(seg->free_mask, k, 1);
  }
  uint64_t dirty = seg->dirty_mask & _ak_run_bits((unsigned)at, k); /* pages holding old data */
  _ak_page *pg = span_take(h, seg, (unsigned)at, k);
  if (!pg) {
    _ak_heap_seg_leave(h);
    return NULL;
  }
  /* Under the lock: a purge pass (another thread) checks the segment. */
  __atomic_store_n(&pg->cls, (uint16_t)AK_CLS_SOLO, __ATOMIC_RELAXED);
  pg->end = solo_end(pg->start, n); /* within the span (and before a hardened guard) */
  __atomic_store_n(&pg->block_size, (uint32_t)(pg->end - pg->start), __ATOMIC_RELAXED);
  pg->capacity = 1;
  pg->bump = pg->end;
  pg->flags = AK_PG_SOLO;
  _ak_used_set(pg, 1);
  AK_ASSERT(_ak_segment_validate(seg, "_ak_solo_take") && _ak_page_validate(pg, "_ak_solo_take"));
  _ak_heap_seg_leave(h);
  if (zero) /* fresh and decommitted pages read as zero already */
    for (; dirty; dirty &= dirty - 1) {
      uintptr_t from = (uintptr_t)seg + (uintptr_t)__builtin_ctzll(dirty) * AK_PAGE_SIZE;
      uintptr_t to = from + AK_PAGE_SIZE < pg->start + n ? from + AK_PAGE_SIZE : pg->start + n;
      if (to > from) memset((void *)from, 0, to - from);
    }
  return (void *)pg->start;
}

/* _ak_solo_resize under h's segment lock. */
static bool solo_resize(_ak_segment *seg, _ak_page *pg, size_t n) {
  if (n <= AK_SOLO_MIN || n > AK_SOLO_MAX) return false;
  unsigned at = (unsigned)(pg - seg->pages), k = pg->span, want = _ak_solo_pages(n);
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
    uint64_t more = _ak_run_bits(at + k, want - k);
    if ((seg->free_mask & more) != more) return false;
    if (more & seg->decommit_mask) {
      _ak_committed_add((size_t)__builtin_popcountll(more & seg->decommit_mask) * AK_PAGE_SIZE);
      _ak_reclaim_page_refault(seg->purged_ms, _ak_reclaim_now());
    }
    seg->free_mask &= ~more;
    seg->dirty_mask &= ~more;
    seg->decommit_mask &= ~more;
    _ak_seg_carve(seg, more);
    for (unsigned i = k; i < want; i++) {
      __atomic_store_n(&seg->pages[at + i].head_off, (uint8_t)i, __ATOMIC_RELAXED);
      seg->pages[at + i].head = pg;
    }
  } else {
    /* Shrink: the tail pages go back as free (dirty) pages. */
    uint64_t less = _ak_run_bits(at + want, k - want);
    seg->free_mask |= less;
    seg->dirty_mask |= less;
  }
  seg->active_ms = _ak_reclaim_now(); /* a segment whose blocks grow or shrink is busy */
  pg->span = (uint8_t)want;
  pg->end = solo_end(pg->start, n);
  pg->bump = pg->end;
  __atomic_store_n(&pg->block_size, (uint32_t)(pg->end - pg->start), __ATOMIC_RELAXED);
  return true;
}

bool _ak_solo_resize(_ak_mheap *h, _ak_segment *seg, _ak_page *pg, size_t n) {
  _ak_heap_seg_enter(h);
  bool done = solo_resize(seg, pg, n);
  _ak_heap_seg_leave(h);
  return done;
}
