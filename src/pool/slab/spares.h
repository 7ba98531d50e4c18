/* SPDX-License-Identifier: MIT */
/* spares.h - a pool's empty slabs kept for reuse (internal, slab layer):
 * getting a slab (a spare first, else a new one from the backing) and
 * putting an empty one back, under the reclaim policy of common/reclaim.h
 * (slab/spares.c). The spare set has its own leaf lock. */
#ifndef AK_POOL_SLAB_SPARES_H
#define AK_POOL_SLAB_SPARES_H

#include "common/reclaim.h"
#include "pool/slab/slab.h"

typedef struct _ak_pool_impl _ak_pool_impl;

/** The spare set's view of a pool's slabs (common/reclaim.h). */
extern const _ak_spare_ops _ak_pool_spare_ops;

/** A spare or else a new slab for `p`. NULL + errno + message on failure. */
_ak_slab *_ak_pool_slab_get(_ak_pool_impl *p);
/** A spare slab of `p` from `set` (the pool's `spares` or a set of its
 *  own slabs that a mode keeps), reset and ready for use; NULL if none
 *  (errno + message if a file spare's blocks cannot be allocated again). */
_ak_slab *_ak_pool_slab_spare(_ak_pool_impl *p, _ak_spare_set *set);
/** An empty slab of slack for an owner whose batch was thin
 *  (_ak_pool_batch_thin): a spare of `set` (NULL: none looked at), else a
 *  new slab; NULL, with errno kept, when neither is at hand (the caller
 *  allocates from what it has). A failed new slab is not reported. A
 *  file-backed pool takes spares only, since its backing reports its own
 *  failures; a punched-out file spare whose blocks cannot be allocated
 *  again is reported, as on every path that takes one. */
_ak_slab *_ak_pool_slab_slack(_ak_pool_impl *p, _ak_spare_set *set);
/** Makes an empty slab ready for reuse (lazy carving from its start). */
void _ak_pool_slab_reset(_ak_slab *s);
/** Gives an empty slab of `p` (on no list) to spare set `set` (as in
 *  _ak_pool_slab_spare), which keeps or releases it as the reclaim policy
 *  says; needs no pool lock. */
void _ak_pool_slab_put(_ak_pool_impl *p, _ak_spare_set *set, _ak_slab *s);
/** Empties spare set `from` of `p` (not the pool's own) into the pool's:
 *  committed spares are put there, decommitted ones released. Needs no
 *  pool lock; `from` stays usable. */
void _ak_pool_slab_hand_over(_ak_pool_impl *p, _ak_spare_set *from);
/** Releases an empty slab (on no list) to the backing at once: out of the
 *  slab table, header invalidated; needs no pool lock. */
void _ak_pool_slab_release(_ak_pool_impl *p, _ak_slab *s);
/** Releases every slab of list `l`, whatever it holds (ak_pool_destroy). */
void _ak_pool_slab_list_release(_ak_pool_impl *p, _ak_slab_list *l);

#endif /* AK_POOL_SLAB_SPARES_H */
