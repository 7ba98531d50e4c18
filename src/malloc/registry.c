/* SPDX-License-Identifier: MIT */
/* registry.c - what the general heap keeps track and count of: the
 * registry of every segment (small segments and large mappings, under
 * _ak_seg_mu), committed memory and its peak, the large blocks, the live
 * bytes with their peak (a walk of the registry); the registry of thread
 * heaps and the list of abandoned segments (changed by heap.c under their
 * locks), each thread's block of the fast paths (_ak_tl), and the blocks
 * and bytes allocated ever. Every file that maps, releases or counts
 * memory calls down into it, and the statistics read it; it calls only
 * the OS layer and common/. */
#define _GNU_SOURCE
#include <stddef.h>

#include "malloc/malloc_internal.h"
#include "os/os_mem.h"

pthread_mutex_t _ak_seg_mu = PTHREAD_MUTEX_INITIALIZER;
_ak_dlist _ak_seg_list;
atomic_size_t _ak_large_count, _ak_large_bytes, _ak_committed, _ak_peak_committed;

void _ak_committed_add(size_t n) {
  size_t c = atomic_fetch_add_explicit(&_ak_committed, n, memory_order_relaxed) + n;
  size_t peak = atomic_load_explicit(&_ak_peak_committed, memory_order_relaxed);
  while (c > peak && !atomic_compare_exchange_weak(&_ak_peak_committed, &peak, c)) {
  }
}

void _ak_committed_sub(size_t n) { atomic_fetch_sub_explicit(&_ak_committed, n, memory_order_relaxed); }

void _ak_registry_add(_ak_segment *seg) {
  pthread_mutex_lock(&_ak_seg_mu);
  _ak_dlist_push_front(&_ak_seg_list, &seg->gnode);
  pthread_mutex_unlock(&_ak_seg_mu);
}

void _ak_registry_remove(_ak_segment *seg) {
  pthread_mutex_lock(&_ak_seg_mu);
  _ak_dlist_remove(&_ak_seg_list, &seg->gnode);
  pthread_mutex_unlock(&_ak_seg_mu);
}

static atomic_size_t peak_allocated;
static atomic_size_t small_sampled; /* small-block bytes at the last walk */

size_t _ak_allocated_walk(ak_malloc_stats *out) {
  size_t total = 0;
  pthread_mutex_lock(&_ak_seg_mu);
  for (_ak_dnode *n = _ak_seg_list.head; n; n = n->next) {
    _ak_segment *s = _ak_seg_gat(n);
    if (s->kind != AK_SEG_SMALL) continue; /* large blocks are counted apart */
    if (out) out->segments++;
    for (uint64_t m = _ak_seg_carved(s); m; m &= m - 1) {
      _ak_page *pg = &s->pages[__builtin_ctzll(m)];
      /* Owners change these without our lock: relaxed atomic reads. */
      uint32_t bs = __atomic_load_n(&pg->block_size, __ATOMIC_RELAXED);
      if (__atomic_load_n(&pg->head_off, __ATOMIC_RELAXED) || !bs) continue;
      unsigned cls = __atomic_load_n(&pg->cls, __ATOMIC_RELAXED);
      size_t live = _ak_used(pg);
      total += live * bs;
      if (out && cls < AK_NCLS) {
        out->class_blocks[cls] += live;
        out->class_pages[cls]++;
      }
    }
    if (out) out->resident += _ak_os_resident(s, AK_SEG_SIZE);
  }
  pthread_mutex_unlock(&_ak_seg_mu);
  return total + atomic_load(&_ak_large_bytes);
}

static void peak_raise(size_t now) {
  size_t peak = atomic_load(&peak_allocated);
  while (now > peak && !atomic_compare_exchange_weak(&peak_allocated, &peak, now)) {
  }
}

void _ak_peak_sample(void) {
  size_t large = atomic_load(&_ak_large_bytes);
  size_t now = _ak_allocated_walk(NULL);
  atomic_store_explicit(&small_sampled, now > large ? now - large : 0, memory_order_relaxed);
  peak_raise(now);
}

void _ak_peak_note_large(void) {
  peak_raise(atomic_load_explicit(&small_sampled, memory_order_relaxed) +
             atomic_load_explicit(&_ak_large_bytes, memory_order_relaxed));
}

size_t _ak_peak_allocated(void) { return atomic_load(&peak_allocated); }

/* ---- thread heaps ---------------------------------------------------------------- */

/* Initial-exec TLS: no __tls_get_addr call (which may itself allocate). */
__attribute__((tls_model("initial-exec"))) _Thread_local _ak_mtls _ak_tl = {NULL, -1, 0, AK_SEG_UNSEEN};

pthread_mutex_t _ak_heaps_mu = PTHREAD_MUTEX_INITIALIZER;
_ak_dlist _ak_heap_list;
pthread_mutex_t _ak_abandoned_mu = PTHREAD_MUTEX_INITIALIZER;
_ak_dlist _ak_abandoned;

/* The cumulative counts of the heaps of exited threads. */
static _Atomic uint64_t exited_blocks, exited_bytes;

void _ak_heap_exited(const _ak_mheap *h) {
  atomic_fetch_add_explicit(&exited_blocks, atomic_load_explicit(&h->blocks_allocated, memory_order_relaxed),
                            memory_order_relaxed);
  atomic_fetch_add_explicit(&exited_bytes, atomic_load_explicit(&h->bytes_allocated, memory_order_relaxed),
                            memory_order_relaxed);
}

void _ak_heap_totals(uint64_t *blocks, uint64_t *bytes) {
  uint64_t b = atomic_load_explicit(&exited_blocks, memory_order_relaxed);
  uint64_t y = atomic_load_explicit(&exited_bytes, memory_order_relaxed);
  pthread_mutex_lock(&_ak_heaps_mu);
  for (_ak_dnode *x = _ak_heap_list.head; x; x = x->next) {
    _ak_mheap *h = _ak_heap_at(x);
    b += atomic_load_explicit(&h->blocks_allocated, memory_order_relaxed);
    y += atomic_load_explicit(&h->bytes_allocated, memory_order_relaxed);
  }
  pthread_mutex_unlock(&_ak_heaps_mu);
  _ak_mheap *mine = _ak_tl.heap;
  if (mine) { /* the caller's own, not folded yet */
    b += _ak_tl.allocs;
    y += (uint64_t)(mine->left_base - _ak_tl.left);
  }
  *blocks = b;
  *bytes = y;
}
