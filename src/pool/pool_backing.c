/* SPDX-License-Identifier: MIT */
/* pool_backing.c - where slabs come from: anonymous memory, the C heap,
 * or a shared file mapping (free file slots reused first, blocks allocated
 * when a slab is added, so a full file system is an error, not SIGBUS), and
 * new slabs made from that memory (guard page, slab table, header). */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/track.h"
#include "os/os_mem.h"
#include "pool/pool_internal.h"

/* ---- backings -------------------------------------------------------------------- */

/* The free file slots (pool_internal.h, file_free/file_pos), under file_mu. */
static void file_slot_push(_ak_pool_impl *p, size_t i) {
  /* Every file slot has a place (file_slots_room); a free one is listed once. */
  AK_ASSERT(i < p->cap_file_slots && p->file_pos[i] == SIZE_MAX && p->nfile_free < p->cap_file_slots);
  p->file_pos[i] = p->nfile_free;
  p->file_free[p->nfile_free++] = i;
}

static void file_slot_take(_ak_pool_impl *p, size_t i) {
  AK_ASSERT(p->nfile_free > 0 && p->file_pos[i] < p->nfile_free && p->file_free[p->file_pos[i]] == i);
  size_t at = p->file_pos[i], last = p->file_free[--p->nfile_free];
  p->file_free[at] = last;
  p->file_pos[last] = at;
  p->file_pos[i] = SIZE_MAX;
}

/* Drops the free slots at the end of the file and truncates it there, so
 * the file never keeps a free tail (amortised O(1): each slot is dropped
 * once per release). Under file_mu. */
static void file_shrink_tail(_ak_pool_impl *p) {
  size_t n = p->file_size / p->slab_size;
  while (n && p->file_pos[n - 1] != SIZE_MAX) file_slot_take(p, --n);
  if (n * p->slab_size != p->file_size) {
    p->file_size = n * p->slab_size;
    (void)_ak_os_file_resize(p->fd, p->file_size);
  }
}

/* Room in file_free/file_pos for `n` file slots; false if out of memory. */
static bool file_slots_room(_ak_pool_impl *p, size_t n) {
  if (n <= p->cap_file_slots) return true;
  size_t cap = p->cap_file_slots ? p->cap_file_slots * 2 : 64;
  while (cap < n) cap *= 2;
  size_t *f = realloc(p->file_free, cap * sizeof *f);
  if (f) p->file_free = f;
  size_t *pos = f ? realloc(p->file_pos, cap * sizeof *pos) : NULL;
  if (!pos) return false;
  for (size_t i = p->cap_file_slots; i < cap; i++) pos[i] = SIZE_MAX;
  p->file_pos = pos;
  p->cap_file_slots = cap;
  return true;
}

/* Reports a failure of the file backing, naming the file. */
void _ak_pool_file_error(_ak_pool_impl *p, int err, const char *what, size_t off) {
  char msg[600];
  snprintf(msg, sizeof msg, "cannot %s %zu bytes of file '%s' at offset %zu: %s", what, p->slab_size, p->path,
           off, strerror(err));
  _ak_pool_error(p, err, "ak_pool_alloc", msg);
}

/* The file backing's windows, under file_mu: a free slot of the file, or
 * a new one at its end; its blocks are allocated for real before it is
 * mapped (a hole punched at release, or the new end), so a full file
 * system fails here with ENOSPC instead of faulting at the first store. */
