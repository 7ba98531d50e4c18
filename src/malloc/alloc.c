/* SPDX-License-Identifier: MIT */
/* alloc.c - the general heap's public entry points: ak_malloc, ak_free and
 * the rest of the family, with the fast paths inline here.
 *
 * malloc fast path: the thread's heap, the class of n, the first page of
 * the class queue, pop its free list (invariant: an empty queue points to a
 * sentinel page whose list is empty, so there is a single test).
 * free fast path: the segment map knows the segment; if this thread owns
 * it, the page is neither full nor holding aligned blocks and `p` starts
 * one of its blocks, push on the page's free list (and retire the page if
 * that was its last live block). Everything else goes to heap.c
 * (_ak_malloc_slow, _ak_free_slow, _ak_heap_retire). */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "malloc/malloc_internal.h"
#include "os/os_mem.h"

/* Checked build: blocks on free lists hold 0xdf after their link. */
static void check_unchanged(_ak_page *pg, void *b) {
  const unsigned char *c = (const unsigned char *)b + sizeof(void *);
  for (size_t i = 0; i + sizeof(void *) < pg->block_size; i++)
    if (c[i] != 0xdf) _ak_malloc_fatal("malloc", b, "write after free detected", pg->cls);
}

static inline void *alloc_fast(size_t n) {
  _ak_mtls *t = &_ak_tl;
  /* left < 0: no heap yet, or the byte countdown ended (_ak_mtls). */
  if (AK_UNLIKELY(n > 1024 || (t->left -= (int64_t)n) < 0)) return _ak_malloc_slow(n);
  _ak_mheap *h = t->heap;
  AK_ASSERT(h != NULL);                                 /* left >= 0 */
  _ak_page *pg = h->pages[_ak_cls_small[(n + 7) >> 3]]; /* table: no arithmetic on the class */
  void *b = pg->free;
  if (AK_UNLIKELY(b == NULL)) return _ak_malloc_slow(n);
  _ak_blk_pop(pg, b, "malloc"); /* pg->free = link of b (checked when hardened) */
  _ak_used_set(pg, _ak_used(pg) + 1);
  t->allocs++;
  if (_ak_malloc_checked) check_unchanged(pg, b);
  return b;
}

void *ak_malloc(size_t n) { return alloc_fast(n); }

/* Pushes `p`, a block of `pg` (a page of this thread's heap `h`) found
 * live and valid, with `used` the page's live blocks before the free. */
static inline void free_push(_ak_mheap *h, _ak_page *pg, void *p, uint32_t used) {
  _ak_blk_set_next(pg, p, pg->free);
  pg->free = p;
  _ak_used_set(pg, used - 1);
  /* The page's last block: it may go back to its segment. Everything was
   * checked before, so this skips the slow path's checks (one block
   * allocated and freed over and over lands here on every free). */
  if (AK_UNLIKELY(used == 1)) _ak_heap_retire(h, pg);
}

/* A free the fast path's page test sent away (`pg` of this thread's heap
 * `h`, `used` its live blocks). A page holding a block the heap profiler
 * keeps (AK_PG_SAMPLED, src/malloc/prof.c) sends every free here while
 * the kept block lives; any other block of it is freed as the fast path
 * would: only the owner marks a page's slots, so, with neither slot
 * holding `p` and no spilled sample, `p` is not kept (a slot cleared by a
 * remote free meanwhile changes nothing for `p`). Everything else, and a
 * page whose samples are all gone (its owner clears the flag there),
 * takes the slow path. */
static void free_page_slow(_ak_mheap *h, _ak_page *pg, void *p, uint32_t used) {
  uint8_t flags = __atomic_load_n(&pg->flags, __ATOMIC_RELAXED);
  if ((flags & ~AK_PG_FULL) == AK_PG_SAMPLED && used != 0 && _ak_blk_is_start(pg, p) &&
      !(ak_harden_double_free && _ak_blk_looks_free(pg, p)) &&
      !atomic_load_explicit(&pg->spilled, memory_order_relaxed)) {
    void *s0 = atomic_load_explicit(&pg->sampled[0], memory_order_relaxed);
    void *s1 = atomic_load_explicit(&pg->sampled[1], memory_order_relaxed);
    if (p != s0 && p != s1 && (s0 || s1)) {
      free_push(h, pg, p, used);
      return;
    }
  }
  _ak_free_slow(p, _ak_seg_of(p));
}

/* The free fast path. Invariant: a segment's owner is a heap address or
 * AK_OWNER_NONE (large blocks, abandoned segments), never 0 = "no heap";
 * so owner == heap alone proves a small segment of this thread. The
 * header is read only once the segment map knows the segment: NULL,
 * huge-aligned blocks (no header in their segment) and every pointer the
 * malloc did not hand out take the slow path, which diagnoses them. The
 * thread's cached segment (_ak_mtls.seg, a segment of its heap: mapped)
 * skips the map, since a program frees mostly into one segment at a time;
 * a segment that passes the map becomes the cached one, and leaves again
 * when its owner is another. The block-start test (a multiply, a rotate,
 * a compare) sends a pointer inside a block, or into the segment header,
 * to the slow path too. */
