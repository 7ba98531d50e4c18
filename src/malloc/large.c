/* SPDX-License-Identifier: MIT */
/* large.c - blocks above AK_SOLO_MAX: a mapping of their own (a header
 * segment of kind AK_SEG_LARGE, then the block), the cache of freed
 * mappings, realloc by mremap, and huge-aligned blocks (alignment of
 * 4 MiB or more) with their registry. Calls only segment.c (the segment
 * map, mapping), registry.c (the registry of segments, committed memory,
 * the peak of live bytes) and the OS layer. */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "common/error.h"
#include "malloc/malloc_internal.h"
#include "malloc/stats_internal.h"
#include "os/os_mem.h"

#define AK_LARGE_HDR ((size_t)4096)

/* The large-block cache. A freed large block's mapping ([header | block],
 * the block AK_LARGE_HDR in) is kept instead of unmapped, so that a program
 * that allocates and frees blocks above AK_SOLO_MAX in a loop, or grows one
 * by realloc, reuses pages that are mapped and resident: no system call,
 * no page fault per page. How much it keeps follows the program's use,
 * not a timer:
 *   budget    the recent peak of large bytes in use (the highest value seen
 *             in the current window of AK_LCACHE_WINDOW ms and the one
 *             before) less what is in use now: committed memory in the
 *             cache never takes the process above its recent peak. A loop
 *             that frees a block and allocates another keeps its working
 *             set; a spike that is over is forgotten after two windows;
 *   reuse     a malloc takes the smallest cached mapping that holds it (the
 *             most recently freed among equals; the pages of one more than
 *             AK_LCACHE_LOOSE times the request past the request go back);
 *             when none does, the largest one, grown by mremap (its
 *             resident pages come along, only the growth is new); a
 *             realloc that grows moves its pages
 *             into one (mremap onto it: no copy, the cached pages past them
 *             stay);
 *   decommit  the oldest committed mappings past the budget give their
 *             pages back (madvise), keeping their range and header page,
 *             once they were freed longer ago than the page delay in force
 *             (_ak_reclaim_page_delay), as every other free page of the
 *             malloc: threads that free and take large blocks at once
 *             move the budget under a mapping freed a moment ago, and one
 *             taken again after it was decommitted doubles that delay
 *             (_ak_reclaim_page_refault, up to 80 ms);
 *   unmap     a mapping cached past the policy's release delay
 *             (_ak_reclaim_due: reuse has stopped), the oldest first when
 *             the cache would pass AK_LCACHE_SLOTS mappings or
 *             AK_LCACHE_BYTES; all of them before a fresh mapping is
 *             retried after ENOMEM, and at ak_collect(true).
 * The page delay (AK_PURGE_DELAY) d: 0 caches nothing (unmapped at once);
 * < 0 never decommits or unmaps by time or budget (ak_collect does).
 * A cached mapping is no block: its segment-map bit is cleared and its
 * magic zeroed, so free, realloc and malloc_usable_size of it end in the
 * "not from arenakit" message like any freed large block; the kernel puts
 * nothing else in its range while it is mapped, so the bit is set again
 * when the mapping is reused. Committed bytes (stats) count a cached
 * mapping until it is decommitted. lcache_mu is a leaf lock (nothing is
 * taken under it); the system calls that unmap run after it is released. */
#define AK_LCACHE_SLOTS 16
#define AK_LCACHE_BYTES ((size_t)256 << 20)
#define AK_LCACHE_WINDOW 500 /* ms: the recent peak spans one or two */
#define AK_LCACHE_LOOSE 8    /* a mapping this many times a request keeps only the request's pages */
typedef struct lcache_entry {
  _ak_segment *seg;
  size_t size;        /* bytes mapped */
  uint64_t freed_ms;  /* when it was freed */
  uint64_t purged_ms; /* when it was decommitted (0: it was not) */
  bool decommitted;   /* pages past the header given back */
} lcache_entry;
static pthread_mutex_t lcache_mu = PTHREAD_MUTEX_INITIALIZER;
static lcache_entry lcache[AK_LCACHE_SLOTS];
static _Atomic int lcache_n; /* atomic: peeked at without lcache_mu */
static size_t lcache_bytes;  /* mapped by the entries */
static size_t lcache_dirty;  /* committed by the entries (not decommitted) */
/* The recent peak of large bytes in use (under lcache_mu): the highest
 * value noted in the window that started at win_start, and in the one
 * before it. */
