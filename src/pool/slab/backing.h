/* SPDX-License-Identifier: MIT */
/* backing.h - where a pool's slab memory comes from (internal, slab
 * layer): anonymous memory or the C heap (slab/backing.c) and a shared
 * file mapping (slab/backing_file.c), and new slabs made from it. None of
 * these needs a pool lock: the slab table and the file backing have leaf
 * locks of their own. */
#ifndef AK_POOL_SLAB_BACKING_H
#define AK_POOL_SLAB_BACKING_H

#include <stdatomic.h>
#include <stddef.h>

#include "pool/slab/slab.h"

typedef struct _ak_pool_impl _ak_pool_impl;

/** The file backing's state in its pool, under `mu` (a leaf word lock). */
typedef struct _ak_pool_file {
  atomic_int mu;
  int fd;      /* the file (-1: none) */
  char *path;  /* its path, for messages */
  size_t size; /* bytes of the file in use: file slots (slabs) end to end */
  /* The free file slots (slot i: offset i * slab_size), a stack with each
   * slot's place in it, so that a release pushes, a reuse pops and the
   * tail shrink takes any slot out in O(1). Both arrays hold a place for
   * every slot of the file, grown before the file grows: a release never
   * allocates, so no free slot is ever lost. pos[i]: the index of slot i
   * in `free_slots`, or SIZE_MAX if the slot is in use. */
  size_t *free_slots, *pos;
  size_t nfree, cap;
} _ak_pool_file;

/** A fresh slab from the backing, in the slab table, its header made
 *  (guard page, tool annotations). NULL + errno + message naming `call`
 *  on failure. */
_ak_slab *_ak_pool_slab_new(_ak_pool_impl *p, const char *call);
/** Gives slab memory `m` (file offset `off`) back to the backing. */
void _ak_pool_backing_put(_ak_pool_impl *p, void *m, size_t off);
/** Gives the pages of an empty slab's slots back while it stays mapped
 *  (the header page stays): decommitted, or punched out of the file. */
void _ak_pool_slab_decommit(_ak_pool_impl *p, _ak_slab *s);
/** Gets the blocks of a punched-out file slab back before a slot is
 *  written: 0, or an errno (reported). Anonymous memory needs nothing. */
int _ak_pool_slab_recommit(_ak_pool_impl *p, _ak_slab *s);

/* ---- the file backing (slab/backing_file.c) ------------------------------------ */

/** Opens (creates) the pool's file at `path` for ak_pool_create: 0, or an
 *  errno with the message set naming `call`. */
int _ak_pool_file_open(_ak_pool_impl *p, const char *path, const char *call);
/** Closes the pool's file and frees the backing's state (destroy). */
void _ak_pool_file_close(_ak_pool_impl *p);
/** File memory for one slab (a free file slot, or one at the end of the
 *  file), its offset in `*offset`; NULL + errno + message on failure.
 *  Takes the backing's leaf lock. */
void *_ak_pool_file_get(_ak_pool_impl *p, size_t *offset);
/** Gives slab memory `m` at file offset `off` back; takes the leaf lock. */
void _ak_pool_file_put(_ak_pool_impl *p, void *m, size_t off);
/** Reports a failed file operation `what` at offset `off` (errno = err). */
void _ak_pool_file_error(_ak_pool_impl *p, int err, const char *what, size_t off);

#endif /* AK_POOL_SLAB_BACKING_H */
