/* SPDX-License-Identifier: MIT */
/* malloc_internal.h - the general heap's types and shared functions
 * (internal), grouped by the file that defines them. Files by role, each
 * calling only the ones listed after it, so that no two call each other
 * (tests/check_layout.sh, run by tests/layers, checks it on the objects):
 *   free_sized.c  sized frees (checks, then ak_free)
 *   alloc.c       the public entry points and their fast paths
 *   heap.c        thread heaps: creation, the slow paths' decisions
 *                 (refill, ownership of a free), thread exit (abandoning
 *                 segments), adoption, collection, the purge tick, fork
 *   stat_named.c  ak_malloc_stat: a statistic by name
 *   stats.c       the statistics' snapshot, the printer, the exit report
 *   prof.c        the heap profiler's marks on blocks
 *   page.c        a heap's pages and their blocks: block checks, local and
 *                 remote frees, class queues, carving, retiring a page
 *   span.c        spans of pages in a segment: class spans, solo spans
 *   large.c       blocks with a mapping of their own, huge-aligned blocks
 *   segment.c     segments: the segment map, mapping and releasing,
 *                 the spare segments, purging free pages
 *   registry.c    the registries of segments and of heaps, the abandoned
 *                 segments' list, the fast paths' TLS block, committed
 *                 memory, live bytes and their peaks, cumulative counts
 *   options.c     the run-time options (AK_* environment, ak_option_*)
 *   validate.c    the checked build's invariant checks of a segment and
 *                 of a span's descriptor
 *   fatal.c       the message about a bad block (through _ak_fatal)
 *   size_class.c  size classes
 * A free that leaves the fast path goes down that list once: the block
 * (page.c checks it), its page (page.c), the page's span (span.c), the
 * span's segment (segment.c); heap.c decides ownership (a remote push, or
 * adopting an abandoned segment) before it goes down.
 *
 * Layout. A segment is 4 MiB aligned to 4 MiB: [header | 64 pages of
 * 64 KiB]; the header (descriptors of the 64 pages) sits at the start of
 * page 0. A span is 1..32 consecutive pages serving one size class; the
 * descriptor of its first page is the span's; the others point back to it
 * (head_off). The segment and page of any block are found by masking:
 *   seg = p & ~(4 MiB - 1); page = &seg->pages[(p - seg) >> 16] - head_off
 * Blocks above AK_SOLO_MIN (64 KiB) are solo spans: whole pages, one block,
 * resized in place by realloc when the pages after them are free. Blocks
 * above AK_SOLO_MAX (~4 MiB) get a mapping of their own (kind AK_SEG_LARGE). A block
 * that starts exactly on a 4 MiB boundary can only be a huge-aligned block
 * (registered apart), since segments start with their header. */
#ifndef AK_MALLOC_INTERNAL_H
#define AK_MALLOC_INTERNAL_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arenakit/detail/link.h"
#include "arenakit/malloc.h"
#include "common/assert.h"
#include "common/harden.h"
#include "common/list.h"
#include "common/reclaim.h"
#include "malloc/size_class.h"

#ifndef AK_CHECKED
#define AK_CHECKED 0
#endif
static const bool _ak_malloc_checked = AK_CHECKED;

#define AK_SEG_MAGIC UINT64_C(0x616b2d7365676d21) /* "ak-segm!" */

enum { AK_SEG_SMALL = 1, AK_SEG_LARGE = 2 };
#define AK_OWNER_NONE ((uintptr_t)1)
/* Page flags seen by the free fast path (any flag sends frees slow). */
/* AK_PG_FULL is the lowest bit: the free fast path takes pages whose flags
 * are at most AK_PG_FULL (a full page takes local frees inline). */
/* AK_PG_SAMPLED: a block of the page may be one the heap profiler keeps
 * (`sampled`, `spilled`): frees take the slow path, which forgets it
 * (prof.c). */
enum { AK_PG_FULL = 1u, AK_PG_ALIGNED = 2u, AK_PG_SOLO = 4u, AK_PG_SAMPLED = 8u };
/* Full pages _ak_page_find looks at before a fresh span is taken. */
enum { AK_FULL_SCAN = 4 };
/* Class of a solo span (one block of whole pages, AK_SOLO_MIN < size <= AK_SOLO_MAX):
 * on no queue; freed, grown and shrunk as a span (span.c). */
#define AK_CLS_SOLO AK_NCLS

typedef struct _ak_mheap _ak_mheap;

