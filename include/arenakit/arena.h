/* SPDX-License-Identifier: MIT */
/* arenakit/arena.h - the region (bump) arena, `ak_arena`.
 *
 * An arena hands out memory by moving one pointer and frees everything at
 * once (`ak_arena_clear`, `ak_arena_destroy`) or back to a saved mark
 * (`ak_arena_restore`). Memory comes in chunks from the OS layer: a small
 * first chunk, doubling up to a cap; a request too large for a regular
 * chunk gets a dedicated chunk of its own without abandoning the current
 * one.
 *
 * Thread-safety: an arena is not synchronised. Use one arena per thread, or
 * guard it with your own lock. Different arenas may be used concurrently.
 *
 * Errors: functions that return a pointer return NULL and set errno
 * (EINVAL for a bad argument, ENOMEM when the budget, the address space or
 * the system refuses); ak_last_error() names the call and the reason. No
 * arena function aborts or exits on out-of-memory.
 */
#ifndef ARENAKIT_ARENA_H
#define ARENAKIT_ARENA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "arenakit/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/** What ak_arena_clear() keeps for reuse (Zig's reset modes). */
typedef enum ak_arena_retain AK_ENUM_INT {
  /** Default. Keep every chunk that held an allocation since the previous
   *  clear; release chunks that sat unused through a whole cycle and every
   *  dedicated (large) chunk. Memory held after a clear is therefore bounded
   *  by what the last cycle used: repeated cycles never grow it. */
  AK_ARENA_RETAIN_USED = 0,
  /** Like AK_ARENA_RETAIN_USED, but keep at most `retain_limit` bytes of
   *  chunks (the first chunks in order of use are kept first). */
  AK_ARENA_RETAIN_LIMIT = 1,
  /** Release every chunk obtained from the OS (a caller buffer is kept). */
  AK_ARENA_RETAIN_NONE = 2
} ak_arena_retain;

/** Options for ak_arena_init(). A zeroed struct (or NULL) gives defaults. */
typedef struct ak_arena_options {
  /** Size in bytes of the first chunk taken from the OS, header included;
   *  rounded up to the page size. 0 = AK_ARENA_DEFAULT_FIRST_CHUNK. */
  size_t first_chunk;
  /** Growth cap: chunks double in size up to this many bytes; requests
   *  above a quarter of it get a dedicated chunk. The doubling restarts at
   *  each ak_arena_clear() from what the cycle used, so the arena's chunks
   *  follow the size of one cycle, not the number of cycles.
   *  0 = AK_ARENA_DEFAULT_MAX_CHUNK. Must be >= first_chunk. */
  size_t max_chunk;
  /** Optional caller-owned memory used before any chunk is taken from the
   *  OS (stack or static storage). The arena never frees it; it must stay
   *  valid until ak_arena_destroy(). Must be at least
   *  AK_ARENA_MIN_BUFFER bytes when not NULL. */
  void *buffer;
  /** Size of `buffer` in bytes. */
  size_t buffer_size;
  /** Hard budget: the bytes handed out (sizes rounded up to the 8-byte
   *  granule, plus alignment padding)
   *  between two clears never exceed this; an allocation past it returns
   *  NULL with ENOMEM. Checked on every allocation. 0 = unlimited. */
  size_t max_bytes;
  /** Retention policy of ak_arena_clear(). */
  ak_arena_retain retain;
  /** With AK_ARENA_RETAIN_LIMIT: bytes of chunks kept by a clear. */
  size_t retain_limit;
  /** The arena's name in heap profiles (arenakit/prof.h): its sampled
   *  blocks carry the pprof label arena=<name> ("unnamed" when NULL). Not
   *  copied: the text must stay valid while the arena is. */
  const char *name;
} ak_arena_options;

enum {
  /** Default first chunk: 4 KiB. */
  AK_ARENA_DEFAULT_FIRST_CHUNK = 4096,
  /** Default growth cap: 256 MiB of address space (pages are only used
   *  as they are touched; large caps make destroying a big arena a few
   *  munmap calls). */
  AK_ARENA_DEFAULT_MAX_CHUNK = 256 * 1024 * 1024,
  /** Smallest caller buffer accepted (it holds a 64-byte chunk header). */
  AK_ARENA_MIN_BUFFER = 128,
  /** Every block size is rounded up to this many bytes. */
  AK_ARENA_GRANULE = 8,
  /** Requests of at most this many bytes and alignment take the inline
   *  fast path; larger ones go through ak_arena_alloc_slow(). */
  AK_ARENA_FAST_MAX = 4096
};