static void *file_get(_ak_pool_impl *p, size_t *offset) {
  size_t i = p->file_size / p->slab_size;
  bool grown = p->nfile_free == 0;
  if (!grown) {
    i = p->file_free[p->nfile_free - 1];
    file_slot_take(p, i);
  } else if (!file_slots_room(p, i + 1)) {
    _ak_pool_file_error(p, ENOMEM, "keep track of", i * p->slab_size);
    return NULL;
  }
  size_t off = i * p->slab_size;
  void *m = NULL;
  int e = 0;
  if (_ak_os_file_alloc(p->fd, off, p->slab_size) != 0) {
    e = errno;
    _ak_pool_file_error(p, e, "allocate", off);
  } else if ((m = _ak_os_file_map(p->fd, off, p->slab_size, p->slab_size)) == NULL) {
    e = errno;
    _ak_pool_file_error(p, e, "map", off);
  }
  if (!m) {
    if (grown)
      (void)_ak_os_file_resize(p->fd, off); /* posix_fallocate may have grown it */
    else
      file_slot_push(p, i);
    errno = e;
    return NULL;
  }
  if (grown) p->file_size = off + p->slab_size;
  *offset = off;
  return m;
}

/* Slab memory from the backing (no pool lock needed). */
static void *backing_get(_ak_pool_impl *p, size_t *offset) {
  switch (p->backing) {
    case AK_BACKING_HEAP: return _ak_os_heap_alloc(p->slab_size, p->slab_size);
    case AK_BACKING_FILE: {
      _ak_word_lock(&p->file_mu);
      void *m = file_get(p, offset);
      _ak_word_unlock(&p->file_mu);
      return m;
    }
    default: return _ak_os_alloc(p->slab_size, p->slab_size);
  }
}

/* Gives slab memory back to the backing (the guard page made accessible
 * again first where the memory is reused by others: the C heap). */
void _ak_pool_backing_put(_ak_pool_impl *p, void *m, size_t off) {
  switch (p->backing) {
    case AK_BACKING_HEAP:
      /* A guard that cannot be made writable again must not go back to
       * the C heap (it would fault there): the slab is leaked instead. */
      if (p->guard && _ak_os_guard((char *)m + p->slab_size - p->guard, p->guard, false) != 0) break;
      _ak_os_heap_free(m, p->slab_size);
      break;
    case AK_BACKING_FILE:
      _ak_word_lock(&p->file_mu);
      _ak_os_file_unmap(p->fd, m, off, p->slab_size);
      file_slot_push(p, off / p->slab_size); /* file_pos has room for every slot */
      file_shrink_tail(p);
      _ak_word_unlock(&p->file_mu);
      break;
    default: _ak_os_free(m, p->slab_size); break;
  }
}

/* A new slab from the backing, registered and counted. NULL + errno +
 * message naming `call` on failure. */
_ak_slab *_ak_pool_slab_new(_ak_pool_impl *p, const char *call) {
  size_t off = 0;
  void *m = backing_get(p, &off);
  if (!m) {
    if (p->backing != AK_BACKING_FILE) _ak_pool_error(p, errno ? errno : ENOMEM, call, "out of memory");
    return NULL;
  }
  /* Hardened: the slab's last page is a guard (the slots end before it). */
  if (p->guard && _ak_os_guard((char *)m + p->slab_size - p->guard, p->guard, true) != 0) {
    int e = errno;
    _ak_pool_backing_put(p, m, off);
    _ak_pool_error(p, e, call, "cannot protect the slab's guard page");
    return NULL;
  }
  if (_ak_table_add(&p->table, (uintptr_t)m) != 0) {
    _ak_pool_backing_put(p, m, off);
    _ak_pool_error(p, ENOMEM, call, "out of memory for the slab table");
    return NULL;
  }
  _ak_slab *s = _ak_slab_init(m, p, p->name, p->slab_size - p->guard, p->slot, p->align, _ak_config_checked);
  s->file_offset = off;
  /* The pool's grid (the inline paths' slot_first, the checks' capacity). */
  AK_ASSERT(s->capacity == p->capacity && s->start - (uintptr_t)s == p->pub.slot_first);
  if (p->tracked) {
    s->flags |= AK_SLAB_F_TRACKED;
    AK_TRACK_RELEASE((void *)s->start, s->end - s->start);
  }
  return s;
}
