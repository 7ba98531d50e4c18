/* SPDX-License-Identifier: MIT */
/* segment.c - the general heap's segments, its OS-facing bottom: the
 * segment map, mapping a segment (and putting it on the registry), releasing
 * it into the spare segments (reclaim policy), decommitting free pages
 * (the purge policy: the reclaim policy's delays, common/reclaim.h).
 * Calls registry.c (the registry of segments, committed memory, the peak
 * of live bytes), the OS layer and common/. */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "common/error.h"
#include "common/reclaim.h"
#include "malloc/malloc_internal.h"
#include "malloc/stats_internal.h"
#include "os/os_mem.h"

/* The segment map (malloc_internal.h). */
uint64_t _ak_segmap[AK_SEGMAP_WORDS];

bool _ak_segmap_set(const void *seg, bool on) {
  AK_ASSERT(((uintptr_t)seg & AK_SEG_MASK) == 0); /* one bit per 4 MiB-aligned header */
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

/* Empty segments are spares of the reclaim policy (common/reclaim.h), the
 * one every component uses, so that threads that come and go do not map,
 * fault in and unmap a segment each: reused newest first, their free
 * pages decommitted after the reclaim purge delay, unmapped after the
 * release delay or when more than AK_SEG_CACHE are kept (the oldest first),
 * all of them at ak_collect(true). The set's node sits in the segment
 * header, which a decommit leaves alone. The background thread purges the
 * set too: it is registered once the first heap is in place
 * (_ak_segment_spares_register), since registering may start the thread,
 * which allocates; the set itself is made on first use, from inside
 * malloc, where nothing may allocate. */
/* Eight: a round of threads that exit together (a pool of workers, or
 * mimalloc's stress test, whose rounds are eight threads wide in the
 * 8-thread variant) leaves one empty segment each, and the next round
 * takes them back resident instead of mapping and faulting fresh ones;
 * past the cap the oldest is unmapped at once. */
#define AK_SEG_CACHE 8
static _ak_spare_set seg_spares;
static pthread_once_t seg_spares_once = PTHREAD_ONCE_INIT;

static void segment_unmap(_ak_segment *seg) {
  _ak_committed_sub(AK_SEG_SIZE - (size_t)__builtin_popcountll(seg->decommit_mask) * AK_PAGE_SIZE);
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
  (void)_ak_segment_purge(seg_of_spare(sp), 0, _ak_reclaim_now());
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

void _ak_segment_spares_register(void) { _ak_spare_set_register(spares()); }

void _ak_segment_spare_bytes(size_t *mapped, size_t *committed) {
  _ak_spare_counts c;
  _ak_spare_stats(spares(), &c);
  *mapped = c.spare_bytes;
  *committed = c.committed;
}

/* The policy's step on a slow path (one clock read when nothing is due);
 * with force every spare segment is unmapped. */
void _ak_segment_cache_trim(bool force) {
  if (force)
    _ak_spare_drain(spares());
  else
    _ak_spare_tick(spares());
}

bool _ak_segment_hot_spare(void) { return _ak_spare_has_hot(spares()); }

void *_ak_segment_map(size_t size, size_t align) {
  void *seg = _ak_os_alloc(size, align);
  if (!seg) return NULL;
  if (!_ak_segmap_set(seg, true)) {
    _ak_os_free(seg, size);
    errno = ENOMEM;
    return NULL;
  }
  _ak_committed_add(size);
  return seg;
}

_ak_segment *_ak_segment_new(_ak_mheap *h) {
  _ak_segment *seg = NULL;
  _ak_spare *sp = _ak_spare_take(spares(), NULL);
  if (sp) seg = seg_of_spare(sp);
  if (seg) {
    /* Reused: clear the header, keep the decommit record for accounting;
     * the other free pages are committed (dirty, purgeable). The page
     * descriptors are all free (block_size 0) and stay as they are: their
     * last class guides find_same_class. */
    uint64_t decommitted = seg->decommit_mask, guarded = seg->guard_mask, carved = seg->carved_mask;
    memset(seg, 0, offsetof(_ak_segment, pages));
    seg->decommit_mask = decommitted;
    seg->guard_mask = guarded;
    seg->carved_mask = carved;               /* the descriptors keep their last class */
    seg->dirty_mask = carved & ~decommitted; /* never-carved pages are untouched */
  } else {
    seg = _ak_segment_map(AK_SEG_SIZE, AK_SEG_SIZE); /* fresh mmap memory is zero: only set what is not */
    if (!seg) return NULL;
  }
  seg->magic = AK_SEG_MAGIC;
  seg->kind = AK_SEG_SMALL;
  seg->active_ms = _ak_reclaim_now();
  atomic_store_explicit(&seg->owner, (uintptr_t)h, memory_order_relaxed);
  seg->free_mask = AK_ALL_PAGES;
  seg->first_page_start = AK_GRAIN_UP(sizeof(_ak_segment));
  AK_ASSERT(_ak_segmap_has(seg) && seg->first_page_start < AK_PAGE_SIZE); /* the header fits page 0 */
  /* The high-water mark can only have grown here. Sampled before the
   * segment is listed: the walk reads every listed segment's page
   * descriptors, and reading a fresh segment's would map its untouched
   * header pages from the zero page, for the first span there to fault
   * them again. The new segment holds nothing: the sample is the same. */
  _ak_peak_sample();
  _ak_registry_add(seg);
  _ak_dlist_push_front(&h->segs, &seg->node);
  return seg;
}

void _ak_segment_release(_ak_segment *seg) {
  /* Entirely free, off every heap's list and the abandoned list, mapped. */
  AK_ASSERT(seg->kind == AK_SEG_SMALL && seg->free_mask == AK_ALL_PAGES && !_ak_dnode_linked(&seg->node));
  AK_ASSERT(_ak_segmap_has(seg));
  _ak_mtls_forget(seg); /* the releasing owner's cached segment (no other thread caches it) */
  _ak_registry_remove(seg);
  seg->magic = 0;
  _ak_spare_put(spares(), &seg->spare, AK_SEG_SIZE); /* past the cap the oldest spare is unmapped */
}

/* Purge policy: the free pages of a segment are decommitted once the
 * segment has been quiet - no span taken, freed, grown or shrunk in it,
 * no adoption - for the delay in force (active_ms, stamped by each of
 * those), at the first purge tick after that (maybe_purge in heap.c,
 * every 64 slow-path calls of a thread; sweep_abandoned; ak_collect). So
 * the pages of a segment that a program keeps freeing and taking stay
 * committed and do not fault again, and once the program stops using the
 * segment its free pages go back at the next call that reaches a slow
 * path. The delay depends on who holds the segment:
 *   - a running thread's heap: the reclaim policy's purge delay (250 ms),
 *     as for a spare: the free pages a thread holds, like the empty
 *     segment it keeps (span.c), are its spare memory, and a program whose
 *     demand ebbs and flows takes them again (buffers grown by realloc
 *     and freed: with the shorter page delay a quiet segment's free pages
 *     would go back between two growths and fault in again);
 *   - nobody (its thread exited; sweep_abandoned): the page delay in
 *     force (10 ms, AK_PURGE_DELAY, doubled up to 80 ms while decommitted
 *     pages are taken again soon after). Such a segment keeps a few live
 *     blocks among many free pages and no thread allocates there until one
 *     adopts it: with the longer delay, programs that run threads in
 *     rounds would keep those pages resident between the rounds.
 * A page delay of 0 or -1 (at once, or only on ak_collect) holds for
 * both. */
uint64_t _ak_segment_purge(_ak_segment *seg, long delay, uint64_t now_ms) {
  /* Dirty and decommitted pages are free pages, never both (spares too);
   * a live segment's other invariants. */
  AK_ASSERT((seg->dirty_mask & ~seg->free_mask) == 0 && (seg->decommit_mask & ~seg->free_mask) == 0 &&
            (seg->dirty_mask & seg->decommit_mask) == 0);
  AK_ASSERT(seg->magic != AK_SEG_MAGIC || _ak_segment_validate(seg, "_ak_segment_purge"));
  if (delay > 0 && atomic_load_explicit(&seg->owner, memory_order_relaxed) != AK_OWNER_NONE) {
    long spare_delay = 0;
    ak_reclaim_get_delays(&spare_delay, NULL);
    delay = spare_delay < 0 ? -1 : spare_delay > delay ? spare_delay : delay;
  }
  if (!seg->dirty_mask || delay < 0) return UINT64_MAX;
  if (_ak_reclaim_since(now_ms, seg->active_ms) < (uint64_t)delay) return seg->active_ms + (uint64_t)delay;
  uint64_t purge = seg->dirty_mask;
  for (unsigned i = 0; i < AK_SEG_PAGES; i++) {
    if (!(purge & (UINT64_C(1) << i))) continue;
    unsigned j = i;
    while (j < AK_SEG_PAGES && (purge & (UINT64_C(1) << j))) j++;
    uintptr_t from = (uintptr_t)seg + (uintptr_t)i * AK_PAGE_SIZE;
    if (i == 0) from = (uintptr_t)seg + seg->first_page_start; /* keep the header */
    uintptr_t to = (uintptr_t)seg + (uintptr_t)j * AK_PAGE_SIZE;
    if (to > from) (void)_ak_os_decommit((void *)from, to - from);
    _ak_committed_sub((size_t)(j - i) * AK_PAGE_SIZE);
    i = j;
  }
  seg->decommit_mask |= purge;
  seg->dirty_mask &= ~purge;
  seg->purged_ms = now_ms;
  return UINT64_MAX;
}

/* fork() (heap.c's handlers, which give the order of every malloc lock):
 * the spare segments' set lock, released in the parent and the child (where
 * the forking thread holds it) alike. */
void _ak_segment_fork_prepare(void) { _ak_spare_set_lock(spares()); }
void _ak_segment_fork_parent(void) { _ak_spare_set_unlock(&seg_spares); }
