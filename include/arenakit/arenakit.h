/* SPDX-License-Identifier: MIT */
/* arenakit/arenakit.h - the umbrella header of arenakit's C API.
 *
 * arenakit is a C11 memory-allocation library: a region arena (ak_arena,
 * <arenakit/arena.h>), a fixed-size object pool (ak_pool,
 * <arenakit/pool.h>), a general-purpose malloc (ak_malloc and friends,
 * <arenakit/malloc.h>; libarenakit-malloc replaces the C library's malloc
 * through LD_PRELOAD or linking) and a sampled heap profiler whose
 * output `go tool pprof` reads (<arenakit/prof.h>).
 * Include this one header; the C++ layer is <arenakit/arenakit.hpp>.
 * Link with -larenakit (pkg-config: arenakit; CMake: arenakit::arenakit). */
#ifndef ARENAKIT_ARENAKIT_H
#define ARENAKIT_ARENAKIT_H

#include "arenakit/arena.h"
#include "arenakit/common.h"
#include "arenakit/malloc.h"
#include "arenakit/pool.h"
#include "arenakit/prof.h"
#include "arenakit/reclaim.h"

#endif /* ARENAKIT_ARENAKIT_H */
