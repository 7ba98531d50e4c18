/* SPDX-License-Identifier: MIT */
/* stat_named.c - ak_malloc_stat, the general heap's statistics read one
 * by name, and the kernel's resident-set figures they share with the exit
 * report.
 *
 * Each call takes a fresh snapshot: ak_malloc_stats_get (the registry
 * walk, mincore), one more walk for what the public struct does not hold
 * (live blocks of every kind, the pages of spans in use), the cumulative
 * counts (_ak_heap_totals), the large-block cache and /proc/self/status.
 * The name is looked up first, so an unknown one costs no walk. Nothing
 * here allocates: the drop-in's mallinfo2 and malloc_info call it from
 * inside malloc's replacement. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "malloc/malloc_internal.h"
#include "malloc/stats_internal.h"
#include "os/os_mem.h"

/* "Name:   123 kB" in the text of /proc/self/status: the bytes, or 0. */
static size_t status_kib(const char *text, const char *name) {
  const char *at = strstr(text, name);
  if (!at) return 0;
  return (size_t)strtoull(at + strlen(name), NULL, 10) * 1024;
}

void _ak_process_rss(size_t *rss, size_t *peak_rss) {
  *rss = 0;
  *peak_rss = 0;
  char text[4096];
  int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n > 0) {
      text[n] = '\0';
      *rss = status_kib(text, "\nVmRSS:");
      *peak_rss = status_kib(text, "\nVmHWM:");
    }
  }
  struct rusage ru;
  if (!*peak_rss && getrusage(RUSAGE_SELF, &ru) == 0) *peak_rss = (size_t)ru.ru_maxrss * 1024; /* KiB */
  if (*peak_rss < *rss) *peak_rss = *rss; /* the two reads are not one instant */
}

/* What the public struct does not hold: live blocks of every kind (solo
 * spans included) and the bytes of the spans in use, small segments only. */
static void walk_spans(uint64_t *live, uint64_t *span_bytes) {
  uint64_t n = 0, bytes = 0;
  pthread_mutex_lock(&_ak_seg_mu);
  for (_ak_dnode *d = _ak_seg_list.head; d; d = d->next) {
    _ak_segment *s = _ak_seg_gat(d);
    if (s->kind != AK_SEG_SMALL) continue;
    for (unsigned i = 0; i < AK_SEG_PAGES; i++) {
      _ak_page *pg = &s->pages[i];
      /* Owners change these without our lock: relaxed atomic reads. */
      if (__atomic_load_n(&pg->head_off, __ATOMIC_RELAXED) ||
          !__atomic_load_n(&pg->block_size, __ATOMIC_RELAXED))
        continue;
      n += _ak_used(pg);
      bytes += (uint64_t)__atomic_load_n(&pg->span, __ATOMIC_RELAXED) * AK_PAGE_SIZE;
    }
  }
  pthread_mutex_unlock(&_ak_seg_mu);
  *live = n;
  *span_bytes = bytes;
}

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

void _ak_stats_extra_get(const ak_malloc_stats *s, _ak_stats_extra *x) {
  uint64_t live_small, span_bytes;
  walk_spans(&live_small, &span_bytes);
  _ak_heap_totals(&x->allocations, &x->bytes_allocated);
  _ak_large_cache_bytes(&x->cached, &x->cached_committed);
  _ak_segment_spare_bytes(&x->spare, &x->spare_committed);
  _ak_process_rss(&x->rss, &x->peak_rss);
  x->live_blocks = live_small + s->large_blocks;
  /* other threads' counts lag (as of their last slow path): never below 0 */
  x->frees = x->allocations > x->live_blocks ? x->allocations - x->live_blocks : 0;
  x->active = span_bytes + s->large_bytes;
  x->mapped = (uint64_t)s->segments * AK_SEG_SIZE + x->spare + s->large_bytes + x->cached;
}

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
