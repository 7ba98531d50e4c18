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

/* The free file slots (_ak_pool_file: free_slots, pos), under its mu. */
static void file_slot_push(_ak_pool_impl *p, size_t i) {
  /* Every file slot has a place (file_slots_room); a free one is listed once. */
  AK_ASSERT(i < p->file.cap && p->file.pos[i] == SIZE_MAX && p->file.nfree < p->file.cap);
  p->file.pos[i] = p->file.nfree;
  p->file.free_slots[p->file.nfree++] = i;
}

static void file_slot_take(_ak_pool_impl *p, size_t i) {
  AK_ASSERT(p->file.nfree > 0 && p->file.pos[i] < p->file.nfree && p->file.free_slots[p->file.pos[i]] == i);
  size_t at = p->file.pos[i], last = p->file.free_slots[--p->file.nfree];
  p->file.free_slots[at] = last;
  p->file.pos[last] = at;
  p->file.pos[i] = SIZE_MAX;
}

/* Drops the free slots at the end of the file and truncates it there, so
 * the file never keeps a free tail (amortised O(1): each slot is dropped
 * once per release). Under file_mu. */
static void file_shrink_tail(_ak_pool_impl *p) {
  size_t n = p->file.size / p->slab_size;
  while (n && p->file.pos[n - 1] != SIZE_MAX) file_slot_take(p, --n);
  if (n * p->slab_size != p->file.size) {
    p->file.size = n * p->slab_size;
    (void)_ak_os_file_resize(p->file.fd, p->file.size);
  }
  AK_ASSERT(p->file.size % p->slab_size == 0 &&
            (n == 0 || p->file.pos[n - 1] == SIZE_MAX)); /* no free tail */
}

/* Room in free_slots and pos for `n` file slots; false if out of memory. */
static bool file_slots_room(_ak_pool_impl *p, size_t n) {
  if (n <= p->file.cap) return true;
  size_t cap = p->file.cap ? p->file.cap * 2 : 64;
  while (cap < n) cap *= 2;
  size_t *f = realloc(p->file.free_slots, cap * sizeof *f);
  if (f) p->file.free_slots = f;
  size_t *pos = f ? realloc(p->file.pos, cap * sizeof *pos) : NULL;
  if (!pos) return false;
  for (size_t i = p->file.cap; i < cap; i++) pos[i] = SIZE_MAX;
  p->file.pos = pos;
  p->file.cap = cap;
  AK_ASSERT(p->file.cap >= n && p->file.nfree <= p->file.cap);
  return true;
}

/* Reports a failure of the file backing, naming the file. */
void _ak_pool_file_error(_ak_pool_impl *p, int err, const char *what, size_t off) {
  char msg[600];
  snprintf(msg, sizeof msg, "cannot %s %zu bytes of file '%s' at offset %zu: %s", what, p->slab_size,
           p->file.path, off, strerror(err));
  _ak_pool_error(p, err, "ak_pool_alloc", msg);
}

/* The file backing's windows, under file_mu: a free slot of the file, or
 * a new one at its end; its blocks are allocated for real before it is
 * mapped (a hole punched at release, or the new end), so a full file
 * system fails here with ENOSPC instead of faulting at the first store. */
static void *file_get(_ak_pool_impl *p, size_t *offset) {
  size_t i = p->file.size / p->slab_size;
  bool grown = p->file.nfree == 0;
  if (!grown) {
    i = p->file.free_slots[p->file.nfree - 1];
    file_slot_take(p, i);
  } else if (!file_slots_room(p, i + 1)) {
    _ak_pool_file_error(p, ENOMEM, "keep track of", i * p->slab_size);
    return NULL;
  }
  size_t off = i * p->slab_size;
  void *m = NULL;
  int e = 0;
  if (_ak_os_file_alloc(p->file.fd, off, p->slab_size) != 0) {
    e = errno;
    _ak_pool_file_error(p, e, "allocate", off);
  } else if ((m = _ak_os_file_map(p->file.fd, off, p->slab_size, p->slab_size)) == NULL) {
    e = errno;
    _ak_pool_file_error(p, e, "map", off);
  }
  if (!m) {
    if (grown)
      (void)_ak_os_file_resize(p->file.fd, off); /* posix_fallocate may have grown it */
    else
      file_slot_push(p, i);
    errno = e;
    return NULL;
  }
  if (grown) p->file.size = off + p->slab_size;
  AK_ASSERT(off + p->slab_size <= p->file.size && p->file.pos[i] == SIZE_MAX); /* a file slot in use */
  *offset = off;
  return m;
}

void *_ak_pool_file_get(_ak_pool_impl *p, size_t *offset) {
  _ak_word_lock(&p->file.mu);
  void *m = file_get(p, offset);
  _ak_word_unlock(&p->file.mu);
  return m;
}

void _ak_pool_file_put(_ak_pool_impl *p, void *m, size_t off) {
  AK_ASSERT(off % p->slab_size == 0 && off < p->file.size); /* a file slot in use */
  _ak_word_lock(&p->file.mu);
  _ak_os_file_unmap(p->file.fd, m, off, p->slab_size);
  file_slot_push(p, off / p->slab_size); /* file_pos has room for every slot */
  file_shrink_tail(p);
  _ak_word_unlock(&p->file.mu);
}

int _ak_pool_file_open(_ak_pool_impl *p, const char *path, const char *call) {
  p->file.path = strdup(path);
  const char *why = NULL;
  p->file.fd = p->file.path ? _ak_os_file_open(path, &why) : -1;
  AK_ASSERT(p->file.size == 0 && p->file.nfree == 0 && p->file.cap == 0); /* no slot in use yet */
  if (p->file.fd >= 0) return 0;
  int e = p->file.path ? errno : ENOMEM;
  if (why)
    _ak_error(e, "%s: pool '%s': file '%s' %s: %s", call, p->name, path, why, strerror(e));
  else
    _ak_error(e, "%s: pool '%s': cannot create file '%s': %s", call, p->name, path, strerror(e));
  free(p->file.path);
  p->file.path = NULL;
  errno = e;
  return e;
}

void _ak_pool_file_close(_ak_pool_impl *p) {
  if (p->file.fd >= 0) _ak_os_file_close(p->file.fd);
  free(p->file.path);
  free(p->file.free_slots);
  free(p->file.pos);
}
