// SPDX-License-Identifier: MIT
// quiet_library.h - for a test that replaces the OS layer's hooks
// (_ak_os_set_hooks, which requires that no other thread uses the
// library): while it lives, the background reclaim thread is stopped and
// the arenas' cache of chunks is empty, so no thread of the library calls
// the OS through hooks that are being swapped, and no chunk mapped through
// a test's hook outlives it in the cache.
#ifndef AK_TESTS_QUIET_LIBRARY_H
#define AK_TESTS_QUIET_LIBRARY_H

#include <arenakit/reclaim.h>

extern "C" void _ak_arena_cache_drain(void);  // src/arena/arena_cache.c

struct QuietLibrary {
  ak_background mode = ak_reclaim_get_background();
  QuietLibrary() {
    ak_reclaim_thread_stop();
    _ak_arena_cache_drain();
  }
  ~QuietLibrary() {
    _ak_arena_cache_drain();
    (void)ak_reclaim_set_background(mode);
  }
  QuietLibrary(const QuietLibrary &) = delete;
  QuietLibrary &operator=(const QuietLibrary &) = delete;
};

#endif  // AK_TESTS_QUIET_LIBRARY_H
