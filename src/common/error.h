/* error.h - reporting errors to the caller (internal): errno plus a
 * thread-local message for ak_last_error(). */
#ifndef AK_ERROR_H
#define AK_ERROR_H

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

#endif /* AK_ERROR_H */
