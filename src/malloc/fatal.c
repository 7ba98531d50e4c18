/* SPDX-License-Identifier: MIT */
/* fatal.c - the malloc's message about a bad block (a pointer it did not
 * hand out, a double free, a corrupted free list): the call, the pointer,
 * the reason and the block's size class, written through _ak_fatal
 * (common/error.h), the library's one fatal-error path. Called from every
 * level of the malloc (the fast paths' inline checks included); calls only
 * common/ and the size-class table. */
#include "common/error.h"
#include "malloc/malloc_internal.h"

/* Runs inside malloc and free: _ak_fatal allocates nothing. */
_Noreturn void _ak_malloc_fatal(const char *call, const void *p, const char *why, unsigned cls) {
  if (cls < AK_NCLS)
    _ak_fatal("%s(%p): %s (size class %u, %u-byte blocks)", call, p, why, cls, _ak_cls_size[cls]);
  _ak_fatal("%s(%p): %s", call, p, why);
}
