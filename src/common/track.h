/* SPDX-License-Identifier: MIT */
/* track.h - every AddressSanitizer and Valgrind annotation of arenakit
 * goes through these macros (internal).
 *
 * AK_TRACK_ASAN is 1 when the library is built with AddressSanitizer;
 * AK_HAVE_VALGRIND is set by the build when <valgrind/memcheck.h> exists.
 * Without either, every macro compiles to nothing. Components call
 * _ak_track_enabled() once to decide whether to take their annotated slow
 * paths: it is true under ASan, or when the program runs under Valgrind. */
#ifndef AK_TRACK_H
#define AK_TRACK_H

#include <stdbool.h>
#include <stddef.h>

#if defined(__SANITIZE_ADDRESS__)
#define AK_TRACK_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define AK_TRACK_ASAN 1
#endif
#endif
#ifndef AK_TRACK_ASAN
#define AK_TRACK_ASAN 0
#endif

#if AK_TRACK_ASAN
#include <sanitizer/asan_interface.h>
#define AK_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define AK_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define AK_POISON(p, n) ((void)(p), (void)(n))
#define AK_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#if defined(AK_HAVE_VALGRIND) && AK_HAVE_VALGRIND
#include <valgrind/memcheck.h>
#include <valgrind/valgrind.h>
#define AK_ON_VALGRIND() (RUNNING_ON_VALGRIND != 0)
#define AK_VG_CREATE_POOL(pool) VALGRIND_CREATE_MEMPOOL((pool), 0, 0)
#define AK_VG_DESTROY_POOL(pool) VALGRIND_DESTROY_MEMPOOL((pool))
#define AK_VG_ALLOC(pool, p, n) VALGRIND_MEMPOOL_ALLOC((pool), (p), (n))
#define AK_VG_FREE(pool, p) VALGRIND_MEMPOOL_FREE((pool), (p))
#define AK_VG_TRIM(pool, p, n) VALGRIND_MEMPOOL_TRIM((pool), (p), (n))
#define AK_VG_CHANGE(pool, p, n) VALGRIND_MEMPOOL_CHANGE((pool), (p), (p), (n))
#define AK_VG_NOACCESS(p, n) VALGRIND_MAKE_MEM_NOACCESS((p), (n))
#define AK_VG_DEFINED(p, n) VALGRIND_MAKE_MEM_DEFINED((p), (n))
#define AK_VG_UNDEFINED(p, n) VALGRIND_MAKE_MEM_UNDEFINED((p), (n))
#else
#define AK_ON_VALGRIND() 0
#define AK_VG_CREATE_POOL(pool) ((void)(pool))
#define AK_VG_DESTROY_POOL(pool) ((void)(pool))
#define AK_VG_ALLOC(pool, p, n) ((void)(pool), (void)(p), (void)(n))
#define AK_VG_FREE(pool, p) ((void)(pool), (void)(p))
#define AK_VG_TRIM(pool, p, n) ((void)(pool), (void)(p), (void)(n))
#define AK_VG_CHANGE(pool, p, n) ((void)(pool), (void)(p), (void)(n))
#define AK_VG_NOACCESS(p, n) ((void)(p), (void)(n))
#define AK_VG_DEFINED(p, n) ((void)(p), (void)(n))
#define AK_VG_UNDEFINED(p, n) ((void)(p), (void)(n))
#endif

/* Marks [p, p + n) as free memory the user must not touch. */
#define AK_TRACK_RELEASE(p, n) \
  do {                         \
    AK_POISON((p), (n));       \
    AK_VG_NOACCESS((p), (n));  \
  } while (0)

/* Marks [p, p + n) as handed to the user: addressable, contents undefined. */
#define AK_TRACK_ACQUIRE(p, n) \
  do {                         \
    AK_UNPOISON((p), (n));     \
    AK_VG_UNDEFINED((p), (n)); \
  } while (0)

/* Marks [p, p + n) as the allocator's own bookkeeping, readable by it. */
#define AK_TRACK_INTERNAL(p, n) \
  do {                          \
    AK_UNPOISON((p), (n));      \
    AK_VG_DEFINED((p), (n));    \
  } while (0)

/* What _ak_track_mode() reports. */
#define AK_TRACK_MODE_ASAN 1u
#define AK_TRACK_MODE_VALGRIND 2u

/** Which annotations the running program needs: 0, or AK_TRACK_MODE_ASAN
 *  and/or AK_TRACK_MODE_VALGRIND. Thread-safe; cheap after the first call. */
unsigned _ak_track_mode(void);

/** True when allocations must be annotated: the library runs with ASan, or
 *  the program runs under Valgrind. Thread-safe; cheap after the first call. */
bool _ak_track_enabled(void);

/** A unique, never-dereferenced handle for a Valgrind mempool. Handles are
 *  non-canonical addresses, so they never collide with a real pool and stay
 *  valid when the owning struct is moved. */
void *_ak_track_new_pool_id(void);

#endif /* AK_TRACK_H */