/** Internal: a chunk header. Opaque to users. */
typedef struct ak_arena_chunk ak_arena_chunk;
/** Internal: a cleanup registered with ak_arena_defer(). Opaque. */
typedef struct ak_arena_cleanup ak_arena_cleanup;

/** A region arena. A complete type so that it can live on the stack or in
 *  a struct; initialise with ak_arena_init(), never touch the fields. A
 *  zero-filled arena (`ak_arena a = {0};`, or one after ak_arena_destroy())
 *  is a valid empty arena with the default options.
 *  Do not copy an arena that holds chunks: the copy and the original would
 *  both own them.
 *
 *  Invariant of the fast path: `ptr` is a multiple of AK_ARENA_GRANULE and
 *  `ptr <= limit`; the bytes [ptr, limit) of
 *  the current chunk are free, and allocations move `ptr` up. `limit` is the
 *  smaller of the chunk's end and the budget ceiling, so the one comparison
 *  in ak_arena_alloc() checks both room and budget. With no chunk yet,
 *  ptr == limit == 0. In tracked mode (AddressSanitizer or Valgrind) `limit`
 *  is 0 so every call takes the slow path, which annotates each allocation;
 *  the real limit is then in `real_limit`. While the heap profiler samples
 *  (arenakit/prof.h), `limit` stops where the thread's sampling countdown
 *  runs out, and the real limit is in `real_limit` too. */
typedef struct ak_arena {
  uintptr_t ptr;    /**< first free byte in the current chunk */
  uintptr_t limit;  /**< end of what the fast path may hand out */
  size_t requested; /**< stats: sum of requested sizes since the last clear */
  /* ---- cold: only the slow path and the cycle operations use these ---- */
  uintptr_t real_limit;          /**< the limit when `limit` is the tracked trap */
  ak_arena_chunk *chunks;        /**< regular chunks, in order of first use */
  ak_arena_chunk *cur;           /**< current regular chunk (NULL: none yet) */
  ak_arena_chunk *large;         /**< dedicated chunks, newest first */
  ak_arena_cleanup *cleanups;    /**< registered cleanups, newest first */
  size_t used_before;            /**< bytes handed out before the current chunk */
  size_t next_chunk;             /**< size of the next regular chunk to map */
  size_t reserved;               /**< bytes currently mapped from the OS */
  size_t nchunks;                /**< chunks currently held (regular + large) */
  size_t peak_reserved;          /**< high-water mark of `reserved` */
  struct ak_arena_piece *pieces; /**< under Valgrind: live allocations */
  size_t npieces, cap_pieces;    /**< ... their count and room */
  ak_arena_options opts;         /**< the options, defaults filled in */
  uintptr_t vg_pool;             /**< tracked mode: Valgrind mempool handle */
  unsigned tracked;              /**< annotation mode (0: none) */
} ak_arena;

/** A saved position; restoring it frees everything allocated after it. */
typedef struct ak_arena_mark {
  ak_arena_chunk *chunk;
  uintptr_t ptr;
  size_t requested;
  size_t used_before;
  ak_arena_chunk *large;
  ak_arena_cleanup *cleanups;
  size_t npieces;
} ak_arena_mark;

/** Statistics of one arena (ak_arena_stats_get()). */
typedef struct ak_arena_stats {
  size_t requested;     /**< bytes requested since the last clear */
  size_t used;          /**< bytes handed out: sizes rounded up to the
                             granule, plus alignment padding */
  size_t reserved;      /**< bytes currently mapped from the OS */
  size_t peak_reserved; /**< most bytes ever mapped at once */
  size_t chunks;        /**< chunks currently held from the OS */
} ak_arena_stats;

/** Initialises `a` with `opts` (NULL = defaults). Takes no memory from the
 *  OS yet. Returns 0, or EINVAL (errno set too) when the options contradict
 *  each other (max_chunk < first_chunk, a buffer under AK_ARENA_MIN_BUFFER,
 *  an unknown retain mode) or `a` is NULL. Not thread-safe for `a`. */
AK_API int ak_arena_init(ak_arena *a, const ak_arena_options *opts);

/** Slow path of ak_arena_alloc(); call ak_arena_alloc() instead. */
AK_API void *ak_arena_alloc_slow(ak_arena *a, size_t size, size_t align);

