/* SPDX-License-Identifier: MIT */
/* map.h - where the pool's slabs are (internal, slab layer): a pool's
 * slab table (every slab address it holds, sharded by address, with the
 * slab counters) and the process-wide slab map behind it (one bit per
 * granule, read without a lock), both in slab/map.c. */
#ifndef AK_POOL_SLAB_MAP_H
#define AK_POOL_SLAB_MAP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arenakit/pool.h"

#define AK_TABLE_SHARD_BITS 6
#define AK_TABLE_SHARDS (1u << AK_TABLE_SHARD_BITS)

/** One shard of the slab table: sorted slab addresses under a word lock,
 *  and the slabs obtained and released through it. */
typedef struct _ak_table_shard {
  _Alignas(64) atomic_int mu;
  size_t n;    /* written under `mu`, read without it by _ak_table_sample */
  size_t high; /* the most slabs this shard has held */
  size_t cap;
  uintptr_t *a;
  size_t allocs, releases;
} _ak_table_shard;

/** A pool's slab table (slab/map.c): every slab the pool holds, sharded
 *  by address. Leaf locks: taken inside any other lock, never around one. */
typedef struct _ak_slab_table {
  _ak_table_shard shard[AK_TABLE_SHARDS];
  /* High-water mark of the slab count, sampled (_ak_table_sample) when a
   * shard reaches a new high of its own and at every stats call. */
  _Alignas(64) atomic_size_t peak;
} _ak_slab_table;

/** Adds slab address `x`; -1 if out of memory (nothing changed). */
int _ak_table_add(_ak_slab_table *t, uintptr_t x);
/** Adds the shards' counts up and raises the sampled high-water mark. */
void _ak_table_sample(_ak_slab_table *t);
/** Removes slab address `x` (a no-op if absent). */
void _ak_table_del(_ak_slab_table *t, uintptr_t x);
/** Whether `x` is a slab address of the table. Any thread. */
bool _ak_table_has(_ak_slab_table *t, uintptr_t x);
/** Fills the slab fields of `out`: slabs, peak, bytes reserved and
 *  resident, slabs obtained and released. */
void _ak_table_stats(_ak_slab_table *t, size_t slab_size, ak_pool_stats *out);
/** Frees the table's arrays (the pool is being destroyed). */
void _ak_table_free(_ak_slab_table *t);
/** Whether `x` is the address of a live slab of any pool: a lock-free
 *  read of the process-wide slab map (two loads), or of `t` for an address
 *  beyond the map. Any thread; true means the header at `x` is mapped. */
bool _ak_table_known(_ak_slab_table *t, uintptr_t x);
/** Calls fn(slab, ctx) for every slab address of `t`, each shard under its
 *  lock: fn must not add to or remove from the table. */
void _ak_table_each(_ak_slab_table *t, void (*fn)(uintptr_t slab, void *ctx), void *ctx);
/** fork(): takes (releases) every shard lock of `t`, in index order
 *  (reverse order). */
void _ak_table_lock_all(_ak_slab_table *t);
void _ak_table_unlock_all(_ak_slab_table *t);

#endif /* AK_POOL_SLAB_MAP_H */
