/* error.c - errno and the thread-local message behind ak_last_error(),
 * plus the version query and the tracking switches shared by components. */
#include "common/error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "arenakit/common.h"
#include "common/track.h"

static _Thread_local char last_error[256];

void _ak_error(int err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  errno = err;
}

const char *ak_last_error(void) { return last_error; }

int ak_version(void) { return AK_VERSION; }

unsigned _ak_track_mode(void) {
  /* Bit 7 set = computed. */
  static atomic_uint state;
  unsigned s = atomic_load_explicit(&state, memory_order_relaxed);
  if (s == 0) {
    s = 0x80u | (AK_TRACK_ASAN ? AK_TRACK_MODE_ASAN : 0u) | (AK_ON_VALGRIND() ? AK_TRACK_MODE_VALGRIND : 0u);
    atomic_store_explicit(&state, s, memory_order_relaxed);
  }
  return s & 0x7fu;
}

bool _ak_track_enabled(void) { return _ak_track_mode() != 0; }

void *_ak_track_new_pool_id(void) {
  static atomic_uintptr_t next;
  uintptr_t n = atomic_fetch_add_explicit(&next, 1, memory_order_relaxed);
  return (void *)(uintptr_t)(UINT64_C(0xA4A0000000000000) + n * 64);
}
