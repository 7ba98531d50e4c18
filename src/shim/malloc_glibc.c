/* SPDX-License-Identifier: MIT */
/* malloc_glibc.c - glibc's malloc introspection in the drop-in:
 * malloc_trim, mallinfo2, mallinfo, malloc_info and malloc_stats answer with arenakit's
 * heap (under the preload glibc's own would describe its unused heap).
 * docs/stats.md gives the mapping of arenakit's figures onto glibc's
 * fields.
 *
 * The structs are glibc's layouts, declared here (musl's <malloc.h> has
 * none of them; the symbols are what a program links against). Every
 * figure comes from one snapshot of the heap's statistics
 * (_ak_malloc_stats_named). Thread-safe; mallinfo and mallinfo2 allocate
 * nothing. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>

#include "arenakit/malloc.h"
#include "arenakit/reclaim.h"

#define EXPORT __attribute__((visibility("default")))

/* Several figures of one snapshot (src/malloc/stat_named.c): 0, or -1
 * with errno. */
int _ak_malloc_stats_named(const char *const *names, uint64_t *values, size_t n);

/* glibc's struct mallinfo2 and struct mallinfo (the same fields as int). */
struct ak_glibc_mallinfo2 {
  size_t arena, ordblks, smblks, hblks, hblkhd, usmblks, fsmblks, uordblks, fordblks, keepcost;
};
struct ak_glibc_mallinfo {
  int arena, ordblks, smblks, hblks, hblkhd, usmblks, fsmblks, uordblks, fordblks, keepcost;
};

enum {
  F_ALLOCATED,
  F_PEAK,
  F_COMMITTED,
  F_MAPPED,
  F_SEGMENTS,
  F_LBLOCKS,
  F_LBYTES,
  F_CACHED,
  F_CACHED_DIRTY,
  F_SPARE_DIRTY,
  F_N
};
static const char *const figure_names[F_N] = {"allocated",
                                              "peak_allocated",
                                              "committed",
                                              "mapped",
                                              "segments",
                                              "large.blocks",
                                              "large.bytes",
                                              "large.cached",
                                              "large.cached_committed",
                                              "spare.segments_committed"};

static size_t sub(uint64_t a, uint64_t b) { return a > b ? (size_t)(a - b) : 0; }

/* malloc_trim(pad): gives back every free page of the calling thread's
 * heap, the empty segments kept for reuse, the cached large mappings and
 * the free pages of exited threads' segments (ak_collect(true)), then runs
 * the reclaim policy over the other threads' spares (ak_reclaim_collect).
 * 1 when committed or mapped bytes went down, else 0. `pad` is ignored:
 * there is no heap top to keep. */
EXPORT int malloc_trim(size_t pad) {
  (void)pad;
  const char *names[2] = {"committed", "mapped"};
  uint64_t before[2] = {0, 0}, after[2] = {0, 0};
  (void)_ak_malloc_stats_named(names, before, 2);
  ak_collect(true);
  ak_reclaim_collect();
  (void)_ak_malloc_stats_named(names, after, 2);
  return after[0] < before[0] || after[1] < before[1];
}

/* The mapping (docs/stats.md): segments and cached large mappings are the
 * "arena", live large blocks the "mmapped" region; uordblks + hblkhd is
 * arenakit's `allocated`. */
EXPORT struct ak_glibc_mallinfo2 mallinfo2(void) {
  uint64_t v[F_N] = {0};
  (void)_ak_malloc_stats_named(figure_names, v, F_N);
  struct ak_glibc_mallinfo2 m = {0};
  m.arena = sub(v[F_MAPPED], v[F_LBYTES]);
  m.ordblks = (size_t)v[F_SEGMENTS];
  m.hblks = (size_t)v[F_LBLOCKS];
  m.hblkhd = (size_t)v[F_LBYTES];
  m.usmblks = (size_t)v[F_PEAK];
  m.uordblks = sub(v[F_ALLOCATED], v[F_LBYTES]);
  m.fordblks = sub(v[F_COMMITTED], v[F_ALLOCATED]);
  m.keepcost = (size_t)(v[F_CACHED_DIRTY] + v[F_SPARE_DIRTY]);
  return m;
}

static int sat(size_t x) { return x > (size_t)INT_MAX ? INT_MAX : (int)x; }

/* glibc's older mallinfo: mallinfo2's figures, each capped at INT_MAX
 * (glibc's wraps around instead). */
EXPORT struct ak_glibc_mallinfo mallinfo(void) {
  struct ak_glibc_mallinfo2 m2 = mallinfo2();
  struct ak_glibc_mallinfo m = {sat(m2.arena),    sat(m2.ordblks), sat(m2.smblks),  sat(m2.hblks),
                                sat(m2.hblkhd),   sat(m2.usmblks), sat(m2.fsmblks), sat(m2.uordblks),
                                sat(m2.fordblks), sat(m2.keepcost)};
  return m;
}

/* malloc_info(0, fp): one <malloc> element of arenakit's figures, in
 * glibc's vocabulary where it has one (total, system, aspace) and as
 * <stat name=... value=.../> for each figure; then the size classes in
 * use. -1 with EINVAL for options != 0 or a NULL stream, -1 with errno
 * when writing fails; else 0. */
EXPORT int malloc_info(int options, FILE *fp) {
  if (options != 0 || !fp) {
    errno = EINVAL;
    return -1;
  }
  uint64_t v[F_N] = {0};
  (void)_ak_malloc_stats_named(figure_names, v, F_N);
  ak_malloc_stats s; /* a few KiB of stack: kept out of .bss (see stats.c) */
  ak_malloc_stats_get(&s);
  int bad = fprintf(fp, "<malloc version=\"1\" allocator=\"arenakit\">\n<sizes>\n") < 0;
  for (size_t c = 0; c < s.nclasses && !bad; c++)
    if (s.class_pages[c])
      bad = fprintf(fp, "  <size from=\"%zu\" to=\"%zu\" total=\"%zu\" count=\"%zu\" pages=\"%zu\"/>\n",
                    s.class_size[c], s.class_size[c], s.class_size[c] * s.class_blocks[c], s.class_blocks[c],
                    s.class_pages[c]) < 0;
  if (!bad)
    bad = fprintf(fp, "</sizes>\n<total type=\"mmap\" count=\"%llu\" size=\"%llu\"/>\n",
                  (unsigned long long)v[F_LBLOCKS], (unsigned long long)v[F_LBYTES]) < 0;
  if (!bad)
    bad = fprintf(fp, "<system type=\"current\" size=\"%llu\"/>\n<aspace type=\"total\" size=\"%llu\"/>\n",
                  (unsigned long long)v[F_COMMITTED], (unsigned long long)v[F_MAPPED]) < 0;
  for (int i = 0; i < F_N && !bad; i++)
    bad = fprintf(fp, "<stat name=\"%s\" value=\"%llu\"/>\n", figure_names[i], (unsigned long long)v[i]) < 0;
  if (!bad) bad = fprintf(fp, "</malloc>\n") < 0;
  return bad || fflush(fp) != 0 ? -1 : 0;
}

/* malloc_stats(): arenakit's report (ak_malloc_stats_print) on stderr,
 * where glibc's prints its own. */
EXPORT void malloc_stats(void) { (void)ak_malloc_stats_print(stderr); }
