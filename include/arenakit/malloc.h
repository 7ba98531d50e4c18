/* SPDX-License-Identifier: MIT */
/* arenakit/malloc.h - the general-purpose heap: ak_malloc and friends, and
 * the drop-in replacement of the C library's malloc built from them.
 *
 * Every thread allocates from its own heap: one free list per size class
 * over 64 KiB pages carved from 4 MiB segments; a free from another thread
 * goes onto the page's remote list with one atomic operation; a block
 * above 64 KiB has whole pages of its own (realloc grows and shrinks it in
 * place when the pages after it are free); sizes above about 4 MiB get
 * their own mapping. The same functions back the drop-in
 * library libarenakit-malloc.so (LD_PRELOAD or link), which exports them as
 * malloc, free, operator new, ...
 *
 * Thread-safety: every function may be called from any thread; a block may
 * be freed by any thread. Errors: NULL with errno (ENOMEM, or EINVAL for a
 * bad alignment); nothing aborts on out-of-memory. A request beyond what the
 * system can commit (RAM + swap under the default overcommit policy, the
 * commit limit under the strict one, RLIMIT_AS) fails at once with ENOMEM,
 * as glibc's does.
 *
 * Bad pointers: ak_free, ak_realloc and ak_usable_size look a pointer up
 * in a map of the address ranges this heap owns before they read anything
 * of it. A pointer it did not hand out - on the stack, in static data, from
 * another allocator or an mmap'd region, an unmapped address, a pointer
 * inside a block, a large block already freed - ends the program in every
 * build with one line on stderr, "arenakit: CALL(PTR): invalid pointer
 * (REASON)", and abort(), as glibc's "free(): invalid pointer". A double
 * free of a small block is caught in the checked and hardened builds only.
 */
#ifndef ARENAKIT_MALLOC_H
#define ARENAKIT_MALLOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "arenakit/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/** malloc(n): at least `n` bytes aligned to 16 (8 for n <= 8), owned by the
 *  caller until ak_free(). n == 0 gives a unique pointer. NULL + ENOMEM. */
AK_API AK_MALLOC_LIKE AK_ALLOC_SIZE(1) void *ak_malloc(size_t n);

/** calloc: `count * size` zeroed bytes; NULL + ENOMEM if the product
 *  overflows or memory runs out. */
AK_API AK_MALLOC_LIKE void *ak_calloc(size_t count, size_t size);

/** realloc, with glibc's edge cases: p == NULL acts as ak_malloc(n); n == 0
 *  frees p and returns NULL. Keeps the block when it still fits; blocks
 *  above 64 KiB grow and shrink in place while the pages after them are
 *  free, blocks above about 4 MiB grow in place or move by remapping (no
 *  copy). On failure returns
 *  NULL with ENOMEM and `p` is untouched. A `p` not handed out aborts with
 *  a message (see "Bad pointers" above). */
AK_API void *ak_realloc(void *p, size_t n);

/** reallocarray: ak_realloc(p, count * size) with the product checked
 *  (NULL + ENOMEM on overflow, `p` untouched). */
AK_API void *ak_reallocarray(void *p, size_t count, size_t size);

/** Frees a block from any ak_ allocation function, from any thread.
 *  NULL is ignored; any other pointer not handed out aborts with a message
 *  (see "Bad pointers" above). */
AK_API void ak_free(void *p);

/** Frees block `p` of `n` bytes (the size it was allocated or last
 *  reallocated with), from any thread: C23's free_sized, and what the
 *  drop-in's sized operator delete uses. NULL is ignored. In the hardened
 *  and checked builds the size is checked: an `n` larger than the block ends the program
 *  with one line naming the call, the pointer and both sizes, then abort()
 *  (the drop-in's operator delete also requires the block to be of the
 *  size class `n` maps to). In the other builds it is ak_free(p). */
AK_API void ak_free_sized(void *p, size_t n);

/** ak_free_sized for a block of ak_aligned_alloc(align, n) (C23's
 *  free_aligned_sized): the hardened and checked builds also check that
 *  `p` is aligned to `align`. */
AK_API void ak_free_aligned_sized(void *p, size_t align, size_t n);

/** aligned_alloc: `align` must be a power of two (else NULL + EINVAL);
 *  any size is accepted, as glibc does. */
AK_API AK_MALLOC_LIKE void *ak_aligned_alloc(size_t align, size_t n);

/** posix_memalign: returns 0, EINVAL (align not a power of two multiple of
 *  sizeof(void *)) or ENOMEM; *out is set only on success; errno is not
 *  changed. */
AK_API int ak_posix_memalign(void **out, size_t align, size_t n);

/** memalign (glibc): an alignment that is not a power of two is rounded up
 *  to one. */
AK_API AK_MALLOC_LIKE void *ak_memalign(size_t align, size_t n);

/** The usable size of a block (>= what was asked); 0 for NULL; a pointer
 *  not handed out aborts with a message (see "Bad pointers" above).
 *  Thread-safe. */
AK_API size_t ak_usable_size(const void *p);

/** Gives memory back to the OS: decommits empty pages whose purge delay has
 *  passed (all of them with `force`), collects the calling thread's remote
 *  frees and releases empty segments; also settles the segments of exited
 *  threads (their remote frees, their empty pages and segments), from any
 *  thread, even one that never allocated. Thread-safe. */
AK_API void ak_collect(bool force);

