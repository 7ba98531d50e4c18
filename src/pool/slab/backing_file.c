/* SPDX-License-Identifier: MIT */
/* backing_file.c - the file backing (slab/backing.h): slabs are windows of
 * one shared file, at offsets that are multiples of the slab size (file
 * slots). Free file slots are reused first and the file never keeps a
 * free tail; blocks are allocated when a slab is added, so a full file
 * system is an error, not SIGBUS. Its state is under `file_mu`, a leaf
 * word lock: a slab is obtained and released without a pool lock. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/wordlock.h"
#include "os/os_mem.h"
#include "pool/pool.h"
#include "pool/slab/backing.h"

/* The free file slots (pool.h, file_free/file_pos), under file_mu. */
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

void *_ak_pool_file_get(_ak_pool_impl *p, size_t *offset) {
  _ak_word_lock(&p->file_mu);
  void *m = file_get(p, offset);
  _ak_word_unlock(&p->file_mu);
  return m;
}

void _ak_pool_file_put(_ak_pool_impl *p, void *m, size_t off) {
  AK_ASSERT(off % p->slab_size == 0 && off < p->file_size); /* a file slot in use */
  _ak_word_lock(&p->file_mu);
  _ak_os_file_unmap(p->fd, m, off, p->slab_size);
  file_slot_push(p, off / p->slab_size); /* file_pos has room for every slot */
  file_shrink_tail(p);
  _ak_word_unlock(&p->file_mu);
}

int _ak_pool_file_open(_ak_pool_impl *p, const char *path, const char *call) {
  p->path = strdup(path);
  const char *why = NULL;
  p->fd = p->path ? _ak_os_file_open(path, &why) : -1;
  if (p->fd >= 0) return 0;
  int e = p->path ? errno : ENOMEM;
  if (why)
    _ak_error(e, "%s: pool '%s': file '%s' %s: %s", call, p->name, path, why, strerror(e));
  else
    _ak_error(e, "%s: pool '%s': cannot create file '%s': %s", call, p->name, path, strerror(e));
  free(p->path);
  p->path = NULL;
  errno = e;
  return e;
}

void _ak_pool_file_close(_ak_pool_impl *p) {
  if (p->fd >= 0) _ak_os_file_close(p->fd);
  free(p->path);
  free(p->file_free);
  free(p->file_pos);
}