/* A page (span) descriptor. Owner-only fields are changed by the owning
 * heap's thread alone; `remote` by anyone (atomic); `used` is read by the
 * stats walker (relaxed). Invariant (owner's view; the blocks on `remote`
 * count in `used` until the owner collects them):
 *   used + |free| + (end - bump) / block_size == capacity
 * (_ak_page_validate checks it). */
typedef struct _ak_page {
  void *free;                 /* owner: free blocks */
  _Atomic uint32_t used;      /* owner writes: live blocks not yet collected */
  uint32_t capacity;          /* blocks in the span */
  uint32_t block_size;        /* bytes per block (0: span not in use) */
  uint16_t cls;               /* size class */
  uint8_t flags;              /* AK_PG_* */
  uint8_t span;               /* pages in the span (on the head) */
  uint8_t head_off;           /* this descriptor's distance to the span head */
  uint8_t in_queue;           /* 1 on the class queue, 2 on the full list */
  uintptr_t start, bump, end; /* block area; bump = first never-carved block */
  _Atomic(void *) remote;     /* frees by other threads */
  _ak_dnode node;             /* on the owner's class queue or full list (in_queue) */
  struct _ak_page *head;      /* the span's head descriptor (itself if head) */
  uintptr_t key;              /* hardened: the span's link key (detail/link.h; 0 otherwise) */
  uint64_t blk_inv;           /* class spans: inverse of block_size's odd part mod 2^64 */
  uint8_t blk_shift;          /* class spans: trailing zero bits of block_size */
  _Atomic uint8_t spilled;    /* blocks of the page the profiler keeps beyond
                                 `sampled` (prof.c; saturates at UINT8_MAX) */
  _Atomic(void *) sampled[2]; /* blocks of the page the profiler keeps (set by the
                                 allocating owner, cleared by the freeing thread);
                                 ends the 128 bytes page_of() indexes with a shift */
} _ak_page;
_Static_assert(sizeof(_ak_page) == 128, "_ak_page must stay 128 bytes");

typedef struct _ak_segment {
  uint64_t magic;                /* AK_SEG_MAGIC */
  uint32_t kind;                 /* AK_SEG_SMALL or AK_SEG_LARGE */
  _Atomic uintptr_t owner;       /* owning heap, or AK_OWNER_NONE (abandoned, large);
                                    never 0, so a thread without a heap
                                    (_ak_tl.heap == NULL) owns nothing */
  size_t map_size;               /* AK_SEG_LARGE: bytes mapped */
  uintptr_t large_block;         /* AK_SEG_LARGE: the block */
  _Atomic(void *) large_sampled; /* AK_SEG_LARGE: the block, if the profiler keeps it */
  _ak_dnode node;                /* on its owner's segments, or the abandoned list */
  _ak_dnode gnode;               /* on the registry of all segments (_ak_seg_list) */
  uint64_t free_mask;            /* pages not in any span */
  uint64_t dirty_mask;           /* free pages that a span carved, not yet decommitted (free
                                    pages in neither mask were never touched) */
  uint64_t decommit_mask;        /* free pages given back with madvise */
  uint64_t guard_mask;           /* hardened: pages whose last system page is PROT_NONE (kept
                                    when their span is freed, opened when a span covers them) */
  uint64_t carved_mask;          /* pages whose descriptor a span ever wrote; the others are
                                    as mmap gave them (zero), and so may be the header pages
                                    they lie on: walks read only these (_ak_seg_carved) */
  uint64_t active_ms;            /* last span taken, freed or resized, or adoption: the
                                    free pages go once it is older than the purge delay */
  uint64_t purged_ms;            /* last decommit of free pages (refault detection) */
  size_t first_page_start;       /* offset of page 0's block area */
  _ak_spare spare;               /* node in the set of spare (empty) segments */
  _ak_page pages[AK_SEG_PAGES];
} _ak_segment;

/* A thread's heap. `pages[c]` is never NULL: it is the first page of
 * `queue[c]`, or, when that is empty, a shared sentinel whose free list is
 * empty, so the fast path has one test (first member: the fast path
 * indexes the heap's address). Then the fields heap_new writes, then the
 * class lists, which a thread touches only for the classes it uses: a
 * fresh heap is zeroed memory, and the `full` lists of the classes above
 * about 800 bytes lie on its second page, which a thread of smaller
 * blocks never faults in. */