/** Allocates `size` bytes aligned to `align` (a power of two, any size,
 *  also beyond the page size). The memory belongs to the arena: it is valid
 *  until the next ak_arena_clear(), ak_arena_destroy(), or restore of a mark
 *  taken before it, and must not be passed to free(). Size 0 returns a
 *  unique pointer. Contents are unspecified (see ak_arena_zalloc()).
 *  Errors: NULL with EINVAL if `align` is 0 or not a power of two; NULL
 *  with ENOMEM if the budget or the OS refuses, including sizes that would
 *  overflow when padded. Not thread-safe for `a`.
 *
 *  Sizes are rounded up to AK_ARENA_GRANULE (8) bytes, so every block
 *  starts at least 8-aligned and the bump pointer always is.
 *
 *  Fast path (constant size and align <= 8: 6 instructions, one branch; see
 *  docs/arena-fast-path.md). Invariants: `ptr` is a multiple of 8 and
 *  `ptr <= limit`. With `m` the alignment bits above the granule, adding
 *  `m` and clearing it rounds `ptr` up to `align` (for align <= 8, m == 0 and
 *  the rounding vanishes, leaving one add on the loop-carried chain). With
 *  size and align - 1 both below AK_ARENA_FAST_MAX and every limit far below
 *  UINTPTR_MAX - 3 * AK_ARENA_FAST_MAX, nothing can wrap, so
 *  `end <= limit` alone proves [p, end) is free and within the budget. */
AK_FAST_PATH AK_MALLOC_LIKE void *ak_arena_alloc(ak_arena *a, size_t size, size_t align) {
  uintptr_t m = (uintptr_t)(align - 1) & ~(uintptr_t)(AK_ARENA_GRANULE - 1);
  uintptr_t p = (a->ptr + m) & ~m;
  uintptr_t end = p + ((size + (AK_ARENA_GRANULE - 1)) & ~(size_t)(AK_ARENA_GRANULE - 1));
  if (AK_LIKELY(((size - 1) | (align - 1)) < AK_ARENA_FAST_MAX && (align & (align - 1)) == 0 &&
                end <= a->limit)) {
    a->ptr = end;
    a->requested += size;
    return (void *)p;
  }
  return ak_arena_alloc_slow(a, size, align);
}

/** Frees every allocation at once and keeps chunks for reuse as the retain
 *  policy says. Kept chunks stay mapped; one left unused for the reclaim
 *  policy's purge delay (arenakit/reclaim.h; 250 ms by default) has its
 *  pages decommitted by the arena's next call that needs a chunk (or the
 *  next clear), and is reused as it is. Registered cleanups run first,
 *  newest first. Marks taken before the clear become invalid. Not
 *  thread-safe for `a`. Never fails. */
AK_API void ak_arena_clear(ak_arena *a);

/** Runs the cleanups and gives every chunk back: to the process-wide
 *  cache of chunks, from which the next arena that needs one takes it with
 *  its pages committed, and from there to the OS under the reclaim policy
 *  (arenakit/reclaim.h: decommitted after the purge delay, unmapped after
 *  the release delay, also by the background thread). The caller buffer is
 *  not freed. `a` may be initialised again afterwards; destroying twice is
 *  harmless. Not thread-safe for `a` (the cache is thread-safe). Never
 *  fails. */
AK_API void ak_arena_destroy(ak_arena *a);

/** Saves the current position. O(1). Not thread-safe for `a`. */
AK_API ak_arena_mark ak_arena_save(const ak_arena *a);

/** Frees everything allocated after `m` was saved: runs the cleanups
 *  registered after it (newest first) and returns the dedicated chunks
 *  taken after it; regular chunks stay for reuse. The bump part is O(1).
 *  A block allocated before `m` and grown in place by ak_arena_realloc
 *  after it goes back to its size at `m` (the bytes it grew into are
 *  freed; its first bytes up to that size are kept).
 *  `m` must come from this arena, after its last clear, and must not be
 *  newer than a mark already restored (a mark restored past is stale).
 *  Invalid marks: the checked and hardened builds validate `m` against the
 *  arena's chunk and cleanup lists first (reading nothing through it) and
 *  end the process with a message naming ak_arena_restore, the mark's
 *  position and the reason (another arena's mark, a stale one, a forged
 *  one), then abort(). A normal build trusts `m`: an invalid mark corrupts
 *  the arena silently (later allocations may land in memory the arena does
 *  not own). Not thread-safe for `a`. */
AK_API void ak_arena_restore(ak_arena *a, ak_arena_mark m);