void ak_free(void *p) {
  _ak_segment *seg = _ak_seg_of(p);
  _ak_mtls *t = &_ak_tl;
  if ((uintptr_t)seg != t->seg) {
    if (AK_UNLIKELY(_ak_malloc_checked || !_ak_segmap_has(seg))) {
      _ak_free_slow(p, seg);
      return;
    }
    t->seg = (uintptr_t)seg;
  }
  if (AK_UNLIKELY(atomic_load_explicit(&seg->owner, memory_order_relaxed) != (uintptr_t)t->heap)) {
    t->seg = AK_SEG_UNSEEN; /* another thread's, or nobody's: it may go at any time */
    _ak_free_slow(p, seg);
    return;
  }
  AK_ASSERT(_ak_segmap_has(seg)); /* _ak_mtls.seg */
  _ak_page *pg = seg->pages[((uintptr_t)p & AK_SEG_MASK) >> AK_PAGE_SHIFT].head;
  uint32_t used = _ak_used(pg);
  /* A full page (flags == AK_PG_FULL) takes the free here too and stays on
   * its full list until the allocation slow path takes it back; aligned and
   * solo pages take the slow path. Hardened: a block whose first word
   * decodes like a free link may be a double free; the slow path searches
   * the lists. */
  if (AK_UNLIKELY(pg->flags > AK_PG_FULL || used == 0 || !_ak_blk_is_start(pg, p) ||
                  (ak_harden_double_free && _ak_blk_looks_free(pg, p)))) {
    free_page_slow(_ak_tl.heap, pg, p, used);
    return;
  }
  free_push(_ak_tl.heap, pg, p, used);
}

void *ak_calloc(size_t count, size_t size) {
  size_t n;
  if (__builtin_mul_overflow(count, size, &n)) {
    errno = ENOMEM;
    return NULL;
  }
  if (n > AK_SOLO_MIN) { /* zero only what held data: fresh and decommitted pages are zero */
    _ak_mheap *h = _ak_heap_get();
    if (!h) {
      errno = ENOMEM;
      return NULL;
    }
    void *p = n <= AK_SOLO_MAX ? _ak_heap_solo_alloc(h, n, true) : _ak_large_alloc(n, 16, true);
    if (p) _ak_heap_count(h, p, n);
    return p;
  }
  void *p = alloc_fast(n);
  if (p) memset(p, 0, n);
  return p;
}

size_t ak_usable_size(const void *p) { return p ? _ak_block_checked_size("malloc_usable_size", p) : 0; }

/* realloc's new block when it grows. A block of a size class moves to a
 * block of at least twice its size (up to AK_SOLO_MIN), so that a buffer
 * grown step by step is copied about once per doubling, not at each of
 * the eight classes of a doubling; a solo block moves to a solo span. */
static void *alloc_grow(size_t n, size_t have) {
  if (n <= AK_SOLO_MIN) {
    size_t twice = have <= AK_SOLO_MIN / 2 ? 2 * have : AK_SOLO_MIN;
    return alloc_fast(n > twice ? n : twice);
  }
  if (n > AK_SOLO_MAX) return alloc_fast(n);
  _ak_mheap *h = _ak_heap_get();
  if (!h) {
    errno = ENOMEM;
    return NULL;
  }
  void *p = _ak_heap_solo_alloc(h, n, false);
  if (p) _ak_heap_count(h, p, n);
  return p;
}

void *ak_realloc(void *p, size_t n) {
  if (!p) return alloc_fast(n);
  if (n == 0) { /* glibc: free and return NULL */
    ak_free(p);
    return NULL;
  }
  size_t have = _ak_block_checked_size("realloc", p); /* before any header is read */
  _ak_segment *seg = _ak_seg_of(p);
  if (((uintptr_t)p & AK_SEG_MASK) != 0) {
    if (seg->kind == AK_SEG_LARGE && n > AK_SOLO_MAX) {
      bool kept = atomic_load_explicit(&seg->large_sampled, memory_order_relaxed) == p; /* before it moves */
      void *q = _ak_large_realloc(seg, p, n);                                           /* mremap: no copy */
      if (kept && q) _ak_malloc_prof_moved(p, q, n);
      return q;
    }
    /* A solo block of this thread (owner == h != NULL) is resized in place
     * when the pages after it are free (or it shrinks): no copy. */
    _ak_mheap *h = _ak_tl.heap;
    if (seg->kind == AK_SEG_SMALL && h &&
        atomic_load_explicit(&seg->owner, memory_order_relaxed) == (uintptr_t)h) {
      _ak_page *pg = _ak_page_of(seg, p);
      if ((pg->flags & AK_PG_SOLO) && (uintptr_t)p == pg->start && _ak_solo_resize(h, seg, pg, n)) return p;
    }
  }
  if (n <= have && n >= have / 2) return p;
  void *q = n > have ? alloc_grow(n, have) : alloc_fast(n);
  if (!q) return NULL;
  memcpy(q, p, n < have ? n : have);
  ak_free(p);
  return q;
}

