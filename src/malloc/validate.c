/* SPDX-License-Identifier: MIT */
/* validate.c - the invariant checks of a small segment and of a span's
 * page descriptor, which the checked build runs under AK_ASSERT at the
 * slow paths that change them (span.c, page.c, heap.c). Each aborts
 * through _ak_fatal naming its caller, the structure and the broken
 * invariant. */
#include "malloc/malloc_internal.h"

#include "common/error.h"

/* Aborts: invariant `what` of segment `seg` is broken (found by `where`). */
static _Noreturn AK_COLD void bad_segment(const _ak_segment *seg, const char *where, const char *what) {
  _ak_fatal("%s: malloc segment %p is invalid: %s", where, (const void *)seg, what);
}

/* Aborts: invariant `what` of the span at `pg` is broken (found by `where`). */
static _Noreturn AK_COLD void bad_page(const _ak_page *pg, const char *where, const char *what) {
  _ak_fatal("%s: malloc span %p (class %u) is invalid: %s", where, (const void *)pg, (unsigned)pg->cls, what);
}

/* The span at page `at` of `seg`, in use: a head whose pages are taken,
 * each linked to it, inside the segment, with blocks. */
static void check_span(const _ak_segment *seg, unsigned at, const char *where) {
  const _ak_page *pg = &seg->pages[at];
  unsigned k = pg->span;
  if (pg->head_off != 0 || pg->head != pg) bad_segment(seg, where, "a span's first page is not its head");
  if (k == 0 || at + k > AK_SEG_PAGES || (at == 0 && k != 1))
    bad_segment(seg, where, "a span's length leaves the segment (or spans page 0's header)");
  if (seg->free_mask & _ak_run_bits(at, k)) bad_segment(seg, where, "a page of a span in use is free");
  if (pg->block_size == 0) bad_segment(seg, where, "a span in use has no block size");
  for (unsigned j = 1; j < k; j++) {
    const _ak_page *t = &seg->pages[at + j];
    if (t->head_off != j || t->head != pg) bad_segment(seg, where, "a span's page is not linked to its head");
    if (t->block_size != 0) bad_segment(seg, where, "a page inside a span has a block size");
  }
}

bool _ak_segment_validate(const _ak_segment *seg, const char *where) {
  if (seg->magic != AK_SEG_MAGIC || seg->kind != AK_SEG_SMALL) bad_segment(seg, where, "bad magic or kind");
  if (seg->first_page_start != AK_GRAIN_UP(sizeof(_ak_segment)) || seg->first_page_start >= AK_PAGE_SIZE)
    bad_segment(seg, where, "the first page's blocks do not start after the header");
  /* Dirty and decommitted pages are free pages, never both, and were in a
   * span once (a never-carved page is untouched: span placement reuses
   * dirty pages first); a page in a span was carved; guards belong to the
   * hardened build. */
  if ((seg->dirty_mask | seg->decommit_mask) & ~seg->free_mask)
    bad_segment(seg, where, "a dirty or decommitted page is in a span");
  if (seg->dirty_mask & seg->decommit_mask) bad_segment(seg, where, "a page both dirty and decommitted");
  if ((seg->dirty_mask | seg->decommit_mask) & ~seg->carved_mask)
    bad_segment(seg, where, "a dirty or decommitted page was never carved");
  if (~seg->free_mask & ~seg->carved_mask) bad_segment(seg, where, "a page in a span was never carved");
  if (seg->guard_mask && !ak_harden_guards)
    bad_segment(seg, where, "guard pages without the guards mitigation");
  /* The spans tile the pages in use; a free page's descriptor has no
   * block size (span_free clears the head's). A never-carved one is not
   * read (its header page may be untouched: _ak_seg_carved). */
  for (unsigned at = 0; at < AK_SEG_PAGES;) {
    if (seg->free_mask >> at & 1) {
      if ((seg->carved_mask >> at & 1) && seg->pages[at].block_size != 0)
        bad_segment(seg, where, "a free page has a block size");
      at++;
      continue;
    }
    check_span(seg, at, where);
    at += seg->pages[at].span;
  }
  return true;
}

bool _ak_page_validate(const _ak_page *pg, const char *where) {
  const _ak_segment *seg = _ak_seg_of(pg);
  unsigned at = (unsigned)(pg - seg->pages);
  if (pg->head_off != 0 || pg->block_size == 0 || (seg->free_mask >> at & 1))
    bad_page(pg, where, "not the head of a span in use");
  uintptr_t lo = (uintptr_t)seg + (at ? (uintptr_t)at * AK_PAGE_SIZE : seg->first_page_start);
  if (pg->start != lo || pg->end <= pg->start ||
      pg->end > (uintptr_t)seg + (uintptr_t)(at + pg->span) * AK_PAGE_SIZE)
    bad_page(pg, where, "the block area leaves the span");
  uint32_t used = _ak_used(pg);
  if (pg->flags & AK_PG_SOLO) {
    /* One block of whole pages: live, or freed by another thread and
     * collected onto the free list until the owner frees the span. */
    bool on_list = pg->free == (void *)pg->start && _ak_blk_next(pg, pg->free) == NULL;
    if (pg->capacity != 1 || used + on_list != 1 || (pg->free && !on_list) || pg->bump != pg->end ||
        pg->block_size != pg->end - pg->start || pg->cls != AK_CLS_SOLO)
      bad_page(pg, where, "a solo span is not one block, live or free");
    return true;
  }
  if (pg->cls >= AK_NCLS || pg->block_size != _ak_cls_size[pg->cls] ||
      pg->end - pg->start != (uintptr_t)pg->capacity * pg->block_size)
    bad_page(pg, where, "the blocks do not fill the area by the class's size");
  if (pg->bump < pg->start || pg->bump > pg->end || (pg->bump - pg->start) % pg->block_size != 0)
    bad_page(pg, where, "the never-carved blocks are off the block grid");
  if (used > pg->capacity) bad_page(pg, where, "more live blocks than the span holds");
  /* The local free list: carved blocks, each once (a bounded count also
   * stops a cycle). Blocks other threads freed count in `used` until
   * collected, so the counts add up without the remote list. */
  size_t carved = (pg->bump - pg->start) / pg->block_size, n = 0;
  for (const void *b = pg->free; b; b = _ak_blk_next(pg, b)) {
    if ((uintptr_t)b >= pg->bump || !_ak_blk_is_start(pg, b))
      bad_page(pg, where, "a free-list link off the carved blocks");
    if (++n > carved) bad_page(pg, where, "the free list is longer than the carved blocks (a cycle)");
  }
  if (used + n + (pg->end - pg->bump) / pg->block_size != pg->capacity)
    bad_page(pg, where, "used + free + never-carved blocks != capacity");
  return true;
}
