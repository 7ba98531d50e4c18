/* SPDX-License-Identifier: MIT */
/* page.c - the pages of a thread heap and their blocks: a page here is a
 * span of one size class as its owner sees it (free list, remote list,
 * never-carved tail), on its class queue or full list. Checking a block
 * (segment map, header, block start), freeing it (local push, remote CAS
 * push, double-free searches), collecting remote frees, carving, finding a
 * page with a free block, retiring an empty page to its span; a bad block
 * ends the process through _ak_malloc_fatal (fatal.c). Called by heap.c and
 * alloc.c; calls span.c, large.c and segment.c, never heap.c. */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "malloc/malloc_internal.h"

_ak_page _ak_empty_page; /* free == NULL: every empty class points here */

/* ---- class queues and full lists --------------------------------------------------- */

/* The fast path's view of class `cls`: the first page of its queue, or
 * the sentinel when the queue is empty. */
static void queue_sync(_ak_mheap *h, unsigned cls) {
  _ak_page *first = _ak_page_at(h->queue[cls].head);
  h->pages[cls] = first ? first : &_ak_empty_page;
}

static void queue_push_front(_ak_mheap *h, _ak_page *pg) {
  /* On no list; a class span: its blocks are its class's size. */
  AK_ASSERT(pg->in_queue == 0 && pg->cls < AK_NCLS && pg->block_size == _ak_cls_size[pg->cls]);
  _ak_dlist_push_front(&h->queue[pg->cls], &pg->node);
  h->pages[pg->cls] = pg;
  pg->in_queue = 1;
}

static void queue_remove(_ak_mheap *h, _ak_page *pg) {
  AK_ASSERT(pg->in_queue == 1 && h->pages[pg->cls] != &_ak_empty_page);
  _ak_dlist_remove(&h->queue[pg->cls], &pg->node);
  queue_sync(h, pg->cls);
  pg->in_queue = 0;
}

/* Appends `pg` to its class's full list, which runs oldest first: the
 * pages at its head have had longest for frees to refill them. */
static void full_push(_ak_mheap *h, _ak_page *pg) {
  /* Full: nothing left to carve (frees may have refilled the free list
   * of a page that page_take_full puts back). */
  AK_ASSERT(pg->in_queue == 0 && pg->bump >= pg->end);
  _ak_dlist_push_back(&h->full[pg->cls], &pg->node);
  pg->in_queue = 2;
  __atomic_fetch_or(&pg->flags, AK_PG_FULL, __ATOMIC_RELAXED); /* atomic: remote frees read flags */
}

static void full_remove(_ak_mheap *h, _ak_page *pg) {
  AK_ASSERT(pg->in_queue == 2 && (pg->flags & AK_PG_FULL));
  _ak_dlist_remove(&h->full[pg->cls], &pg->node);
  pg->in_queue = 0;
  __atomic_fetch_and(&pg->flags, (uint8_t)~AK_PG_FULL,
                     __ATOMIC_RELAXED); /* atomic: remote frees read flags */
}

uint32_t _ak_page_collect(_ak_page *pg) {
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
  /* Blocks freed by other threads still count as used until collected. */
  AK_ASSERT(n <= _ak_used(pg));
  _ak_used_set(pg, _ak_used(pg) - n);
  AK_ASSERT(_ak_page_validate(pg, "_ak_page_collect"));
  return n;
}

/* The never-used blocks that start in the grain (AK_GRAIN) of `bump`:
 * what a carve hands out (0 when none is left). */
static uint32_t carve_blocks(const _ak_page *pg) {
  /* Bump limits: block-aligned, within the span's block area. */
  AK_ASSERT(pg->bump >= pg->start && pg->bump <= pg->end && (pg->bump - pg->start) % pg->block_size == 0);
  uintptr_t stop = (pg->bump & ~(AK_GRAIN - 1)) + AK_GRAIN; /* the end of bump's grain */
  size_t n = (stop - pg->bump + pg->block_size - 1) / pg->block_size;
  size_t left = (pg->end - pg->bump) / pg->block_size;
  return (uint32_t)(n < left ? n : left);
}

