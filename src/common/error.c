/* SPDX-License-Identifier: MIT */
/* error.c - the library's one error path: errno and the thread-local
 * message behind ak_last_error() (_ak_error), warnings (_ak_warn) and the
 * fatal-error path (_ak_fatal), written with write(2), no malloc, no
 * stdio. */
#include "common/error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arenakit/common.h" /* ak_last_error: AK_API */

static _Thread_local char last_error[256];

void _ak_error(int err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  errno = err;
}

const char *ak_last_error(void) { return last_error; }

int _ak_write_all(int fd, const char *buf, size_t n) {
  for (size_t done = 0; done < n;) {
    ssize_t w = write(fd, buf + done, n - done);
    if (w > 0)
      done += (size_t)w;
    else if (w < 0 && errno == EINTR)
      continue;
    else
      return -1;
  }
  return 0;
}

/* "arenakit: <text>\n" into buf (cut to fit), written to fd 2. */
static void message_write(const char *fmt, va_list ap) {
  static const char prefix[] = "arenakit: ";
  char buf[1024];
  size_t n = sizeof prefix - 1;
  memcpy(buf, prefix, n);
  int k = vsnprintf(buf + n, sizeof buf - n - 1, fmt, ap); /* room kept for '\n' */
  if (k > 0) n += (size_t)k < sizeof buf - n - 1 ? (size_t)k : sizeof buf - n - 2;
  buf[n++] = '\n';
  int saved = errno;
  (void)_ak_write_all(2, buf, n);
  errno = saved;
}

void _ak_warn(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  message_write(fmt, ap);
  va_end(ap);
}

void _ak_fatal(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  message_write(fmt, ap);
  va_end(ap);
  abort();
}

const char *_ak_format_bytes(char *buf, size_t bytes) {
  static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) {
    snprintf(buf, AK_BYTES_TEXT, "%zu B", bytes);
    return buf;
  }
  double v = (double)bytes / 1024;
  unsigned u = 0;
  while (v >= 1023.5 && u + 1 < sizeof units / sizeof units[0]) { /* 1023.5 would print as 1024 */
    v /= 1024;
    u++;
  }
  /* Three significant digits: 1.50 KiB, 12.3 MiB, 512 GiB. */
  snprintf(buf, AK_BYTES_TEXT, v < 9.995 ? "%.2f %s" : v < 99.95 ? "%.1f %s" : "%.0f %s", v, units[u]);
  return buf;
}
