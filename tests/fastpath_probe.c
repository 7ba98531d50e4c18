/* SPDX-License-Identifier: MIT */
/* fastpath_probe.c - functions whose machine code tests/check_fastpath.sh
 * counts: the inline ak_arena_alloc fast path for constant size and
 * alignment must stay at most 10 instructions with one conditional branch
 * before its return (docs/arena-fast-path.md); the pool probes are below. */
#include <arenakit/arenakit.h>

void *ak_probe_alloc_8_8(ak_arena *a);
void *ak_probe_alloc_8_1(ak_arena *a);
void *ak_probe_alloc_48_16(ak_arena *a);

void *ak_probe_alloc_8_8(ak_arena *a) { return ak_arena_alloc(a, 8, 8); }
void *ak_probe_alloc_8_1(ak_arena *a) { return ak_arena_alloc(a, 8, 1); }
void *ak_probe_alloc_48_16(ak_arena *a) { return ak_arena_alloc(a, 48, 16); }

/* The pool's inline hit paths (tests/check_fastpath.sh, pool section):
 * AK_SYNC_NONE pops and pushes the pool's current slab; AK_SYNC_THREADS
 * (the default) the calling thread's heap's, after the pool's own current
 * slab misses, as it always does in that mode (no slot, `hot_slab` 1,
 * `mask` 0): stated to the compiler, so the heap's hit path is the first
 * return. */
void *ak_probe_pool_alloc_none(ak_pool *p);
void ak_probe_pool_free_none(ak_pool *p, void *o);
void *ak_probe_pool_alloc_threads(ak_pool *p);
void ak_probe_pool_free_threads(ak_pool *p, void *o);
void *ak_probe_pool_alloc_magazine(ak_pool *p);
void ak_probe_pool_free_magazine(ak_pool *p, void *o);

void *ak_probe_pool_alloc_none(ak_pool *p) { return ak_pool_alloc(p); }
void ak_probe_pool_free_none(ak_pool *p, void *o) { ak_pool_free(p, o); }
void *ak_probe_pool_alloc_threads(ak_pool *p) {
  if (p->cur.hot.first != NULL || p->cur.bump < p->cur.bump_end || p->tkey == 0) __builtin_unreachable();
  return ak_pool_alloc(p);
}
void ak_probe_pool_free_threads(ak_pool *p, void *o) {
  if (p->cur.hot_slab != 1 || p->cur.mask != 0 || p->tkey == 0) __builtin_unreachable();
  ak_pool_free(p, o);
}
void *ak_probe_pool_alloc_magazine(ak_pool *p) {
  if (p->cur.hot.first != NULL || p->tkey != 0 || p->cur.mask != 0 || p->mkey == 0) __builtin_unreachable();
  return ak_pool_alloc(p);
}
void ak_probe_pool_free_magazine(ak_pool *p, void *o) {
  if (p->cur.hot_slab != 1 || p->cur.mask != 0 || p->tkey != 0 || p->mkey == 0) __builtin_unreachable();
  ak_pool_free(p, o);
}
