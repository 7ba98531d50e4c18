/* SPDX-License-Identifier: MIT */
/* track_mode.c - the tool-mode switch: whether the running program needs
 * the ASan or Valgrind annotations of track.h, decided once per process.
 * Components read it when an arena or pool is created and take their
 * annotated slow paths when it is not 0. */
#include <stdatomic.h>
#include <stdbool.h>

#include "common/track.h"

unsigned _ak_track_mode(void) {
  /* Bit 7 set = computed (a race computes the same value twice). */
  static atomic_uint state;
  unsigned s = atomic_load_explicit(&state, memory_order_relaxed);
  if (s == 0) {
    s = 0x80u | (AK_TRACK_ASAN ? AK_TRACK_MODE_ASAN : 0u) | (AK_ON_VALGRIND() ? AK_TRACK_MODE_VALGRIND : 0u);
    atomic_store_explicit(&state, s, memory_order_relaxed);
  }
  return s & 0x7fu;
}

bool _ak_track_enabled(void) { return _ak_track_mode() != 0; }