struct _ak_mheap {
  _ak_page *pages[AK_NCLS]; /* queue[c]'s first page, or &_ak_empty_page */
  _ak_dnode gnode;          /* on _ak_heap_list, or the reused heaps once its thread exited */
  pthread_t thread;
  uint64_t slow_calls; /* to pace purging */
  /* Cumulative counts (the owner folds its _ak_mtls into them on its slow
   * paths; stats read them from any thread): blocks handed out and bytes
   * asked for; left_base is `left` as of the last fold. */
  _Atomic uint64_t blocks_allocated, bytes_allocated;
  int64_t left_base;
  uint64_t prof_gen; /* the heap profiler's generation the countdown mirrors (heap.c) */
  /* The segment lock: segs and the masks of the segments on it change
   * only under it (0 free, 1 the owner, 2 the background thread's idle
   * purge, which only tries it, AK_SEG_LOCK_FROZEN the heap of a thread
   * that is not in a fork child); the owner takes it once however deeply
   * its slow paths nest (seg_depth, the owner's own). */
  _Atomic unsigned seg_lock;
  unsigned seg_depth;
  _ak_dlist segs;           /* segments this heap owns (_ak_segment.node) */
  _ak_dlist queue[AK_NCLS]; /* pages with free or uncarved blocks, per class */
  _ak_dlist full[AK_NCLS];  /* pages without free blocks, per class */
};
_Static_assert(offsetof(_ak_mheap, queue) <= 4096, "what heap_new writes must fit a heap's first page");

/** The page, segment or heap whose list node is `n` (NULL stays NULL). */
static inline _ak_page *_ak_page_at(_ak_dnode *n) { return _AK_DLIST_ENTRY(n, _ak_page, node); }
static inline _ak_segment *_ak_seg_at(_ak_dnode *n) { return _AK_DLIST_ENTRY(n, _ak_segment, node); }
static inline _ak_segment *_ak_seg_gat(_ak_dnode *n) { return _AK_DLIST_ENTRY(n, _ak_segment, gnode); }
static inline _ak_mheap *_ak_heap_at(_ak_dnode *n) { return _AK_DLIST_ENTRY(n, _ak_mheap, gnode); }

/* ---- segment.c: the segment map ------------------------------------------------
 * Which 4 MiB units of the address space hold a segment header of this
 * malloc: a small segment, or the first 4 MiB of a large mapping. Consulted
 * before any header is read, so that free, realloc and malloc_usable_size
 * of a pointer the malloc did not hand out (stack, static, another
 * allocator's, an mmap'd region, an unmapped address, a large block already
 * freed) end with a message instead of a fault on reading a header that is
 * not there.
 * One bit per segment number (address >> AK_SEG_SHIFT) of the user address
 * space (2^47 bytes on x86-64, where the kernel maps nothing higher unless
 * asked with a hint above it; 2^48 elsewhere): a flat array in zero-filled
 * static memory, 4 MiB (8 MiB), whose pages the kernel provides only where
 * a bit is ever set (one page per 128 GiB of address space that holds
 * segments). Flat, as mimalloc's segment map, rather than two levels: the
 * free fast path pays one load that stays in L1 (a word covers 256 MiB of
 * segments) and a predicted compare; the two-level table cost one more
 * dependent load and test on every free. Bits are set (atomic OR) when a
 * segment is mapped, before any of its blocks is handed out, and cleared
 * (atomic AND) just before it is unmapped; cached segments keep theirs.
 * Reads are lock-free. */
#if defined(__x86_64__)
#define AK_SEGMAP_ADDR_BITS 47
#else
#define AK_SEGMAP_ADDR_BITS 48
#endif
#define AK_SEGMAP_WORDS ((size_t)1 << (AK_SEGMAP_ADDR_BITS - AK_SEG_SHIFT - 6))
extern uint64_t _ak_segmap[AK_SEGMAP_WORDS];

/** True if a segment header of this malloc lies at `seg` (4 MiB aligned).
 *  Any address may be asked; lock-free; false for addresses the map does
 *  not cover. */
static inline bool _ak_segmap_has(const void *seg) {
  uintptr_t n = (uintptr_t)seg >> AK_SEG_SHIFT;
  if (AK_UNLIKELY((n >> 6) >= AK_SEGMAP_WORDS)) return false;
  return (__atomic_load_n(&_ak_segmap[n >> 6], __ATOMIC_RELAXED) >> (n & 63)) & 1;
}

/* ---- segment.c ----------------------------------------------------------------- */
/** A fresh mapping of `size` bytes aligned to `align` (>= 4 MiB) with a
 *  segment header at its start: marked in the segment map, counted as
 *  committed. NULL + errno. */
void *_ak_segment_map(size_t size, size_t align);
/** A fresh (or spare) small segment owned by `h`, on h's segments, all
 *  pages free. NULL + errno (ENOMEM: no memory for a fresh mapping; the
 *  caller may free cached memory and ask again). */
