/* SPDX-License-Identifier: MIT */
// pool_pair.cpp - the pool-newdelete-st loop (allocate one 48-byte
// object, construct it, use it, destroy it, free it) compiled as a user
// compiles it: a separate program built against the INSTALLED library with
// `g++ -O2`, default link (shared, lazy binding), flags from pkg-config
// (run.sh). It checks that the inline fast paths of arenakit/pool.h stay
// fast outside the project's own build: compare its figures with the rows
// of the same name in the pool-newdelete-st table.
//
// Usage: pool_pair [N [ROUNDS]]   (default 10,000,000 pairs, 3 rounds)
// Prints one line per row: "<key> <ns per pair>", the best round.
#include <arenakit/arenakit.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "object48_loops.h"

namespace {

using akb::data_t;

double now_s() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

using akb::pair_capi;  // the loops of the pool-newdelete-st scenario
using akb::pair_new;
using akb::pair_pool;

}  // namespace

int main(int argc, char **argv) {
  std::uint64_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 10000000;
  int rounds = argc > 2 ? std::atoi(argv[2]) : 3;
  ak_pool_options o{};
  o.object_size = sizeof(data_t);
  o.sync = AK_SYNC_NONE;
  ak_pool *capi = ak_pool_create(&o);
  if (!capi) {
    std::fprintf(stderr, "pool_pair: ak_pool_create: %s\n", ak_last_error());
    return 1;
  }
  ak::object_pool<data_t> none(AK_SYNC_NONE), spin(AK_SYNC_SPINLOCK), lf(AK_SYNC_LOCKFREE),
      thr(AK_SYNC_THREADS);
  const char *keys[] = {"newdelete",     "capi_none",     "pool_none",
                        "pool_spinlock", "pool_lockfree", "pool_threads"};
  double best[6];
  for (double &b : best) b = INFINITY;
  for (int r = 0; r < rounds; r++) {
    for (int k = 0; k < 6; k++) {
      double t0 = now_s();
      std::uint64_t s = 0;
      switch (k) {
        case 0: s = pair_new(n); break;
        case 1: s = pair_capi(capi, n); break;
        case 2: s = pair_pool(none, n); break;
        case 3: s = pair_pool(spin, n); break;
        case 4: s = pair_pool(lf, n); break;
        default: s = pair_pool(thr, n); break;
      }
      double t = now_s() - t0;
      if (s != n) {
        std::fprintf(stderr, "pool_pair: %s: check sum %llu, expected %llu\n", keys[k],
                     static_cast<unsigned long long>(s), static_cast<unsigned long long>(n));
        return 1;
      }
      best[k] = std::fmin(best[k], t);
    }
  }
  ak_pool_destroy(capi);
  for (int k = 0; k < 6; k++) std::printf("%s %.3f\n", keys[k], best[k] * 1e9 / static_cast<double>(n));
  return 0;
}
