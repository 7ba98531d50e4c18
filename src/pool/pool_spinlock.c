/* SPDX-License-Identifier: MIT */
/* pool_spinlock.c - AK_SYNC_SPINLOCK: per-thread magazines
 * (pool_magazine.c) in front of the serial core (pool_serial.c) under one
 * test-and-test-and-set spinlock (common/wordlock.h), taken
 * once per batch of AK_MAG_BATCH objects. */
#include "pool/pool_internal.h"

static int spin_reserve(_ak_pool_impl *p, size_t n) {
  _ak_spin_lock(p);
  int rc = _ak_serial_reserve(p, n);
  _ak_spin_unlock(p);
  return rc;
}

static void spin_trim(_ak_pool_impl *p) {
  _ak_mag_flush_all(p); /* every thread's magazine back to the slabs first */
  _ak_spin_lock(p);
  _ak_serial_trim(p);
  _ak_spin_unlock(p);
}

static uint32_t spin_take(_ak_pool_impl *p, void **chain) { return _ak_spin_take(p, chain, AK_MAG_BATCH); }

static void spin_give(_ak_pool_impl *p, void *chain, uint32_t n) {
  (void)n;
  (void)_ak_spin_give(p, chain);
}

const _ak_pool_mode _ak_mode_spinlock = {
    .name = "spinlock",
    .tls = &_ak_mag_tls,
    .init = _ak_mag_init,
    .alloc = _ak_mag_alloc,
    .free = _ak_mag_free,
    .reserve = spin_reserve,
    .trim = spin_trim,
    .counts = _ak_mag_counts,
    .take = spin_take,
    .give = spin_give,
    .on_lists = _ak_spin_on_lists,
    .fork_child = _ak_mag_fork_child,
};