_ak_segment *_ak_segment_new(_ak_mheap *h);
/** True if a spare segment still holds committed pages a span touched (a
 *  hint, read without the spares' lock). */
bool _ak_segment_hot_spare(void);
/** Releases a small segment (all pages free, on no heap's list): into the
 *  spare segments (reclaim policy), or to the OS. */
void _ak_segment_release(_ak_segment *seg);
/** Applies the reclaim policy to the spare (empty) segments: decommits or
 *  unmaps those past its delays; all unmapped with force. */
void _ak_segment_cache_trim(bool force);
/** Registers the spare segments with the reclaim policy's background
 *  thread (which AK_BACKGROUND=1 starts then). May allocate: called once
 *  the first heap is in place. */
void _ak_segment_spares_register(void);
/** Decommits the free pages of `seg` if it has been quiet for `delay` ms
 *  at `now_ms` (all of them with delay 0; none with delay < 0); a running
 *  thread's segment waits the policy's purge delay if longer. Returns when
 *  its free pages fall due (UINT64_MAX: none wait). */
uint64_t _ak_segment_purge(_ak_segment *seg, long delay, uint64_t now_ms);
/** Marks (true) or unmarks (false) the segment header at `seg` in the
 *  segment map. Marking fails (false, errno ENOMEM) only for an address
 *  the map does not cover. */
bool _ak_segmap_set(const void *seg, bool on);
/** fork(): takes (prepare) or releases (parent and child) the spare
 *  segments' set lock; heap.c's atfork handlers call them at their place in
 *  the lock order written there. */
void _ak_segment_fork_prepare(void);
void _ak_segment_fork_parent(void);

/* ---- registry.c ------------------------------------------------------------------ */
/** Committed memory (stats): `n` bytes more (the peak follows), or less. */
void _ak_committed_add(size_t n);
void _ak_committed_sub(size_t n);
/** Registry of all segments, small and large (stats, checks), under _ak_seg_mu. */
extern pthread_mutex_t _ak_seg_mu;
extern _ak_dlist _ak_seg_list; /* _ak_segment.gnode */
extern atomic_size_t _ak_large_count, _ak_large_bytes, _ak_committed, _ak_peak_committed;
/** Puts `seg` on (takes it off) the registry; takes _ak_seg_mu. */
void _ak_registry_add(_ak_segment *seg);
void _ak_registry_remove(_ak_segment *seg);
/** Live bytes in small segments plus large blocks (walks the registry
 *  under _ak_seg_mu). With `out`, also counts into it the small segments,
 *  each class's live blocks and spans, and the segments' resident bytes. */
size_t _ak_allocated_walk(ak_malloc_stats *out);
/** Samples the live bytes (a walk) and raises their peak to them: where
 *  the high-water mark can only have grown (a segment mapped, a snapshot). */
void _ak_peak_sample(void);
/** Raises the peak of allocated bytes to the last sampled small-block
 *  bytes plus the large blocks live now (large alloc and realloc: cheap,
 *  no walk). */
void _ak_peak_note_large(void);
/** The peak of live bytes as of the last sample or note. */
size_t _ak_peak_allocated(void);

/* The thread's block of the fast paths (initial-exec TLS: one %fs access,
 * no call; one base address for all three fields).
 * Invariant: left >= 0 only while heap != NULL. The malloc fast path
 * subtracts each size from `left` and takes the slow path when it goes
 * below 0, which is how a thread without a heap (left -1) reaches the slow
 * path and how the byte countdown of the sampling profiler ends; with
 * profiling off `left` is set far beyond what a thread can allocate. */
typedef struct _ak_mtls {
  _ak_mheap *heap; /* the thread's heap; NULL before its first block and after its exit */
  int64_t left;    /* bytes until the slow path must look (see above) */
  uint64_t allocs; /* blocks the malloc fast path handed out (folded into the heap's count) */
  /* The segment of the thread's last fast-path free (AK_SEG_UNSEEN: none).
   * Invariant: a segment that the segment map knows and `heap` owns. Only
   * the owner's thread ends that ownership (it releases the segment, or
   * abandons it at its exit), and both paths reset `seg` first
   * (_ak_mtls_forget); nobody unmaps a segment a heap owns. So a free into
   * `seg` needs neither the map nor the owner: ak_free. */
  uintptr_t seg;
} _ak_mtls;
/** _ak_mtls.seg of a thread with no segment: not AK_SEG_SIZE-aligned, so no
 *  _ak_seg_of() equals it (NULL's is 0). */
