/* SPDX-License-Identifier: MIT */
/* malloc_block_start_ctest.c - the free path's block-start test
 * (_ak_blk_is_start), which keeps interior pointers off the free lists,
 * against a division, for every size class that serves blocks: on real
 * pages, every offset of the first and last blocks and just past the
 * block area, offsets before the area down to the segment header, and
 * random offsets across the area. Exit 0: every answer matched. */
#include <stdint.h>
#include <stdio.h>

#include "arenakit/malloc.h"
#include "malloc/malloc_internal.h"
#include "malloc/size_class.h"

static unsigned long checked, wrong;

/* One offset from the page's block area start (negative: before it). */
static void check(const _ak_page *pg, int64_t off) {
  uint64_t bs = pg->block_size, area = pg->end - pg->start;
  bool want = off >= 0 && (uint64_t)off < area && (uint64_t)off % bs == 0;
  bool got = _ak_blk_is_start(pg, (const void *)(pg->start + (uintptr_t)off));
  checked++;
  if (got != want && wrong++ < 10)
    fprintf(stderr, "malloc_block_start: block size %llu, offset %lld: %s, expected %s\n",
            (unsigned long long)bs, (long long)off, got ? "a block start" : "not one",
            want ? "a block start" : "not one");
}

int main(void) {
  uint64_t rng = 0x9E3779B97F4A7C15ull;
  void *first = ak_malloc(8); /* the size classes exist from the first call */
  unsigned classes = 0;
  for (unsigned c = 0; c < AK_NCLS && _ak_cls_size[c] <= AK_SOLO_MIN; c++) {
    void *p = ak_malloc(_ak_cls_size[c]);
    _ak_segment *seg = _ak_seg_of(p);
    const _ak_page *pg = _ak_page_of(seg, p);
    if (pg->block_size != _ak_cls_size[c]) {
      fprintf(stderr, "malloc_block_start: malloc(%u) came from a page of %u-byte blocks\n", _ak_cls_size[c],
              pg->block_size);
      return 1;
    }
    int64_t bs = pg->block_size, area = (int64_t)(pg->end - pg->start);
    int64_t head = (int64_t)(pg->start - (uintptr_t)seg); /* bytes before the area in the segment */
    int64_t edge = area < 4 * bs ? area : 4 * bs;
    for (int64_t off = 0; off < edge; off++) check(pg, off);
    for (int64_t off = area - edge; off < area + 64; off++) check(pg, off);
    for (int64_t off = 1; off <= head && off <= 8192; off++) check(pg, -off);
    for (int i = 0; i < 100000; i++) {
      rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
      check(pg, (int64_t)(rng % (uint64_t)area));
      if (head > 0) check(pg, -1 - (int64_t)(rng % (uint64_t)head));
    }
    ak_free(p);
    classes++;
  }
  ak_free(first);
  printf("malloc_block_start: %lu offsets in %u size classes, %lu wrong\n", checked, classes, wrong);
  return wrong != 0;
}
