/* SPDX-License-Identifier: MIT */
/* stats_internal.h - what the general heap's statistics read beside the
 * public struct: the large-block cache's bytes and the kernel's figures
 * for this process (internal). */
#ifndef AK_MALLOC_STATS_INTERNAL_H
#define AK_MALLOC_STATS_INTERNAL_H

#include <stddef.h>

/** Bytes mapped by the large-block cache's entries (*mapped) and the part
 *  of them still committed (*dirty). Thread-safe (takes the cache's leaf
 *  lock). */
void _ak_large_cache_bytes(size_t *mapped, size_t *dirty);

/** Bytes of the empty segments kept for reuse (the reclaim policy's
 *  spares: *mapped) and the part of them still committed. Thread-safe. */
void _ak_segment_spare_bytes(size_t *mapped, size_t *committed);

/** The kernel's view of this process: resident set now (VmRSS) and its
 *  high-water mark (VmHWM) from /proc/self/status, with getrusage's
 *  ru_maxrss when that file cannot be read; the peak is never below the
 *  current figure. 0 for what the system does not give. Allocates nothing. */
void _ak_process_rss(size_t *rss, size_t *peak_rss);

#endif /* AK_MALLOC_STATS_INTERNAL_H */