#define AK_SEG_UNSEEN ((uintptr_t)1)
extern __attribute__((tls_model("initial-exec"))) _Thread_local _ak_mtls _ak_tl;
/** The calling thread no longer owns `seg` (released, or NULL: every
 *  segment, at its heap's exit): ak_free's cached segment goes. */
static inline void _ak_mtls_forget(const void *seg) {
  if (!seg || _ak_tl.seg == (uintptr_t)seg) _ak_tl.seg = AK_SEG_UNSEEN;
}
/** The live heaps (heap.c registers and retires them) and the abandoned
 *  segments (heap.c abandons and adopts them), each under its mutex; the
 *  statistics read their lengths. */
extern pthread_mutex_t _ak_heaps_mu;
extern _ak_dlist _ak_heap_list; /* live heaps (_ak_mheap.gnode), under _ak_heaps_mu */
extern _ak_dlist _ak_abandoned; /* abandoned segments (_ak_segment.node), under _ak_abandoned_mu */
extern pthread_mutex_t _ak_abandoned_mu;
/** Folds the cumulative counts of `h`, whose thread exits, into those of
 *  the exited heaps (once per exit, after the thread's last counts). */
void _ak_heap_exited(const _ak_mheap *h);
/** Blocks handed out and bytes asked for, ever, by every thread (the
 *  running threads' counts as of their last slow path, the caller's now). */
void _ak_heap_totals(uint64_t *blocks, uint64_t *bytes);

/** Mask of `k` pages from page `at` (bit i: page i). */
#define AK_ALL_PAGES UINT64_MAX
static inline uint64_t _ak_run_bits(unsigned at, unsigned k) {
  return (k == 64 ? AK_ALL_PAGES : ((UINT64_C(1) << k) - 1)) << at;
}

/** The checked build's invariant checks, called as
 *  AK_ASSERT(_ak_segment_validate(seg, where)) (so only that build
 *  evaluates them); each aborts through _ak_fatal naming `where` and the
 *  broken invariant, or returns true. _ak_segment_validate: a small
 *  segment's masks, and its spans tiling its pages in use (the caller
 *  holds the segment's lock, or _ak_abandoned_mu for an abandoned one).
 *  _ak_page_validate: span head `pg`'s block area, counts and local free
 *  list, walked (O(its length); the caller owns the span). */
bool _ak_segment_validate(const _ak_segment *seg, const char *where);
bool _ak_page_validate(const _ak_page *pg, const char *where);

/** The pages of `seg` whose descriptors were ever written (carved_mask):
 *  what a walk over the descriptors reads, so that it never maps a header
 *  page that no span has touched (from the zero page, which the first span
 *  there then faults again). Set by the owner only; relaxed atomic, as
 *  other threads' walks read it. */
static inline uint64_t _ak_seg_carved(const _ak_segment *seg) {
  return __atomic_load_n(&seg->carved_mask, __ATOMIC_RELAXED);
}
/** Records that the descriptors of `bits` are written (owner). */
static inline void _ak_seg_carve(_ak_segment *seg, uint64_t bits) {
  __atomic_store_n(&seg->carved_mask, seg->carved_mask | bits, __ATOMIC_RELAXED);
}

/* ---- large.c ------------------------------------------------------------------- */
/** Large blocks: own mapping, header segment; freed mappings go to the
 *  large-block cache. `zero`: the block reads as zero. NULL + errno. */
void *_ak_large_alloc(size_t n, size_t align, bool zero);
void _ak_large_free(_ak_segment *seg);
void *_ak_large_realloc(_ak_segment *seg, void *p, size_t n);
/** The large-block cache's policy step (large.c): unmaps cached mappings
 *  past the release delay (all with force) and decommits the oldest past
 *  the budget (the recent peak of large bytes in use, less what is in use). */
void _ak_large_cache_trim(bool force, uint64_t now_ms);
/** True if the large-block cache holds a mapping (a racy peek). */
bool _ak_large_cache_pending(void);
/** Huge-aligned blocks (block on a segment boundary, align >= 4 MiB). */
void *_ak_huge_aligned_alloc(size_t n, size_t align);
bool _ak_huge_aligned_free(void *p);
size_t _ak_huge_aligned_size(const void *p);
/** fork(): the huge-aligned registry's and the large cache's locks. */
void _ak_large_fork_prepare(void);
void _ak_large_fork_parent(void);

