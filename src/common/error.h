/* SPDX-License-Identifier: MIT */
/* error.h - reporting errors (internal): to the caller (errno plus a
 * thread-local message for ak_last_error()) or, for misuse and corruption,
 * to stderr before ending the process (_ak_fatal, the library's only
 * fatal-error path). */
#ifndef AK_ERROR_H
#define AK_ERROR_H

#include <stddef.h>

/* _Noreturn is C11's; C++ tests include the internal headers too. */
#ifdef __cplusplus
#define AK_NORETURN [[noreturn]]
#else
#define AK_NORETURN _Noreturn
#endif

#if defined(__GNUC__) || defined(__clang__)
#define AK_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define AK_COLD __attribute__((cold, noinline))
#else
#define AK_PRINTF(f, a)
#define AK_COLD
#endif

/** Sets errno to `err` and the thread's last-error message to the
 *  formatted text (which should start with the public call's name).
 *  Keeps errno == err on return. */
void _ak_error(int err, const char *fmt, ...) AK_PRINTF(2, 3) AK_COLD;

/** The library's one fatal-error path: writes "arenakit: ", the formatted
 *  text and a newline to stderr (fd 2), then abort()s.
 *
 *  Use it when arenakit detects misuse or corruption it cannot recover from
 *  safely - a pointer it did not hand out, a double free, a forged mark, a
 *  corrupted free list - so that the process ends with one message naming
 *  the public call, the pointer and the reason. Never use it for a failure
 *  the caller can handle (bad arguments, out of memory): those return
 *  NULL or an error code through _ak_error.
 *
 *  Safe inside malloc itself: the text is formatted into a stack buffer
 *  (vsnprintf, at most 1023 bytes; longer text is cut) and written with
 *  write(2), retried on EINTR and partial writes, so nothing is allocated
 *  and no stdio lock is taken. The message should start with the public
 *  call's name, as _ak_error's does. */
AK_NORETURN void _ak_fatal(const char *fmt, ...) AK_PRINTF(1, 2) AK_COLD;

/** Writes "arenakit: ", the formatted text and a newline to stderr (fd 2)
 *  and returns: for a warning the caller cannot be told through a return
 *  value (an invalid environment option). Same path as _ak_fatal (stack
 *  buffer, write(2), no malloc, no stdio), so safe inside malloc; errno is
 *  kept. */
void _ak_warn(const char *fmt, ...) AK_PRINTF(1, 2) AK_COLD;

/** Writes all `n` bytes of `buf` to `fd` with write(2), retried on EINTR
 *  and partial writes. 0 when every byte was written, -1 with errno from
 *  write otherwise. No malloc, no stdio: safe inside malloc and at exit. */
int _ak_write_all(int fd, const char *buf, size_t n);

/** Room for any _ak_format_bytes() text, terminator included. */
#define AK_BYTES_TEXT 16

/** Writes `bytes` in binary units with three significant digits ("512 B",
 *  "1.50 KiB", "12.3 MiB", "4.00 GiB") into `buf` and returns `buf`. No
 *  malloc. */
const char *_ak_format_bytes(char *buf, size_t bytes);

#endif /* AK_ERROR_H */
