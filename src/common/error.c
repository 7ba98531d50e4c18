/* SPDX-License-Identifier: MIT */
/* error.c - errno and the thread-local message behind ak_last_error(), the
 * fatal-error path (_ak_fatal), plus the version query and the tracking
 * switches shared by components. */
#include "common/error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

void _ak_fatal(const char *fmt, ...) {
  static const char prefix[] = "arenakit: ";
  char buf[1024];
  size_t n = sizeof prefix - 1;
  memcpy(buf, prefix, n);
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(buf + n, sizeof buf - n - 1, fmt, ap); /* room kept for '\n' */
  va_end(ap);
  if (k > 0) n += (size_t)k < sizeof buf - n - 1 ? (size_t)k : sizeof buf - n - 2;
  buf[n++] = '\n';
  for (size_t done = 0; done < n;) {
    ssize_t w = write(2, buf + done, n - done);
    if (w > 0)
      done += (size_t)w;
    else if (w < 0 && errno == EINTR)
      continue;
    else
      break;
  }
  abort();
}

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