static uint64_t win_start;
static size_t win_peak, win_prev;

/* Notes `inuse` large bytes at `now` (under lcache_mu). */
static void peak_note(size_t inuse, uint64_t now) {
  uint64_t age = _ak_reclaim_since(now, win_start);
  if (age >= AK_LCACHE_WINDOW) {
    win_prev = age >= 2 * AK_LCACHE_WINDOW ? 0 : win_peak;
    win_peak = 0;
    win_start = now;
  }
  if (inuse > win_peak) win_peak = inuse;
}

/* Committed bytes the cache may hold now (under lcache_mu). */
static size_t lcache_budget(size_t inuse) {
  size_t peak = win_peak > win_prev ? win_peak : win_prev;
  return peak > inuse ? peak - inuse : 0;
}

/* Removes entry i (under lcache_mu); returns it. */
static lcache_entry lcache_remove(int i) {
  lcache_entry e = lcache[i];
  lcache[i] = lcache[--lcache_n];
  lcache_bytes -= e.size;
  if (!e.decommitted) lcache_dirty -= e.size;
  return e;
}

/* Unmaps a mapping taken out of the cache (no lock held). */
static void lcache_unmap(const lcache_entry *e) {
  _ak_committed_sub(e->decommitted ? AK_LARGE_HDR : e->size);
  _ak_os_free(e->seg, e->size);
}

/* Gives entry i's pages back at `now`, keeping its range (under lcache_mu). */
static void lcache_decommit(int i, uint64_t now) {
  lcache_entry *e = &lcache[i];
  AK_ASSERT(!e->decommitted && lcache_dirty >= e->size);
  (void)_ak_os_decommit((char *)e->seg + AK_LARGE_HDR, e->size - AK_LARGE_HDR);
  _ak_committed_sub(e->size - AK_LARGE_HDR);
  e->decommitted = true;
  e->purged_ms = now;
  lcache_dirty -= e->size;
}

/* The oldest committed entry, or -1 (under lcache_mu). */
static int lcache_oldest_dirty(void) {
  int old = -1;
  for (int i = 0; i < lcache_n; i++)
    if (!lcache[i].decommitted && (old < 0 || lcache[i].freed_ms < lcache[old].freed_ms)) old = i;
  return old;
}

/* The cache's invariants (under lcache_mu): the byte counts add up. */
static void lcache_check(void) {
  if (!_ak_malloc_checked) return;
  size_t bytes = 0, dirty = 0;
  for (int i = 0; i < lcache_n; i++) {
    AK_ASSERT(lcache[i].seg != NULL && lcache[i].size > AK_LARGE_HDR);
    bytes += lcache[i].size;
    if (!lcache[i].decommitted) dirty += lcache[i].size;
  }
  AK_ASSERT(bytes == lcache_bytes && dirty == lcache_dirty && lcache_bytes <= AK_LCACHE_BYTES);
}

/* Under lcache_mu: unmaps (into out[]) the entries past the release delay,
 * all with `force`, and decommits the oldest committed ones past the budget.
 * Returns how many went to out[]. */
static int lcache_trim_locked(bool force, uint64_t now, lcache_entry *out) {
  int nout = 0;
  long delay = ak_reclaim_get_page_delay();
  if (!force && delay < 0) return 0; /* only on ak_collect */
  for (int i = 0; i < lcache_n;) {
    if (force || _ak_reclaim_due(lcache[i].freed_ms, now, true) == 2) {
      out[nout++] = lcache_remove(i);
      continue;
    }
    i++;
  }
  size_t budget = lcache_budget(atomic_load_explicit(&_ak_large_bytes, memory_order_relaxed));
  long grace = _ak_reclaim_page_delay(now);
  for (int old; lcache_dirty > budget && (old = lcache_oldest_dirty()) >= 0;) {
    /* The oldest is the first to go: none is due once it is not. */
    if (_ak_reclaim_since(now, lcache[old].freed_ms) < (uint64_t)grace) break;
    lcache_decommit(old, now);
  }
  lcache_check();
  return nout;
}

void _ak_large_cache_trim(bool force, uint64_t now) {
  lcache_entry out[AK_LCACHE_SLOTS];
  if (!force && !atomic_load_explicit(&lcache_n, memory_order_relaxed))
    return; /* racy peek: no lock when empty */
  pthread_mutex_lock(&lcache_mu);
  peak_note(atomic_load_explicit(&_ak_large_bytes, memory_order_relaxed), now);
  int nout = lcache_trim_locked(force, now, out);
  pthread_mutex_unlock(&lcache_mu);
  for (int i = 0; i < nout; i++) lcache_unmap(&out[i]);
}