/** Totals and per-size-class figures (ak_malloc_stats_get). Version 1. */
typedef struct ak_malloc_stats {
  unsigned version;         /**< AK_MALLOC_STATS_VERSION */
  size_t allocated;         /**< bytes in live blocks (block sizes) */
  size_t peak_allocated;    /**< high-water mark of `allocated` (sampled at
                                 slow-path events) */
  size_t committed;         /**< bytes mapped and not decommitted */
  size_t peak_committed;    /**< high-water mark of `committed` */
  size_t resident;          /**< bytes of segments resident in RAM (mincore) */
  size_t segments;          /**< 4 MiB segments held */
  size_t large_blocks;      /**< blocks above ~4 MiB (own mappings) */
  size_t large_bytes;       /**< their mapped bytes */
  size_t heaps;             /**< thread heaps alive */
  size_t abandoned;         /**< segments of exited threads not yet adopted */
  size_t nclasses;          /**< entries used in the arrays below */
  size_t class_size[128];   /**< block size of each class */
  size_t class_blocks[128]; /**< live blocks per class */
  size_t class_pages[128];  /**< pages (spans) per class */
} ak_malloc_stats;

#define AK_MALLOC_STATS_VERSION 1u

/** Fills `out`; a consistent snapshot only when other threads are quiet. */
AK_API void ak_malloc_stats_get(ak_malloc_stats *out);

/** Reads one statistic by name, in the spirit of jemalloc's mallctl:
 *  *value gets the figure (bytes or a count) and 0 is returned; an unknown
 *  name (or NULL) gives -1 with errno ENOENT, a NULL `value` -1 with
 *  EINVAL. Names (docs/stats.md has the full list):
 *    allocated, peak_allocated  bytes in live blocks (block sizes)
 *    active                     bytes of the malloc pages (spans) in use plus the
 *                               large blocks' mappings
 *    committed, peak_committed  bytes mapped and not given back
 *    resident                   bytes of segments in RAM (mincore)
 *    mapped                     bytes of address space held (segments,
 *                               large blocks, cached large mappings)
 *    allocations, frees         blocks handed out and freed, ever (frees =
 *                               allocations - live blocks)
 *    bytes_allocated            bytes asked for, ever
 *    live_blocks, segments, heaps, abandoned_segments
 *    large.blocks, large.bytes  blocks above the largest span size and their mappings
 *    large.cached               bytes of freed large mappings kept for reuse
 *    process.rss, process.peak_rss  the kernel's VmRSS and VmHWM
 *  Cumulative counts of other running threads are as of their last slow
 *  path (a refill, a large block). Thread-safe; walks the segments (cost
 *  grows with the heap); allocates nothing. */
AK_API int ak_malloc_stat(const char *name, uint64_t *value);

/** Prints the stats to `f` in human units (KiB, MiB, GiB): allocated,
 *  committed and resident bytes with their peaks, the process's resident
 *  set and minor/major page faults as the kernel counts them, then one line
 *  per size class in use; then flushes `f`. 0 once every byte reached the
 *  stream's file; -1 with errno from stdio (ENOSPC on a full device, EBADF,
 *  ...; EIO if stdio gave none) and ak_last_error() naming the call when a
 *  write or the flush failed or the stream was already in error; EINVAL if
 *  `f` is NULL. Thread-safe (one report at a time); allocates nothing. */
AK_API int ak_malloc_stats_print(FILE *f);

/** Run-time options. Each has an environment variable named after it,
 *  read once when the heap starts; precedence: built-in default <
 *  environment < ak_option_set(). An environment value that is not valid
 *  (not a number, out of range, trailing text) is rejected with one line on
 *  stderr naming the variable and the value, and the default is used. */
typedef enum ak_option AK_ENUM_INT {
  AK_OPTION_SHOW_STATS = 0,  /**< AK_SHOW_STATS: a report at exit by
                                  every process that used the heap
                                  (AK_SHOW_STATS_OFF, _TEXT, _JSON;
                                  environment: 0, 1, json or 2, file:PATH
                                  or json:PATH, "%p" in PATH = the pid);
                                  to stderr, or when stderr is closed to
                                  arenakit-stats.<pid>.txt in the current
                                  directory (else $TMPDIR) */
  AK_OPTION_VERBOSE = 1,     /**< AK_VERBOSE: print options and warnings (0/1) */
  AK_OPTION_PURGE_DELAY = 2, /**< AK_PURGE_DELAY: ms before a free page of
                                  a segment whose thread exited is
                                  decommitted (default 10; 0 = at once,
                                  every free page, and no large mapping is
                                  cached; -1 = only on ak_collect, cached
                                  large mappings too; at most 86400000).
                                  This is the reclaim policy's page delay
                                  (arenakit/reclaim.h: the same value as
                                  ak_reclaim_set_page_delay() sets); a
                                  running thread's free pages and the empty
                                  segments follow that policy's purge and
                                  release delays, and its background
                                  thread */
  AK_OPTION_COUNT_ = 3
} ak_option;

/** Values of AK_OPTION_SHOW_STATS: no report, the readable report (program
 *  name, pid, elapsed time, sizes in KiB/MiB/GiB), or one JSON object per
 *  process on one line (bytes as integers). */
enum { AK_SHOW_STATS_OFF = 0, AK_SHOW_STATS_TEXT = 1, AK_SHOW_STATS_JSON = 2 };

/** Reads an option's value (thread-safe). An unknown option gives 0 with
 *  EINVAL. */
AK_API long ak_option_get(ak_option o);
/** Sets an option (thread-safe; takes effect at the next use). Unknown
 *  options, and values outside the option's range, are ignored with EINVAL
 *  (and, for a value, the reason in ak_last_error()). */
AK_API void ak_option_set(ak_option o, long value);

#ifdef __cplusplus
}
#endif

#endif /* ARENAKIT_MALLOC_H */
