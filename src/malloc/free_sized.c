/* SPDX-License-Identifier: MIT */
/* free_sized.c - frees that are told the block's size (C++'s sized
 * operator delete, C23's free_sized and free_aligned_sized).
 *
 * The hardened and checked builds check the size against the block before
 * the free:
 * the block must hold the size and sit on the alignment given; a block
 * from operator new (`exact`: nothing but new hands it out, realloc never
 * resized it) must moreover be of the size class the size maps to, as
 * ak_malloc of that size hands out. A mismatch is a fatal error naming
 * the call: the caller's idea of the object differs from the allocator's
 * (a delete through the wrong type, a corrupted size). The other builds
 * free without reading the size. */
#include "malloc/malloc_internal.h"

/* The drop-in's sized operator delete calls this (src/shim declares it). */
void _ak_free_sized_call(const char *call, void *p, size_t align, size_t n, bool exact);

#if AK_HARDENED || AK_CHECKED
/* The block size ak_malloc(n) hands out, for n up to AK_SOLO_MIN. */
static size_t class_block(size_t n) { return _ak_cls_size[_ak_size_class(n)]; }
#endif

void _ak_free_sized_call(const char *call, void *p, size_t align, size_t n, bool exact) {
#if AK_HARDENED || AK_CHECKED
  if (p) {
    size_t have = _ak_block_checked_size(call, p);
    if (n > have || (exact && align <= 16 && n <= AK_SOLO_MIN && have != class_block(n)))
      _ak_fatal(
          "%s: size %zu does not match the block at %p (%zu bytes usable): the object was not "
          "allocated with that size (a delete through the wrong type?)",
          call, n, p, have);
    if (align > 16 && ((uintptr_t)p & (align - 1)))
      _ak_fatal("%s: the block at %p is not aligned to %zu", call, p, align);
  }
#else
  (void)call;
  (void)align;
  (void)n;
  (void)exact;
#endif
  ak_free(p);
}

void ak_free_sized(void *p, size_t n) { _ak_free_sized_call("ak_free_sized", p, 0, n, false); }

void ak_free_aligned_sized(void *p, size_t align, size_t n) {
  _ak_free_sized_call("ak_free_aligned_sized", p, align, n, false);
}
