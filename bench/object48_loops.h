/* SPDX-License-Identifier: MIT */
// object48_loops.h - the pool-newdelete-st loops, one object at a time:
// allocate, construct, read, destroy, free, n times (the source
// benchmark's loop). Shared by the pool-newdelete-st scenario and the separately built
// consumer program bench/consumer/pool_pair.cpp, so that both time the same
// code. noinline: each loop is compiled once, the same for every caller.
// Each returns the sum of the objects' flags (n when every call succeeded).
#ifndef AK_BENCH_OBJECT48_LOOPS_H
#define AK_BENCH_OBJECT48_LOOPS_H

#include <cstdint>
#include <new>

#include "arenakit/arenakit.hpp"
#include "object48.h"

namespace akb {

// new data_t(i) / delete d (the process's malloc).
__attribute__((noinline)) inline std::uint64_t pair_new(std::uint64_t n) {
  std::uint64_t s = 0;
  for (std::uint64_t i = 0; i < n; i++) {
    data_t *d = new data_t(i);
    sink(d);
    s += d->flags;
    delete d;
  }
  return s;
}

// ak::object_pool<data_t>: create(i) / destroy(d).
__attribute__((noinline)) inline std::uint64_t pair_pool(ak::object_pool<data_t> &pool, std::uint64_t n) {
  std::uint64_t s = 0;
  for (std::uint64_t i = 0; i < n; i++) {
    data_t *d = pool.create(i);
    sink(d);
    s += d->flags;
    pool.destroy(d);
  }
  return s;
}

// The C API: ak_pool_alloc + placement new / ~data_t + ak_pool_free; 0 if
// an allocation fails.
__attribute__((noinline)) inline std::uint64_t pair_capi(ak_pool *p, std::uint64_t n) {
  std::uint64_t s = 0;
  for (std::uint64_t i = 0; i < n; i++) {
    void *m = ak_pool_alloc(p);
    if (!m) return 0;
    data_t *d = ::new (m) data_t(i);
    sink(d);
    s += d->flags;
    d->~data_t();
    ak_pool_free(p, d);
  }
  return s;
}

}  // namespace akb

#endif  // AK_BENCH_OBJECT48_LOOPS_H