/** Registers `fn(arg)` to run when the arena is cleared, destroyed or
 *  restored to a mark saved before this call; cleanups run newest first.
 *  `fn` must return normally (a C++ exception must not unwind through it)
 *  and must not use the arena it is registered with.
 *  The record lives in the arena. Returns 0, or ENOMEM (errno set) if the
 *  record cannot be allocated - `fn` is then not registered and the caller
 *  still owns whatever `arg` refers to. Not thread-safe for `a`. */
AK_API int ak_arena_defer(ak_arena *a, void (*fn)(void *), void *arg);

/** Like ak_arena_alloc(), then zero-fills the bytes. Same errors. */
AK_API void *ak_arena_zalloc(ak_arena *a, size_t size, size_t align);

/** Allocates `count * size` bytes aligned to `align`; NULL with ENOMEM if
 *  the product overflows. `zero` != 0 zero-fills. Other errors as
 *  ak_arena_alloc(). */
AK_API void *ak_arena_alloc_array(ak_arena *a, size_t count, size_t size, size_t align, int zero);

/** Copies the NUL-terminated string `s` into the arena. NULL with EINVAL
 *  if `s` is NULL, ENOMEM as ak_arena_alloc(). */
AK_API char *ak_arena_strdup(ak_arena *a, const char *s);

/** Copies at most `n` bytes of `s` and a terminating NUL into the arena.
 *  Errors as ak_arena_strdup(). */
AK_API char *ak_arena_strndup(ak_arena *a, const char *s, size_t n);

/** Grows or shrinks an allocation. When `p` is the newest allocation of
 *  the arena's current chunk (and aligned to `align`) and the chunk has
 *  room, it is resized in place and `p` is returned; shrinking that newest
 *  allocation always succeeds in place. Otherwise a new block
 *  is allocated and min(old_size, new_size) bytes are copied; the old block
 *  stays until the arena is cleared. `p` NULL acts as ak_arena_alloc().
 *  `old_size` must be the size `p` was allocated (or last resized) with.
 *  Errors: NULL with EINVAL/ENOMEM as ak_arena_alloc(); `p` is unchanged.
 *  Invalid pointers: the checked and hardened builds end the process with a
 *  message naming ak_arena_realloc, `p` and the reason, then abort(), when
 *  [p, p + old_size) is not memory `a` handed out (stack, static, malloc'd,
 *  another arena's, unmapped, or freed by a clear or restore); an interior
 *  pointer into a live block is not detected. A normal build does not check
 *  a pointer that is not the newest allocation: it copies
 *  min(old_size, new_size) bytes from `p` (an unmapped `p` faults). */
AK_API void *ak_arena_realloc(ak_arena *a, void *p, size_t old_size, size_t new_size, size_t align);

/** Returns true if `p` points into memory handed out by `a` (any chunk).
 *  O(number of chunks). */
AK_API bool ak_arena_owns(const ak_arena *a, const void *p);

/** Validates a block handed back to `a` (used by the C++ allocators'
 *  deallocate). In the checked and hardened builds, when [p, p + size) is
 *  not memory `a` handed out (size 0 counts as 1), the process ends with a
 *  message naming `call` (NULL: "ak_arena_check_block"), `p` and the
 *  reason, then abort(); nothing is read through `p`. A normal build, a NULL
 *  `a` or a NULL `p` does nothing. O(number of chunks). Frees nothing. Not
 *  thread-safe for `a`. */
AK_API void ak_arena_check_block(const ak_arena *a, const void *p, size_t size, const char *call);

/** Fills `out` with the arena's statistics. */
AK_API void ak_arena_stats_get(const ak_arena *a, ak_arena_stats *out);

/** Allocates one object of `type`, aligned for it (uninitialised). */
#ifdef __cplusplus
#define AK_ALIGNOF(type) alignof(type)
#else
#define AK_ALIGNOF(type) _Alignof(type)
#endif
#define AK_ARENA_NEW(a, type) ((type *)ak_arena_alloc((a), sizeof(type), AK_ALIGNOF(type)))
/** Allocates an array of `n` objects of `type`; NULL with ENOMEM if
 *  n * sizeof(type) overflows. Uninitialised. */
#define AK_ARENA_NEW_ARRAY(a, type, n) \
  ((type *)ak_arena_alloc_array((a), (n), sizeof(type), AK_ALIGNOF(type), 0))
/** As AK_ARENA_NEW_ARRAY, zero-filled. */
#define AK_ARENA_NEW_ZARRAY(a, type, n) \
  ((type *)ak_arena_alloc_array((a), (n), sizeof(type), AK_ALIGNOF(type), 1))

#ifdef __cplusplus
}
#endif

#endif /* ARENAKIT_ARENA_H */
