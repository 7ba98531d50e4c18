/* SPDX-License-Identifier: MIT */
/* track_pool_id.c - the Valgrind mempool ids: each arena and pool that
 * registers as a mempool gets a handle of its own, never reused: a
 * non-canonical address, so it never collides with real memory (the
 * handle is only a key for Valgrind, never dereferenced). */
#include <stdatomic.h>
#include <stdint.h>

#include "common/track.h"

void *_ak_track_new_pool_id(void) {
  static atomic_uintptr_t next;
  uintptr_t n = atomic_fetch_add_explicit(&next, 1, memory_order_relaxed);
  return (void *)(uintptr_t)(UINT64_C(0xA4A0000000000000) + n * 64);
}