/* ---- the heap's segment lock (see _ak_mheap.seg_lock) -------------------------- */
#define AK_SEG_LOCK_FROZEN 3u
/** The owner enters a section that changes h's segments (nests). */
static inline void _ak_heap_seg_enter(_ak_mheap *h) {
  if (h->seg_depth++ != 0) return;
  for (unsigned free_ = 0; !atomic_compare_exchange_weak_explicit(&h->seg_lock, &free_, 1,
                                                                  memory_order_acquire, memory_order_relaxed);
       free_ = 0)
    sched_yield(); /* the background thread purges h: a few system calls */
}
/** ... and leaves it. */
static inline void _ak_heap_seg_leave(_ak_mheap *h) {
  AK_ASSERT(h->seg_depth > 0 && atomic_load_explicit(&h->seg_lock, memory_order_relaxed) == 1);
  if (--h->seg_depth == 0) atomic_store_explicit(&h->seg_lock, 0, memory_order_release);
}

/* ---- span.c ---------------------------------------------------------------------- */
/** A fresh span for class `cls` in one of `h`'s segments (mapping a new
 *  segment if none has room), block geometry set, on no list. NULL + errno. */
_ak_page *_ak_span_alloc(_ak_mheap *h, unsigned cls);
/** Returns the span `pg` (on no list) to its segment `seg`; releases the
 *  segment when it is entirely free and `h` keeps another free one (or
 *  took it only to settle it). `h` NULL: an abandoned segment, kept. */
void _ak_span_free(_ak_mheap *h, _ak_segment *seg, _ak_page *pg);
/** Solo spans (AK_SOLO_MIN < n <= AK_SOLO_MAX): a span of whole pages
 *  holding one block. The pages for `n` bytes; the best-fit place for k
 *  pages in h's segments (NULL: none has room); the block of `n` bytes
 *  made at page `at` of `seg` (seg NULL: a fresh segment), `zero`: reading
 *  as zero. NULL + errno. */
unsigned _ak_solo_pages(size_t n);
_ak_segment *_ak_solo_place(_ak_mheap *h, unsigned k, int *at);
void *_ak_solo_take(_ak_mheap *h, _ak_segment *seg, int at, size_t n, bool zero);
/** Resizes solo block `p` (its owner's thread) in place to hold `n` bytes:
 *  grows into the free pages after it or gives back tail pages. Returns
 *  false (nothing changed) if it cannot. */
bool _ak_solo_resize(_ak_mheap *h, _ak_segment *seg, _ak_page *pg, size_t n);
/** Frees the solo spans of `h` that other threads freed (remote lists). */
void _ak_solo_collect(_ak_mheap *h);

/* ---- page.c ---------------------------------------------------------------------- */
/** The block `p` (not NULL, in segment `seg`) checked for `call` before
 *  anything of the segment is read: the segment map must know the
 *  segment, then the header and page must agree that `p` starts a live
 *  block (or lies in a block of a page with AK_PG_ALIGNED). Returns the
 *  page, or NULL for a large block; otherwise one message naming the call,
 *  the pointer and the reason, then abort() - in every build, as glibc's
 *  "free(): invalid pointer". Huge-aligned blocks are the caller's to look
 *  up first. */
_ak_page *_ak_block_check(const char *call, const void *p, _ak_segment *seg);
/** The usable size of block `p` (not NULL), checked as _ak_block_check
 *  does (huge-aligned blocks included). */
size_t _ak_block_checked_size(const char *call, const void *p);
/** Checked and hardened builds, before block `p` (a block start) of `pg`
 *  is freed: a double free (`p` on the owner's list when `mine`, or on the
 *  remote list) ends the program with a message; the checked build fills
 *  the block with 0xdf after its link (malloc verifies the fill). */
void _ak_block_free_check(_ak_page *pg, void *p, bool mine);
/** A local free emptied `pg` or moved it off its full list: it goes back
 *  to its queue, or, empty and not the class's last one-page span, to its
 *  segment. */
void _ak_page_retire(_ak_mheap *h, _ak_page *pg);
/** Moves `pg`'s remote list onto its free list (owner, or the abandoned
 *  list's lock holder); returns how many blocks. */
uint32_t _ak_page_collect(_ak_page *pg);
/** A page of class `cls` on h's queue with a free block (collecting
 *  remote frees, carving, moving pages without any to the full list), or
 *  a full page that other threads freed into; NULL if none. */
_ak_page *_ak_page_find(_ak_mheap *h, unsigned cls);
/** A fresh span of class `cls`, first on its queue, some blocks carved.
 *  NULL + errno. */