/* Carves those blocks onto the free list (at least one). Each block's link
 * is written at its start, so a carve touches that one page (which, when
 * `bump` is inside it, holds a block carved before): memory is faulted in
 * a page at a time as blocks are needed, never a page ahead. */
static bool carve(_ak_page *pg) {
  if (pg->bump >= pg->end) return false;
  size_t n = carve_blocks(pg);
  uintptr_t b = pg->bump;
  if (_ak_malloc_checked && pg->block_size > sizeof(void *))
    for (size_t i = 0; i < n; i++)
      memset((char *)(b + i * pg->block_size) + sizeof(void *), 0xdf, pg->block_size - sizeof(void *));
  /* Address order (the list pops low addresses first), or random order
   * with the shuffle mitigation. */
  pg->free = _ak_chain_blocks(b, pg->block_size, n, pg->free, pg->key, ak_harden_shuffle);
  pg->bump = b + n * pg->block_size;
  AK_ASSERT(_ak_page_validate(pg, "carve")); /* the list holds what was free, and the new blocks */
  return true;
}

/* Releases an empty page's span (and its segment if all free). */
static void page_release(_ak_mheap *h, _ak_page *pg) {
  /* The page invariant with no live block (so none on the remote list):
   * every block is free or never carved. */
  AK_ASSERT(_ak_used(pg) == 0 && atomic_load_explicit(&pg->remote, memory_order_relaxed) == NULL);
  AK_ASSERT(_ak_page_validate(pg, "page_release"));
  _ak_segment *seg = _ak_seg_of((void *)pg->start);
  if (pg->in_queue == 1)
    queue_remove(h, pg);
  else if (pg->in_queue == 2)
    full_remove(h, pg);
  _ak_span_free(h, seg, pg);
}

