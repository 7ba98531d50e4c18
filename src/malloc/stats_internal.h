/* SPDX-License-Identifier: MIT */
/* stats_internal.h - what the general heap's statistics read beside the
 * public struct: the caches' bytes (large.c, segment.c), and the figures
 * beyond the struct that stats.c gathers for the report and
 * ak_malloc_stat (internal). */
#ifndef AK_MALLOC_STATS_INTERNAL_H
#define AK_MALLOC_STATS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "arenakit/malloc.h"

/** Bytes mapped by the large-block cache's entries (*mapped) and the part
 *  of them still committed (*dirty). Thread-safe (takes the cache's leaf
 *  lock). */
void _ak_large_cache_bytes(size_t *mapped, size_t *dirty);

/** Bytes of the empty segments kept for reuse (the reclaim policy's
 *  spares: *mapped) and the part of them still committed. Thread-safe. */
void _ak_segment_spare_bytes(size_t *mapped, size_t *committed);

/** What the statistics add to the public struct (ak_malloc_stat's names). */
typedef struct _ak_stats_extra {
  uint64_t allocations;            /* blocks handed out, ever */
  uint64_t frees;                  /* allocations - live_blocks */
  uint64_t bytes_allocated;        /* bytes asked for, ever */
  uint64_t live_blocks;            /* every kind: class, solo and large blocks */
  uint64_t active;                 /* bytes of the spans in use plus large mappings */
  uint64_t mapped;                 /* segments, spare segments, large blocks, cached mappings */
  size_t spare, spare_committed;   /* empty segments kept for reuse */
  size_t cached, cached_committed; /* freed large mappings kept for reuse */
  size_t rss, peak_rss;            /* the kernel's VmRSS, VmHWM (stats.c) */
} _ak_stats_extra;

/** Fills `x` for the snapshot `s` (ak_malloc_stats_get's): one more walk of
 *  the segments, the cumulative counts, the caches, the kernel's figures.
 *  Thread-safe; allocates nothing. */
void _ak_stats_extra_get(const ak_malloc_stats *s, _ak_stats_extra *x);

#endif /* AK_MALLOC_STATS_INTERNAL_H */
