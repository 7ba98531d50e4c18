/* SPDX-License-Identifier: MIT */
/* arenakit/common.h - what every arenakit header shares: the version,
 * the export and fast-path macros, and the error query (ak_last_error).
 *
 * Nothing here allocates. Users include <arenakit/arenakit.h>, which
 * includes this file. */
#ifndef ARENAKIT_COMMON_H
#define ARENAKIT_COMMON_H

#include <stddef.h>
#include <stdint.h>

#define AK_VERSION_MAJOR 0
#define AK_VERSION_MINOR 1
#define AK_VERSION_PATCH 0
/** Version as one integer: major * 10000 + minor * 100 + patch. */
#define AK_VERSION (AK_VERSION_MAJOR * 10000 + AK_VERSION_MINOR * 100 + AK_VERSION_PATCH)

/* AK_API marks the exported symbols of the shared library; everything else
 * is built with hidden visibility. */
#if defined(_WIN32)
#define AK_API
#elif defined(__GNUC__) || defined(__clang__)
#define AK_API __attribute__((visibility("default")))
#else
#define AK_API
#endif

#if defined(__GNUC__) || defined(__clang__)
#define AK_LIKELY(x) __builtin_expect(!!(x), 1)
#define AK_UNLIKELY(x) __builtin_expect(!!(x), 0)
/* Inline fast paths are `static inline`: every translation unit gets its
 * own copy, so including the headers from many C and C++ files of one
 * program always links (no C99 `extern inline` definition needed). */
#define AK_FAST_PATH static inline __attribute__((always_inline))
#define AK_MALLOC_LIKE __attribute__((malloc, warn_unused_result))
#define AK_ALLOC_SIZE(n) __attribute__((alloc_size(n)))
#define AK_ALLOC_ALIGN(n) __attribute__((alloc_align(n)))
#else
#define AK_LIKELY(x) (x)
#define AK_UNLIKELY(x) (x)
#define AK_FAST_PATH static inline
#define AK_MALLOC_LIKE
#define AK_ALLOC_SIZE(n)
#define AK_ALLOC_ALIGN(n)
#endif

/* Written after the tag of every public enum: in C++ it fixes the enum's
 * type to int. Without it a C++ enum holds only the values its enumerators
 * span, and a bad value (a mode read from a file, an int cast) would be
 * undefined behaviour before the library could refuse it with EINVAL; C
 * enums are ints already. */
#if defined(__cplusplus) && __cplusplus >= 201103L
#define AK_ENUM_INT : int
#else
#define AK_ENUM_INT
#endif

#ifdef __cplusplus
extern "C" {
#endif

/** Returns the version the library was built as (AK_VERSION of its headers).
 *  Thread-safe; never fails. */
AK_API int ak_version(void);

/** Returns a description of the last error an arenakit call reported on the
 *  calling thread, naming the call and the reason (for example
 *  "ak_arena_alloc: alignment 3 is not a power of two"), or "" if none.
 *  The string is thread-local and stays valid until the thread's next
 *  failing arenakit call. Calls set errno as well; this only adds detail.
 *  Thread-safe; never fails. */
AK_API const char *ak_last_error(void);

/** Returns the hardening mitigations the library was built with, as a
 *  comma-separated list of "links", "guards", "shuffle", "double-free"
 *  (docs/hardening.md), or "none" for a normal build. The string is static.
 *  Thread-safe; never fails. */
AK_API const char *ak_hardening(void);

#ifdef __cplusplus
}
#endif

#endif /* ARENAKIT_COMMON_H */
