/* SPDX-License-Identifier: MIT */
/* arenakit/arenakit.h - the umbrella header of arenakit's C API.
 *
 * arenakit is a C11 memory-allocation library: a region arena (ak_arena)
 * and a fixed-size object pool (ak_pool), with a general-purpose malloc to
 * follow.
 * Include this one header; the C++ layer is <arenakit/arenakit.hpp>.
 * Link with -larenakit (pkg-config: arenakit; CMake: arenakit::arenakit). */
#ifndef ARENAKIT_ARENAKIT_H
#define ARENAKIT_ARENAKIT_H

#include "arenakit/arena.h"
#include "arenakit/common.h"
#include "arenakit/malloc.h"
#include "arenakit/pool.h"
#include "arenakit/reclaim.h"

#endif /* ARENAKIT_ARENAKIT_H */