_ak_page *_ak_page_fresh(_ak_mheap *h, unsigned cls);
/** The pages of `seg`, an abandoned segment `h` just took: remote frees
 *  collected, empty spans back to the segment, the rest on h's queues or
 *  full lists. */
void _ak_pages_adopt(_ak_mheap *h, _ak_segment *seg);
/** Collects remote frees into h's pages and releases empty ones (all with
 *  force, else those that are not the last of their class). Owner only. */
void _ak_pages_collect(_ak_mheap *h, bool force);
extern _ak_page _ak_empty_page;

/* ---- fatal.c ----------------------------------------------------------------------- */
/** One message naming `call`, `p`, `why` (and the size class when cls <
 *  AK_NCLS) through _ak_fatal, the library's one fatal-error path (it
 *  abort()s). Allocates nothing. */
_Noreturn void _ak_malloc_fatal(const char *call, const void *p, const char *why, unsigned cls);

/* ---- heap.c ---------------------------------------------------------------------- */
_ak_mheap *_ak_heap_get(void);     /* the thread's heap, created on demand */
void _ak_malloc_tables_init(void); /* size classes and options, once */
/** The slow paths of ak_malloc (any size) and ak_free (any pointer). The
 *  malloc fast path has taken `n` off the countdown already when n <= 1024. */
void *_ak_malloc_slow(size_t n);
/** Counts block `p` of `n` bytes that `h`'s thread allocated outside the
 *  fast path and _ak_malloc_slow (calloc, aligned and grown blocks): the
 *  countdown and the cumulative counts (_ak_mtls). */
void _ak_heap_count(_ak_mheap *h, void *p, size_t n);
/** The heap profiler's marks (prof.c): the free of a block that
 *  _ak_prof_record may keep (before it can be handed out again; no lock
 *  held; `pg` NULL: a large block), and a kept large block that realloc
 *  resized to `n` bytes at `to` (maybe `from`): kept again there. */
void _ak_malloc_prof_free(_ak_segment *seg, _ak_page *pg, void *p, bool mine);
void _ak_malloc_prof_moved(void *from, void *to, size_t n);
/** The allocation slow path sampled `p` (`n` bytes, just allocated by the
 *  calling thread, no lock held): record and mark it. */
void _ak_malloc_prof_sampled(void *p, size_t n);
void _ak_free_slow(void *p, _ak_segment *seg);
/** A solo block of `n` bytes for `h`: h's segments, then abandoned ones,
 *  then a fresh segment. NULL + errno. */
void *_ak_heap_solo_alloc(_ak_mheap *h, size_t n, bool zero);
/** The free fast path emptied `pg` of `h`: the purge tick, then
 *  _ak_page_retire. */
void _ak_heap_retire(_ak_mheap *h, _ak_page *pg);
void _ak_heap_collect(_ak_mheap *h, bool force); /* h may be NULL: abandoned segments only */

/* ---- options.c ---------------------------------------------------------------------- */
/** Reads the options from the environment, once (later calls return at
 *  once). No malloc: safe before the first heap exists. */
void _ak_options_init(void);
/** The options' values, but AK_OPTION_PURGE_DELAY's (the reclaim policy
 *  keeps that one): read after _ak_options_init. */
extern atomic_long _ak_options[AK_OPTION_COUNT_];
/** AK_SHOW_STATS=file:PATH / json:PATH: PATH as given ("%p" not expanded),
 *  or "" (the report goes to stderr). Set by _ak_options_init. */
const char *_ak_options_report_path(void);

/* ---- stats.c ------------------------------------------------------------------------ */
/** Stamps the heap's start (the exit report's header) and registers the
 *  AK_SHOW_STATS printer with atexit, which may allocate: called once the
 *  first heap is in place. */
void _ak_stats_at_exit(void);

/* ---- free-list links -----------------------------------------------------------
 * Every link in a free block (local and remote lists) is read and written
 * through the library's link codec (arenakit/detail/link.h) with the
 * span's key: hardened (harden.h), a random key per span; otherwise 0 as a
 * compile-time constant, so the codec is a plain load or store. */

/** The key the links of `pg`'s free blocks are encoded with. */
static inline uintptr_t _ak_page_key(const _ak_page *pg) { return ak_harden_encode ? pg->key : 0; }

/** The link stored in free block `b` of `pg`, decoded. */
static inline void *_ak_blk_next(const _ak_page *pg, const void *b) {
  return _ak_link_get(b, _ak_page_key(pg));
}

