/* SPDX-License-Identifier: MIT */
/* prof.c - the general heap's side of the heap profiler (src/prof): which
 * of its blocks the profiler keeps, so that their free removes them from
 * the profile's live set.
 *
 * Sampling itself rides on the malloc's byte countdown (_ak_mtls.left,
 * heap.c's count_sync): the block an allocation slow path samples is
 * recorded here and marked, by the allocating thread (a class or solo
 * block is always its own heap's), before the caller sees it:
 *   - a block of a page: one of the page's two `sampled` slots, or, when
 *     both are taken, one more in the page's `spilled` count; and
 *     AK_PG_SAMPLED on the page, which sends every free of the page off
 *     the fast path (its existing test of the flags: no instruction on it).
 *     The owner's free of another block of the page is done at once beside
 *     the fast path (alloc.c, free_page_slow: the slots read, then the fast
 *     path's push); the slow path matches a block against the slots (two
 *     loads), and only on a page with spilled samples asks the profiler's
 *     live set;
 *   - a large block: its segment's `large_sampled`;
 *   - a block aligned to a segment (AK_SEG_MASK) or more (no header by
 *     masking) and a page past UINT8_MAX spilled samples: kept for the
 *     allocation counts only, forgotten at once.
 * Invariant: a block in a slot is live and kept by the profiler; `spilled`
 * counts live kept blocks of the page in no slot; AK_PG_SAMPLED is set
 * while a slot is set or `spilled` is not zero. The freeing thread (any)
 * clears its block's slot (or takes it off `spilled`) and forgets it
 * before the block can be handed out again; only the owner marks, and it
 * clears the flag when nothing is left (a remote freer leaves it: the
 * owner may be marking at that moment). */
#include "prof/prof.h"
#include "common/assert.h"
#include "malloc/malloc_internal.h"

/* Marks `p` (just allocated by the calling thread, its owner) as kept. */
static void mark(void *p) {
  _ak_segment *seg = _ak_seg_of(p);
  if (((uintptr_t)p & AK_SEG_MASK) == 0) { /* segment-aligned: no header by masking */
    _ak_prof_forget(p);
    return;
  }
  if (seg->kind == AK_SEG_LARGE) {
    atomic_store_explicit(&seg->large_sampled, p, memory_order_relaxed);
    return;
  }
  _ak_page *pg = _ak_page_of(seg, p);
  __atomic_fetch_or(&pg->flags, AK_PG_SAMPLED, __ATOMIC_RELAXED); /* before the mark: see the invariant */
  for (int i = 0; i < 2; i++) {
    void *none = NULL;
    if (atomic_compare_exchange_strong_explicit(&pg->sampled[i], &none, p, memory_order_release,
                                                memory_order_relaxed))
      return;
  }
  uint8_t n = atomic_load_explicit(&pg->spilled, memory_order_relaxed);
  while (n < UINT8_MAX)
    if (atomic_compare_exchange_weak_explicit(&pg->spilled, &n, (uint8_t)(n + 1), memory_order_release,
                                              memory_order_relaxed))
      return;
  _ak_prof_forget(p); /* saturated: the allocation stays counted, its bytes not in use */
}

void _ak_malloc_prof_sampled(void *p, size_t n) {
  if (_ak_prof_record(p, n, NULL, NULL)) mark(p);
}

void _ak_malloc_prof_free(_ak_segment *seg, _ak_page *pg, void *p, bool mine) {
  if (!pg) { /* a large block */
    void *want = p;
    if (atomic_compare_exchange_strong_explicit(&seg->large_sampled, &want, NULL, memory_order_relaxed,
                                                memory_order_relaxed))
      _ak_prof_forget(p);
    return;
  }
  bool found = false;
  for (int i = 0; i < 2 && !found; i++) {
    void *want = p;
    found = atomic_load_explicit(&pg->sampled[i], memory_order_relaxed) == p &&
            atomic_compare_exchange_strong_explicit(&pg->sampled[i], &want, NULL, memory_order_relaxed,
                                                    memory_order_relaxed);
  }
  if (found) {
    _ak_prof_forget(p);
  } else if (atomic_load_explicit(&pg->spilled, memory_order_acquire) && _ak_prof_forget_if_kept(p)) {
    uint8_t was = atomic_fetch_sub_explicit(&pg->spilled, 1, memory_order_relaxed);
    AK_ASSERT(was > 0); /* a kept block in no slot was counted in spilled */
    (void)was;
  }
  if (mine && !atomic_load_explicit(&pg->spilled, memory_order_relaxed) &&
      !atomic_load_explicit(&pg->sampled[0], memory_order_relaxed) &&
      !atomic_load_explicit(&pg->sampled[1], memory_order_relaxed))
    __atomic_fetch_and(&pg->flags, (uint8_t)~AK_PG_SAMPLED, __ATOMIC_RELAXED);
}

void _ak_malloc_prof_moved(void *from, void *to, size_t n) {
  _ak_prof_forget(from);
  atomic_store_explicit(&_ak_seg_of(to)->large_sampled, NULL,
                        memory_order_relaxed); /* moved with the header */
  _ak_malloc_prof_sampled(to, n);              /* the live block, under its new address and size */
}
