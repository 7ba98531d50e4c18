/* SPDX-License-Identifier: MIT */
/* stat_named.c - ak_malloc_stat, the general heap's statistics read one
 * by name.
 *
 * Each call takes a fresh snapshot (stats.c): ak_malloc_stats_get (the
 * registry walk, mincore) and _ak_stats_extra_get (one more walk for what
 * the public struct does not hold, the cumulative counts, the caches,
 * /proc/self/status).
 * The name is looked up first, so an unknown one costs no walk. Nothing
 * here allocates: the drop-in's mallinfo2 and malloc_info call it from
 * inside malloc's replacement. */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "malloc/malloc_internal.h"
#include "malloc/stats_internal.h"

enum {
  ST_ALLOCATED,
  ST_PEAK_ALLOCATED,
  ST_ACTIVE,
  ST_COMMITTED,
  ST_PEAK_COMMITTED,
  ST_RESIDENT,
  ST_MAPPED,
  ST_ALLOCATIONS,
  ST_FREES,
  ST_BYTES_ALLOCATED,
  ST_LIVE_BLOCKS,
  ST_SEGMENTS,
  ST_HEAPS,
  ST_ABANDONED,
  ST_LARGE_BLOCKS,
  ST_LARGE_BYTES,
  ST_LARGE_CACHED,
  ST_LARGE_CACHED_COMMITTED,
  ST_SPARE,
  ST_SPARE_COMMITTED,
  ST_RSS,
  ST_PEAK_RSS,
  ST_COUNT_
};

static const char *const stat_names[ST_COUNT_] = {
    [ST_ALLOCATED] = "allocated",
    [ST_PEAK_ALLOCATED] = "peak_allocated",
    [ST_ACTIVE] = "active",
    [ST_COMMITTED] = "committed",
    [ST_PEAK_COMMITTED] = "peak_committed",
    [ST_RESIDENT] = "resident",
    [ST_MAPPED] = "mapped",
    [ST_ALLOCATIONS] = "allocations",
    [ST_FREES] = "frees",
    [ST_BYTES_ALLOCATED] = "bytes_allocated",
    [ST_LIVE_BLOCKS] = "live_blocks",
    [ST_SEGMENTS] = "segments",
    [ST_HEAPS] = "heaps",
    [ST_ABANDONED] = "abandoned_segments",
    [ST_LARGE_BLOCKS] = "large.blocks",
    [ST_LARGE_BYTES] = "large.bytes",
    [ST_LARGE_CACHED] = "large.cached",
    [ST_LARGE_CACHED_COMMITTED] = "large.cached_committed",
    [ST_SPARE] = "spare.segments",
    [ST_SPARE_COMMITTED] = "spare.segments_committed",
    [ST_RSS] = "process.rss",
    [ST_PEAK_RSS] = "process.peak_rss",
};

/* Every figure of the table above, in `v`. */
static void snapshot(uint64_t v[ST_COUNT_]) {
  ak_malloc_stats s;
  ak_malloc_stats_get(&s);
  _ak_stats_extra x;
  _ak_stats_extra_get(&s, &x);
  v[ST_ALLOCATED] = s.allocated;
  v[ST_PEAK_ALLOCATED] = s.peak_allocated;
  v[ST_ACTIVE] = x.active;
  v[ST_COMMITTED] = s.committed;
  v[ST_PEAK_COMMITTED] = s.peak_committed;
  v[ST_RESIDENT] = s.resident;
  v[ST_MAPPED] = x.mapped;
  v[ST_ALLOCATIONS] = x.allocations;
  v[ST_FREES] = x.frees;
  v[ST_BYTES_ALLOCATED] = x.bytes_allocated;
  v[ST_LIVE_BLOCKS] = x.live_blocks;
  v[ST_SEGMENTS] = s.segments;
  v[ST_HEAPS] = s.heaps;
  v[ST_ABANDONED] = s.abandoned;
  v[ST_LARGE_BLOCKS] = s.large_blocks;
  v[ST_LARGE_BYTES] = s.large_bytes;
  v[ST_LARGE_CACHED] = x.cached;
  v[ST_LARGE_CACHED_COMMITTED] = x.cached_committed;
  v[ST_SPARE] = x.spare;
  v[ST_SPARE_COMMITTED] = x.spare_committed;
  v[ST_RSS] = x.rss;
  v[ST_PEAK_RSS] = x.peak_rss;
}

/* The drop-in's mallinfo2 and malloc_info read several figures of one
 * snapshot through this (src/shim declares it): values[i] gets names[i];
 * 0, or -1 with ENOENT (the unknown names' values left alone) or EINVAL. */
int _ak_malloc_stats_named(const char *const *names, uint64_t *values, size_t n);

int _ak_malloc_stats_named(const char *const *names, uint64_t *values, size_t n) {
  int which[ST_COUNT_ * 2];
  if (!names || !values || n > sizeof which / sizeof *which) {
    errno = EINVAL;
    return -1;
  }
  bool unknown = false;
  for (size_t k = 0; k < n; k++) {
    which[k] = -1;
    for (int i = 0; names[k] && i < ST_COUNT_; i++)
      if (!strcmp(names[k], stat_names[i])) which[k] = i;
    unknown |= which[k] < 0;
  }
  if (unknown && n == 1) { /* one unknown name: no walk */
    errno = ENOENT;
    return -1;
  }
  uint64_t v[ST_COUNT_];
  snapshot(v);
  for (size_t k = 0; k < n; k++)
    if (which[k] >= 0) values[k] = v[which[k]];
  if (unknown) errno = ENOENT;
  return unknown ? -1 : 0;
}

int ak_malloc_stat(const char *name, uint64_t *value) {
  if (!value) {
    int known = -1;
    for (int i = 0; name && i < ST_COUNT_; i++)
      if (!strcmp(name, stat_names[i])) known = i;
    errno = known < 0 ? ENOENT : EINVAL;
    return -1;
  }
  return _ak_malloc_stats_named(&name, value, 1);
}
