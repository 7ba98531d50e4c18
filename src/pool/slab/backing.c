/* SPDX-License-Identifier: MIT */
/* backing.c - slab memory (slab/backing.h): anonymous memory and the C
 * heap here, the file backing in backing_file.c; new slabs made from that
 * memory (guard page, slab table, header), and the pages of empty slabs
 * given back and taken again. */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>

#include "common/track.h"
#include "os/os_mem.h"
#include "pool/pool.h"
#include "pool/slab/backing.h"

/* Slab memory from the backing (no pool lock needed). */
static void *backing_get(_ak_pool_impl *p, size_t *offset) {
  switch (p->backing) {
    case AK_BACKING_HEAP: return _ak_os_heap_alloc(p->slab_size, p->slab_size);
    case AK_BACKING_FILE: return _ak_pool_file_get(p, offset);
    default: return _ak_os_alloc(p->slab_size, p->slab_size);
  }
}

/* Gives slab memory back to the backing (the guard page made accessible
 * again first where the memory is reused by others: the C heap). */
void _ak_pool_backing_put(_ak_pool_impl *p, void *m, size_t off) {
  AK_ASSERT(m != NULL && ((uintptr_t)m & ~_ak_slab_mask(p->slab_size)) == 0); /* a slab, aligned */
  switch (p->backing) {
    case AK_BACKING_HEAP:
      /* A guard that cannot be made writable again must not go back to
       * the C heap (it would fault there): the slab is leaked instead. */
      if (p->guard && _ak_os_guard((char *)m + p->slab_size - p->guard, p->guard, false) != 0) break;
      _ak_os_heap_free(m, p->slab_size);
      break;
    case AK_BACKING_FILE: _ak_pool_file_put(p, m, off); break;
    default: _ak_os_free(m, p->slab_size); break;
  }
}

/* A new slab from the backing, registered and counted. NULL + errno +
 * message naming `call` on failure (`call` NULL: no message, for a slab the
 * caller can do without). */
_ak_slab *_ak_pool_slab_new(_ak_pool_impl *p, const char *call) {
  size_t off = 0;
  void *m = backing_get(p, &off);
  if (!m) {
    if (call && p->backing != AK_BACKING_FILE)
      _ak_pool_error(p, errno ? errno : ENOMEM, call, "out of memory");
    return NULL;
  }
  /* _ak_slab_of finds the header by masking: slabs are aligned to their size. */
  AK_ASSERT(((uintptr_t)m & ~_ak_slab_mask(p->slab_size)) == 0);
  /* Hardened: the slab's last page is a guard (the slots end before it). */
  if (p->guard && _ak_os_guard((char *)m + p->slab_size - p->guard, p->guard, true) != 0) {
    int e = errno;
    _ak_pool_backing_put(p, m, off);
    if (call) _ak_pool_error(p, e, call, "cannot protect the slab's guard page");
    return NULL;
  }
  if (_ak_table_add(&p->table, (uintptr_t)m) != 0) {
    _ak_pool_backing_put(p, m, off);
    if (call) _ak_pool_error(p, ENOMEM, call, "out of memory for the slab table");
    return NULL;
  }
  AK_ASSERT(_ak_table_known(&p->table, (uintptr_t)m)); /* known to the checks before any header is read */
  _ak_slab *s = _ak_slab_init(m, p, p->name, p->slab_size - p->guard, p->slot, p->align, _ak_config_checked);
  s->file_offset = off;
  /* The pool's grid (the inline paths' slot_first, the checks' capacity). */
  AK_ASSERT(s->capacity == p->capacity && s->start - (uintptr_t)s == p->pub.slot_first);
  if (p->tracked) {
    s->flags |= AK_SLAB_F_TRACKED;
    AK_TRACK_RELEASE((void *)s->start, s->end - s->start);
  }
  AK_ASSERT(_ak_slab_validate(s, call ? call : "_ak_pool_slab_slack"));
  return s;
}

void _ak_pool_slab_decommit(_ak_pool_impl *p, _ak_slab *s) {
  AK_ASSERT(s->head.used == 0); /* only an empty slab's pages go */
  size_t ps = _ak_os_page_size();
  uintptr_t from = (s->start + ps - 1) & ~(uintptr_t)(ps - 1);
  uintptr_t to = (uintptr_t)s + p->slab_size;
  if (to <= from) return;
  if (p->backing == AK_BACKING_FILE)
    (void)_ak_os_file_decommit(p->file.fd, (void *)from, s->file_offset + (from - (uintptr_t)s), to - from);
  else
    (void)_ak_os_decommit((void *)from, to - from);
}

int _ak_pool_slab_recommit(_ak_pool_impl *p, _ak_slab *s) {
  AK_ASSERT(s->head.used == 0); /* a spare, about to be used again */
  if (p->backing != AK_BACKING_FILE || _ak_os_file_alloc(p->file.fd, s->file_offset, p->slab_size) == 0)
    return 0;
  int e = errno;
  _ak_pool_file_error(p, e, "allocate", s->file_offset);
  return e;
}