void _ak_large_cache_bytes(size_t *mapped, size_t *dirty) {
  pthread_mutex_lock(&lcache_mu);
  *mapped = lcache_bytes;
  *dirty = lcache_dirty;
  pthread_mutex_unlock(&lcache_mu);
}

bool _ak_large_cache_pending(void) { return atomic_load_explicit(&lcache_n, memory_order_relaxed) != 0; }

/* Takes the best cached mapping for `need` bytes out of the cache (the
 * smallest that holds it, the most recently freed among equals; with
 * `grow`, else the largest, which the caller grows): its size in *size,
 * whether its pages still hold old data in *dirty; the mapping counts as
 * committed again. NULL if the cache is empty (or none fits without
 * `grow`). */
static _ak_segment *lcache_take(size_t need, bool grow, size_t *size, bool *dirty) {
  if (!atomic_load_explicit(&lcache_n, memory_order_relaxed))
    return NULL; /* a racy peek: the common case costs no lock */
  pthread_mutex_lock(&lcache_mu);
  int best = -1, largest = -1;
  for (int i = 0; i < lcache_n; i++) {
    size_t sz = lcache[i].size;
    if (sz < need && (largest < 0 || sz > lcache[largest].size)) largest = i;
    if (sz < need) continue;
    if (best < 0 || sz < lcache[best].size ||
        (sz == lcache[best].size && lcache[i].freed_ms > lcache[best].freed_ms))
      best = i;
  }
  if (best < 0 && grow) best = largest;
  lcache_entry e = {NULL, 0, 0, 0, false};
  if (best >= 0) e = lcache_remove(best);
  lcache_check();
  pthread_mutex_unlock(&lcache_mu);
  if (!e.seg) return NULL;
  if (e.decommitted) {
    _ak_committed_add(e.size - AK_LARGE_HDR);                 /* faulted in again as it is used */
    _ak_reclaim_page_refault(e.purged_ms, _ak_reclaim_now()); /* decommitted too soon? */
  }
  if (!e.decommitted && e.size / AK_LCACHE_LOOSE > need) {
    /* Far larger than asked: the pages past the request go back, so a
     * small block does not hold a large one's memory for its lifetime. */
    (void)_ak_os_decommit((char *)e.seg + need, e.size - need);
    _ak_committed_sub(e.size - need);
  }
  *size = e.size;
  *dirty = !e.decommitted;
  return e.seg;
}

/* Puts the mapping of a freed large block (segment-map bit cleared, magic
 * zeroed, still counted as committed; no longer counted in use) into the
 * cache, or unmaps it. `inuse_before`: large bytes in use with it. */
static void lcache_put(_ak_segment *seg, size_t size, size_t inuse_before) {
  long delay = ak_reclaim_get_page_delay();
  uint64_t now = _ak_reclaim_now();
  lcache_entry out[AK_LCACHE_SLOTS + 1];
  int nout = 0;
  if (delay == 0 || size > AK_LCACHE_BYTES) {
    out[nout++] = (lcache_entry){seg, size, now, 0, false};
  } else {
    pthread_mutex_lock(&lcache_mu);
    peak_note(inuse_before, now);
    while (lcache_n == AK_LCACHE_SLOTS || lcache_bytes + size > AK_LCACHE_BYTES) { /* room: the oldest go */
      int old = 0;
      for (int i = 1; i < lcache_n; i++)
        if (lcache[i].freed_ms < lcache[old].freed_ms) old = i;
      out[nout++] = lcache_remove(old);
    }
    lcache[lcache_n++] = (lcache_entry){seg, size, now, 0, false};
    lcache_bytes += size;
    lcache_dirty += size;
    nout += lcache_trim_locked(false, now, out + nout);
    pthread_mutex_unlock(&lcache_mu);
    _ak_reclaim_wake(); /* the budget and the release delay apply if no call comes */
  }
  for (int i = 0; i < nout; i++) lcache_unmap(&out[i]);
}