void *ak_reallocarray(void *p, size_t count, size_t size) {
  size_t n;
  if (__builtin_mul_overflow(count, size, &n)) {
    errno = ENOMEM;
    return NULL;
  }
  return ak_realloc(p, n);
}

/* A block that the aligned path took straight from large.c, counted as
 * the slow paths count theirs (_ak_heap_count). */
static void *counted(void *p, size_t n) {
  _ak_mheap *h = p ? _ak_heap_get() : NULL;
  if (h) _ak_heap_count(h, p, n);
  return p;
}

void *ak_aligned_alloc(size_t align, size_t n) {
  if (align == 0 || (align & (align - 1))) {
    errno = EINVAL;
    return NULL;
  }
  if (align <= 16) return alloc_fast(n < align ? align : n);
  /* The class table is read below before any heap exists when this is a
   * thread's first call: it must be filled (a data race otherwise). */
  _ak_malloc_tables_init();
  size_t m = n < align ? align : n;
  if (m <= AK_MEDIUM_MAX && align <= 4096 && _ak_cls_size[_ak_size_class(m)] % align == 0) {
    return alloc_fast(m); /* every block of this class is aligned: spans start page-aligned */
  }
  if (align >= AK_SEG_SIZE) return counted(_ak_huge_aligned_alloc(n, align), n);
  if (m > AK_SOLO_MIN && m <= AK_SOLO_MAX && align <= AK_PAGE_SIZE)
    return alloc_fast(m); /* spans: 64 KiB aligned */
  if (n > SIZE_MAX - align || n + align - 1 > AK_SOLO_MAX)
    return counted(_ak_large_alloc(n, align, false), n);
  void *b = alloc_fast(n + align - 1);
  if (!b) return NULL;
  uintptr_t p = ((uintptr_t)b + align - 1) & ~(uintptr_t)(align - 1);
  if (p != (uintptr_t)b) {
    _ak_segment *seg = _ak_seg_of(b);
    if (seg->kind != AK_SEG_SMALL) { /* a solo size served by a mapping of its own (no segment to be had) */
      ak_free(b);
      return counted(_ak_large_alloc(n, align, false), n);
    }
    /* free() will normalise; atomic: remote frees read flags */
    __atomic_fetch_or(&_ak_page_of(seg, b)->flags, AK_PG_ALIGNED, __ATOMIC_RELAXED);
  }
  return (void *)p;
}

int ak_posix_memalign(void **out, size_t align, size_t n) {
  if (!out || align < sizeof(void *) || (align & (align - 1))) return EINVAL;
  int saved = errno;
  void *p = ak_aligned_alloc(align, n);
  int rc = p ? 0 : errno;
  errno = saved;
  if (p) *out = p;
  return rc;
}

void *ak_memalign(size_t align, size_t n) {
  if (align == 0) align = 1;
  if (align & (align - 1)) { /* glibc rounds up to a power of two */
    size_t a = 1;
    while (a < align && a < ((size_t)1 << 62)) a <<= 1;
    align = a;
  }
  return ak_aligned_alloc(align, n);
}

/* In libarenakit-malloc.so (AK_OVERRIDE) the C library's names are
 * aliases of these functions: a call to malloc lands here directly, with
 * no extra jump. The rest of the drop-in is in src/shim/. */
#if defined(AK_OVERRIDE) && AK_OVERRIDE
#if defined(__clang__)
#define AK_ALIAS(name, target) \
  extern __typeof(target) name __attribute__((alias(#target), visibility("default")));
#else
#define AK_ALIAS(name, target) \
  extern __typeof(target) name __attribute__((alias(#target), copy(target), visibility("default")));
#endif
AK_ALIAS(malloc, ak_malloc)
AK_ALIAS(free, ak_free)
AK_ALIAS(calloc, ak_calloc)
AK_ALIAS(realloc, ak_realloc)
AK_ALIAS(reallocarray, ak_reallocarray)
AK_ALIAS(aligned_alloc, ak_aligned_alloc)
AK_ALIAS(posix_memalign, ak_posix_memalign)
AK_ALIAS(memalign, ak_memalign)
AK_ALIAS(malloc_usable_size, ak_usable_size)
#endif

void ak_collect(bool force) {
  _ak_heap_collect(_ak_tl.heap, force); /* also without a heap: abandoned segments */
  _ak_segment_cache_trim(force);
  _ak_large_cache_trim(force, _ak_reclaim_now());
}
