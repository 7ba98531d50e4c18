/* SPDX-License-Identifier: MIT */
/* size_class.c - the general heap's size classes.
 *
 * 8, then 16..128 in steps of 16, then eight classes per doubling up to
 * 512 KiB: a request above 128 bytes wastes less than 1/9 (11.1%) of its
 * block. Classes up to 8 KiB use one-page (64 KiB) spans; larger ones use
 * spans of up to 32 pages holding about eight blocks. Only the classes up
 * to AK_SOLO_MIN (64 KiB) serve blocks: above that a block is a span of its
 * own (span.c). */
#include "malloc/size_class.h"

#include <pthread.h>

#include "common/assert.h"

uint32_t _ak_cls_size[AK_NCLS];
uint8_t _ak_cls_span[AK_NCLS];
uint8_t _ak_cls_small[129];

static pthread_once_t classes_once = PTHREAD_ONCE_INIT;

static void classes_fill(void) {
  _ak_cls_size[0] = 8;
  for (unsigned c = 1; c <= 8; c++) _ak_cls_size[c] = 16 * c;
  for (unsigned b = 7; b < 19; b++)
    for (unsigned j = 0; j < 8; j++)
      _ak_cls_size[9 + (b - 7) * 8 + j] = (1u << b) + (j + 1) * (1u << (b - 3));
  for (size_t i = 0; i < 129; i++) _ak_cls_small[i] = (uint8_t)_ak_size_class(i * 8);
  for (unsigned c = 0; c < AK_NCLS; c++) {
    size_t s = _ak_cls_size[c];
    size_t pages = s <= AK_SMALL_MAX ? 1 : (8 * s + AK_PAGE_SIZE - 1) / AK_PAGE_SIZE;
    if (pages > AK_SPAN_PAGES_MAX) pages = AK_SPAN_PAGES_MAX;
    _ak_cls_span[c] = (uint8_t)pages;
    /* Classes grow, keep 8-byte alignment and are their own class. */
    AK_ASSERT(s % 8 == 0 && (c == 0 || s > _ak_cls_size[c - 1]) && _ak_size_class(s) == c);
  }
}

void _ak_size_classes_init(void) { pthread_once(&classes_once, classes_fill); }