/* Makes `seg` (mapping of `map` bytes, block `off` in) a live large block. */
static void *large_setup(_ak_segment *seg, size_t map, size_t off) {
  /* The header is found by masking the block (below 4 MiB in), or through
   * the huge-aligned registry (the block on a later 4 MiB boundary). */
  AK_ASSERT(((uintptr_t)seg & AK_SEG_MASK) == 0 && off < map &&
            (off < AK_SEG_SIZE || off % AK_SEG_SIZE == 0));
  seg->magic = AK_SEG_MAGIC;
  seg->kind = AK_SEG_LARGE;
  seg->map_size = map;
  seg->large_block = (uintptr_t)seg + off;
  atomic_store_explicit(&seg->owner, AK_OWNER_NONE, memory_order_relaxed); /* no free fast path */
  _ak_registry_add(seg);
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
    _ak_segment *seg = lcache_take(map, true, &size, &dirty);
    size_t old_pages = size; /* what may hold old data; pages grown below are fresh (zero) */
    if (seg && size < map) { /* the largest cached one, grown: its pages come along */
      _ak_segment *grown = _ak_os_remap(seg, size, map, AK_SEG_SIZE);
      if (grown) {
        _ak_committed_add(map - size);
        seg = grown;
        size = map;
      } else {
        lcache_put(seg, size, atomic_load_explicit(&_ak_large_bytes, memory_order_relaxed));
        seg = NULL;
      }
    }
    if (seg) {
      (void)_ak_segmap_set(seg, true); /* covered: set for this address before, or a range mapped now */
      if (zero && dirty) memset((char *)seg + off, 0, (old_pages < off + n ? old_pages : off + n) - off);
      return large_setup(seg, size, off);
    }
  }
  /* The header precedes the block within the same 4 MiB, so masking finds
   * it; with align >= 4 MiB that is impossible and the block goes through
   * the huge-aligned registry instead. */
  size_t seg_align = align >= AK_SEG_SIZE ? align : AK_SEG_SIZE;
  _ak_segment *seg = _ak_segment_map(map, seg_align);
  if (!seg && errno == ENOMEM && atomic_load_explicit(&lcache_n, memory_order_relaxed)) {
    _ak_large_cache_trim(true, 0); /* what the cache holds may be what the system lacks */
    seg = _ak_segment_map(map, seg_align);
  }
  if (!seg) return NULL;
  return large_setup(seg, map, off); /* fresh mapping: zero */
}

void _ak_large_free(_ak_segment *seg) {
  _ak_registry_remove(seg);
  atomic_fetch_sub_explicit(&_ak_large_count, 1, memory_order_relaxed);
  size_t before = atomic_fetch_sub_explicit(&_ak_large_bytes, seg->map_size, memory_order_relaxed);
  seg->magic = 0;
  (void)_ak_segmap_set(seg, false);
  if (seg->large_block - (uintptr_t)seg == AK_LARGE_HDR) {
    lcache_put(seg, seg->map_size, before);
  } else { /* aligned past the header (rare): not reused */
    _ak_committed_sub(seg->map_size);
    _ak_os_free(seg, seg->map_size);
  }
}

/* A growing large block `seg` (old bytes mapped) moved into a cached
 * mapping of at least `map` bytes: its pages go over the start of that
 * mapping, whose later pages are resident already. NULL if none fits. */
static _ak_segment *large_grow_cached(_ak_segment *seg, size_t old, size_t map) {
  size_t size;
  bool dirty;
  _ak_segment *to = lcache_take(map, false, &size, &dirty);
  if (!to) return NULL;
  if (_ak_os_move_into(seg, old, to) != 0) {
    lcache_put(to, size, atomic_load_explicit(&_ak_large_bytes, memory_order_relaxed)); /* still as it was */
    return NULL;
  }
  _ak_committed_sub(old); /* the pages moved replace as many of the cached mapping's */
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
  _ak_registry_remove(seg); /* it may move */
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
        _ak_committed_add(map - old);
      else
        _ak_committed_sub(old - map);
    }
  }
  (void)_ak_segmap_set(ns ? ns : seg, true);
  _ak_registry_add(ns ? ns : seg);
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
 * the huge-aligned registry's lock, then the large cache's. */
void _ak_large_fork_prepare(void) {
  pthread_mutex_lock(&huge_mu);
  pthread_mutex_lock(&lcache_mu);
}

void _ak_large_fork_parent(void) {
  pthread_mutex_unlock(&lcache_mu);
  pthread_mutex_unlock(&huge_mu);
}
