/* SPDX-License-Identifier: MIT */
/* size_class.h - the general heap's size classes and geometry (internal;
 * plain C that C++ tests can include too). Defined in size_class.c. */
#ifndef AK_SIZE_CLASS_H
#define AK_SIZE_CLASS_H

#include <stddef.h>
#include <stdint.h>

#define AK_SEG_SHIFT 22
#define AK_SEG_SIZE ((size_t)1 << AK_SEG_SHIFT)
#define AK_SEG_MASK ((uintptr_t)AK_SEG_SIZE - 1)
#define AK_PAGE_SHIFT 16
#define AK_PAGE_SIZE ((size_t)1 << AK_PAGE_SHIFT)
#define AK_SEG_PAGES (AK_SEG_SIZE / AK_PAGE_SIZE)
#define AK_SMALL_MAX ((size_t)8 * 1024)    /* one-page spans up to here */
#define AK_MEDIUM_MAX ((size_t)512 * 1024) /* size classes up to here */
/* Above AK_SOLO_MIN a block is a span of its own ("solo" span, whole 64 KiB
 * pages in a segment, grown and shrunk in place by realloc), up to
 * AK_SOLO_MAX (63 pages less a 4 KiB guard); above that, a mapping of its own. */
#define AK_SOLO_MIN ((size_t)64 * 1024)
#define AK_SOLO_MAX ((AK_SEG_PAGES - 1) * AK_PAGE_SIZE - 4096)
/* The malloc's unit of layout inside a page: the smallest system page.
 * A carve hands out the blocks of one grain (page.c), the segment header
 * ends on a grain (segment.c), a solo block ends on one (span.c). */
#define AK_GRAIN ((uintptr_t)4096)
/** `x` rounded up to a whole number of grains. */
#define AK_GRAIN_UP(x) (((x) + AK_GRAIN - 1) & ~(AK_GRAIN - 1))
#define AK_SPAN_PAGES_MAX 32
#define AK_NCLS 105

#ifdef __cplusplus
extern "C" {
#endif

extern uint32_t _ak_cls_size[AK_NCLS];
extern uint8_t _ak_cls_span[AK_NCLS];
/** Class of n <= 1024, indexed by (n + 7) / 8 (the malloc fast path). */
extern uint8_t _ak_cls_small[129];

/** Class of a request of `n` bytes, n <= AK_MEDIUM_MAX: 8, 16..128 by 16,
 *  then eight classes per doubling. */
static inline unsigned _ak_size_class(size_t n) {
  if (n <= 128) return n <= 8 ? 0u : (unsigned)((n + 15) >> 4);
  unsigned b = 63u - (unsigned)__builtin_clzll((unsigned long long)(n - 1)); /* n in (2^b, 2^(b+1)] */
  return 9u + (b - 7u) * 8u + (unsigned)((n - 1 - ((size_t)1 << b)) >> (b - 3u));
}

/** Fills the tables above, once (later calls return at once; thread-safe,
 *  no malloc). */
void _ak_size_classes_init(void);

#ifdef __cplusplus
}
#endif

#endif /* AK_SIZE_CLASS_H */