void _ak_page_retire(_ak_mheap *h, _ak_page *pg) {
  /* A full page that frees refill stays on the full list until
   * _ak_page_find takes it back with a run of free blocks; only an empty
   * one comes back to the queue here. */
  if ((pg->flags & AK_PG_FULL) && _ak_used(pg) == 0) {
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

void _ak_pages_adopt(_ak_mheap *h, _ak_segment *seg) {
  for (uint64_t m = seg->carved_mask; m; m &= m - 1) {
    unsigned i = (unsigned)__builtin_ctzll(m);
    _ak_page *pg = &seg->pages[i];
    if (pg->head_off || !pg->block_size) continue;
    _ak_page_collect(pg);
    __atomic_fetch_and(&pg->flags, (uint8_t)~AK_PG_FULL, __ATOMIC_RELAXED); /* remote frees read flags */
    pg->in_queue = 0;
    if (_ak_used(pg) == 0) {
      /* Freeing the last span in use may release the segment: stop, since
       * every page after it is free. */
      bool last = (seg->free_mask | _ak_run_bits(i, pg->span)) == AK_ALL_PAGES;
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

/* Full pages of class `cls` that frees (this thread's, inline, or
 * others', remote) have refilled: the oldest few, so the search is bounded
 * however many pages are full. The first with at least `min_free` free
 * blocks goes to the queue's front and is returned; an empty one goes back
 * to its segment while the class has a page on its queue; the others go to
 * the end of the list. NULL if none qualifies. */
static _ak_page *full_take(_ak_mheap *h, unsigned cls, uint32_t min_free) {
  for (unsigned k = 0; k < AK_FULL_SCAN && h->full[cls].head; k++) {
    _ak_page *pg = _ak_page_at(h->full[cls].head);
    _ak_page_collect(pg);
    full_remove(h, pg);
    uint32_t used = _ak_used(pg);
    if (used == 0 && h->pages[cls] != &_ak_empty_page) {
      _ak_span_free(h, _ak_seg_of((void *)pg->start), pg);
    } else if (pg->capacity - used >= min_free) {
      queue_push_front(h, pg);
      return pg;
    } else {
      full_push(h, pg);
    }
  }
  return NULL;
}

_ak_page *_ak_page_find(_ak_mheap *h, unsigned cls) {
  for (;;) {
    _ak_page *pg = h->pages[cls];
    if (pg == &_ak_empty_page) break;
    if (pg->free || _ak_page_collect(pg)) return pg;
    if (pg->bump < pg->end) {
      /* Blocks freed into full pages before blocks never used: carving
       * touches memory the process has not touched yet (a page fault per
       * system page), so under random lifetimes it would grow the resident
       * set while freed blocks waited in full pages. A full page comes back
       * here once it has as many free blocks as a carve hands out (those
       * starting in one system page, carve_blocks), or an eighth of its
       * blocks if that is fewer: it then serves a run of allocations as
       * long as a carve would, so the slow calls are no more frequent, and
       * touches nothing new. */
      uint32_t run = carve_blocks(pg), eighth = (pg->capacity + 7) / 8;
      _ak_page *full = full_take(h, cls, run < eighth ? run : eighth);
      if (full) return full;
      carve(pg);
      return pg;
    }
    queue_remove(h, pg);
    full_push(h, pg);
  }
  /* Nothing left to carve: any refilled full page before a fresh span. */
  _ak_page *full = full_take(h, cls, 1);
  return full ? full : h->pages[cls] != &_ak_empty_page ? h->pages[cls] : NULL;
}

_ak_page *_ak_page_fresh(_ak_mheap *h, unsigned cls) {
  _ak_page *pg = _ak_span_alloc(h, cls);
  if (!pg) return NULL;
  queue_push_front(h, pg);
  carve(pg);
  return pg;
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

_ak_page *_ak_block_check(const char *call, const void *p, _ak_segment *seg) {
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
  AK_ASSERT(pg->head_off == 0 && pg->head == pg && (uintptr_t)p - pg->start < pg->end - pg->start);
  return pg;
}

size_t _ak_block_checked_size(const char *call, const void *p) {
  _ak_segment *seg = _ak_seg_of(p);
  if (((uintptr_t)p & AK_SEG_MASK) == 0 && !_ak_segmap_has(seg)) {
    size_t n = _ak_huge_aligned_size(p);
    if (n) return n;
  }
  _ak_page *pg = _ak_block_check(call, p, seg);
  if (!pg) return seg->map_size - ((uintptr_t)p - (uintptr_t)seg);
  uint32_t bs = __atomic_load_n(&pg->block_size, __ATOMIC_RELAXED);
  /* Only a page with aligned blocks holds pointers inside blocks: no
   * division otherwise (realloc asks this on every call). */
  if (!(__atomic_load_n(&pg->flags, __ATOMIC_RELAXED) & AK_PG_ALIGNED)) return bs;
  return bs - ((uintptr_t)p - pg->start) % bs;
}

void _ak_block_free_check(_ak_page *pg, void *p, bool mine) {
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
}

void _ak_pages_collect(_ak_mheap *h, bool force) {
  for (unsigned c = 0; c < AK_NCLS; c++) {
    for (_ak_dnode *n = h->full[c].head, *next; n; n = next) {
      next = n->next;
      _ak_page *pg = _ak_page_at(n);
      _ak_page_collect(pg);
      if (_ak_used(pg) < pg->capacity) { /* refilled by frees */
        full_remove(h, pg);
        queue_push_front(h, pg);
      }
    }
    for (_ak_dnode *n = h->queue[c].head, *next; n; n = next) {
      next = n->next;
      _ak_page *pg = _ak_page_at(n);
      _ak_page_collect(pg);
      if (_ak_used(pg) == 0 && (force || h->queue[c].n > 1)) page_release(h, pg);
    }
  }
  _ak_solo_collect(h); /* solo blocks other threads freed */
}