/** Stores `next` as the link of free block `b` of `pg`. */
static inline void _ak_blk_set_next(const _ak_page *pg, void *b, const void *next) {
  _ak_link_set(b, next, _ak_page_key(pg));
}

/** The blocks on `pg`'s free list (owner only; a list longer than the
 *  page's capacity stops the count there). For AK_ASSERT. */
static inline size_t _ak_page_free_count(const _ak_page *pg) {
  size_t n = 0;
  for (const void *b = pg->free; b && n <= pg->capacity; b = _ak_blk_next(pg, b)) n++;
  return n;
}

/** True if `x` lies in the block area of `pg`. */
static inline bool _ak_blk_in(const _ak_page *pg, const void *x) {
  return (uintptr_t)x - pg->start < pg->end - pg->start;
}

/** Pops the head `b` of `pg`'s free list. With the links mitigation a link
 *  that leaves the span aborts naming `call`. */
static inline void _ak_blk_pop(_ak_page *pg, void *b, const char *call) {
  void *next = _ak_blk_next(pg, b);
  if (ak_harden_links && AK_UNLIKELY(next != NULL && !_ak_blk_in(pg, next)))
    _ak_malloc_fatal(call, b, "corrupted free list (a write after free or a forged link)", pg->cls);
  pg->free = next;
  /* Hardened: no stale link in a handed-out block, so that freeing it
   * untouched does not look like a double free (and search the lists):
   * the stored word 0 (key 0), which decodes to no block of the page. */
  if (ak_harden_double_free) _ak_link_set(b, NULL, 0);
}

/** Hardened double-free check, cheap part: true if the first word of `b`
 *  decodes to NULL or a block address of `pg`, as a free block's link does. */
static inline bool _ak_blk_looks_free(const _ak_page *pg, const void *b) {
  void *next = _ak_blk_next(pg, b);
  return next == NULL || _ak_blk_in(pg, next);
}

/** True if `p` is the start of one of the `capacity` blocks of class span
 *  `pg` (p == start + i * block_size, 0 <= i < capacity), for any `p`: a
 *  pointer inside a block, before `start` (the segment header) or after the
 *  blocks gives false. A multiplication, no division: with block_size =
 *  odd << shift, (p - start) * inverse(odd) rotated right by shift is the
 *  block index if block_size divides p - start, and above any possible
 *  index (2^64 / block_size) otherwise (Granlund-Montgomery). */
static inline bool _ak_blk_is_start(const _ak_page *pg, const void *p) {
  uint64_t x = (uint64_t)((uintptr_t)p - pg->start) * pg->blk_inv;
  unsigned s = pg->blk_shift;
  uint64_t idx = s ? (x >> s) | (x << (64 - s)) : x;
  return idx < pg->capacity;
}

static inline _ak_segment *_ak_seg_of(const void *p) { return (_ak_segment *)((uintptr_t)p & ~AK_SEG_MASK); }
static inline _ak_page *_ak_page_of(_ak_segment *seg, const void *p) {
  _ak_page *pg = &seg->pages[((uintptr_t)p & AK_SEG_MASK) >> AK_PAGE_SHIFT];
  return pg - pg->head_off;
}
static inline uint32_t _ak_used(const _ak_page *pg) {
  return atomic_load_explicit((_Atomic uint32_t *)&pg->used, memory_order_relaxed);
}
static inline void _ak_used_set(_ak_page *pg, uint32_t v) {
  atomic_store_explicit(&pg->used, v, memory_order_relaxed);
}

/** Pushes block `p` (live, not on any list) on the free list of `pg`, whose
 *  owner this thread is: one fewer live block. */
static inline void _ak_blk_push(_ak_page *pg, void *p) {
  AK_ASSERT(_ak_used(pg) > 0 && _ak_used(pg) <= pg->capacity);
  _ak_blk_set_next(pg, p, pg->free);
  pg->free = p;
  _ak_used_set(pg, _ak_used(pg) - 1);
}

/** Pushes block `p` on the remote list of `pg`, a page this thread does
 *  not own: one CAS, no lock. The owner collects it; for an abandoned
 *  segment (owner AK_OWNER_NONE) the thread that adopts it, or the sweep
 *  of abandoned segments. */
static inline void _ak_blk_push_remote(_ak_page *pg, void *p) {
  void *head = atomic_load_explicit(&pg->remote, memory_order_relaxed);
  do {
    _ak_blk_set_next(pg, p, head);
  } while (!atomic_compare_exchange_weak_explicit(&pg->remote, &head, p, memory_order_release,
                                                  memory_order_relaxed));
}

#endif /* AK_MALLOC_INTERNAL_H */
