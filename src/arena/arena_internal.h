/* SPDX-License-Identifier: MIT */
/* arena_internal.h - the region arena's chunks and the helpers its files
 * share (internal to src/arena).
 *
 *   arena.c        the API: init, the slow path, clear, restore, cleanups,
 *                  tracking (ASan, Valgrind), realloc, stats
 *   arena_chunk.c  chunks: mapping, entering, the limit and the budget,
 *                  the refill (dedicated or regular chunk), the reclaim
 *                  policy on spare chunks
 *   arena_check.c  the checked and hardened builds' validation of pointers
 *                  and marks handed back, and the checked build's walk of
 *                  the chunk counts
 *
 * Chunk layout: [header (64 bytes) | data ...... end). Allocations move
 * a->ptr up from the first data byte. Regular chunks form one list in order
 * of first use: chunks before `cur` are full (for this cycle), chunks after
 * `cur` are spares kept by clear or restore; dedicated chunks (`large`) sit
 * on a list of their own, newest first.
 *
 * Invariants (AK_ASSERT in the checked build):
 *   ptr is a multiple of the granule;
 *   with a current chunk: data_start(cur) <= ptr <= real_limit <= cur->end;
 *   without one: ptr == real_limit == 0;
 *   with a budget: used_total <= max_bytes (the limit never lets the fast
 *   path past it);
 *   reserved and nchunks are the sums over both lists (the caller buffer
 *   counts 0). */
#ifndef AK_ARENA_INTERNAL_H
#define AK_ARENA_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arenakit/arena.h"
#include "common/assert.h"
#include "common/harden.h" /* AK_HARDENED */
#include "common/track.h"  /* AK_TRACK_MODE_* */

/* A chunk header. Invariant: data_start(c) <= end, and for OS chunks
 * [c, c + size) is one mapping from _ak_os_alloc. */
struct ak_arena_chunk {
  ak_arena_chunk *next;
  size_t size;   /* bytes mapped, header included (0 for the caller buffer) */
  uintptr_t end; /* one past the last data byte */
  unsigned flags;
  uint64_t since; /* spares: reclaim clock (ms) when the chunk was last emptied */
  /* The heap profiler (arena_prof.c): the address where the arena's
   * sampling countdown ends (the current chunk, while AK_ARENA_PROF is set;
   * 0: none drawn), and whether a block of the chunk was sampled since it
   * was last emptied (its kept blocks are forgotten by address range). */
  uintptr_t prof_end;
  uint32_t prof_sampled;
};

/* PURGED: a spare whose data pages were decommitted (the header stays). */
enum { AK_CHUNK_CALLER = 1u, AK_CHUNK_USED = 2u, AK_CHUNK_PURGED = 4u };
#define AK_CHUNK_HDR ((uintptr_t)64)
_Static_assert(sizeof(ak_arena_chunk) <= 64, "chunk header must fit in AK_CHUNK_HDR");

struct ak_arena_cleanup {
  ak_arena_cleanup *next;
  void (*fn)(void *);
  void *arg;
};

/* One live allocation, recorded only under Valgrind (for restore). */
struct ak_arena_piece {
  void *p;
  size_t n;
};

static inline uintptr_t data_start(const ak_arena_chunk *c) { return (uintptr_t)c + AK_CHUNK_HDR; }

#define AK_GRANULE ((uintptr_t)AK_ARENA_GRANULE)

/* `n` rounded up to the granule; the caller guarantees no overflow
 * (n <= SIZE_MAX / 2, checked by refill or implied by the fast-path size). */
static inline size_t granules(size_t n) { return (n + AK_GRANULE - 1) & ~(AK_GRANULE - 1); }

/* The checked and hardened builds validate the pointers and marks the
 * caller hands back (arena_check.c). */
static const bool arena_check_pointers = AK_CHECKED || AK_HARDENED != 0;

/* A bit of `tracked` beside the annotation modes (common/track.h): the
 * heap profiler samples this arena, and `limit` stops the fast path where
 * the thread's sampling countdown runs out (arena_prof.c). */
#define AK_ARENA_PROF (1u << 8)
#define AK_ARENA_ANNOTATED (AK_TRACK_MODE_ASAN | AK_TRACK_MODE_VALGRIND)

/* Whether allocations are annotated for ASan or Valgrind. */
static inline bool annotated(const ak_arena *a) { return (a->tracked & AK_ARENA_ANNOTATED) != 0; }

/* With any `tracked` bit, the chunk's (or budget's) limit is in
 * `real_limit` and `limit` is what the fast path may reach. */
static inline uintptr_t real_limit(const ak_arena *a) { return a->tracked ? a->real_limit : a->limit; }

/* Annotated, the fast path sees limit 0 and always falls through; sampled,
 * it sees the real limit until the next arm (every arena call that sets a
 * limit ends with _ak_arena_prof_arm). */
static inline void set_limit(ak_arena *a, uintptr_t lim) {
  if (a->tracked) {
    a->real_limit = lim;
    a->limit = annotated(a) ? 0 : lim;
  } else {
    a->limit = lim;
  }
}

static inline size_t used_total(const ak_arena *a) {
  return a->used_before + (a->cur ? (size_t)(a->ptr - data_start(a->cur)) : 0);
}

static inline size_t budget_left(const ak_arena *a) {
  size_t used = used_total(a);
  return a->opts.max_bytes > used ? a->opts.max_bytes - used : 0;
}

/* The bump invariants of the file comment, checked (checked build). */
static inline void assert_bump(const ak_arena *a) {
  AK_ASSERT((a->ptr & (AK_GRANULE - 1)) == 0);
  AK_ASSERT(a->cur ? data_start(a->cur) <= a->ptr && a->ptr <= real_limit(a) && real_limit(a) <= a->cur->end
                   : a->ptr == 0 && real_limit(a) == 0);
  AK_ASSERT(!a->opts.max_bytes || used_total(a) <= a->opts.max_bytes);
}

/* Places a block of `size` bytes at `align` in [ptr, lim); 0 if it does not
 * fit. `ptr` is granule-aligned; the block ends at p + granules(size).
 * Overflow-safe for any size and align (align a power of two). */
static inline uintptr_t place(uintptr_t ptr, uintptr_t lim, size_t size, size_t align) {
  if (ptr > lim || size > SIZE_MAX - AK_GRANULE) return 0;
  uintptr_t pad = (0 - ptr) & (uintptr_t)(align - 1);
  uintptr_t room = lim - ptr;
  if (pad > room || granules(size) > room - pad) return 0;
  return ptr + pad;
}

/* Invariant kept: a->ptr stays a multiple of the granule. */
static inline void *bump(ak_arena *a, size_t size, size_t align) {
  if (!a->cur) return NULL;
  uintptr_t p = place(a->ptr, real_limit(a), size, align);
  if (!p) return NULL;
  a->ptr = p + granules(size);
  AK_ASSERT(a->ptr <= real_limit(a)); /* the bump limit: chunk end or budget */
  return (void *)p;
}

/* arena_chunk.c */

/** Unmaps chunk `c` (not the caller buffer) and takes it out of the counts. */
void _ak_arena_release_chunk(ak_arena *a, ak_arena_chunk *c);

/** Makes `c` the current chunk; the bytes used in the old one are banked. */
void _ak_arena_enter(ak_arena *a, ak_arena_chunk *c);

/** Restarts the chunk growth at a clear from the regular-chunk bytes the
 *  cycle that ends went through (see _ak_arena_growth_restart in
 *  arena_chunk.c). Call before the chunks are released or reset. */
void _ak_arena_growth_restart(ak_arena *a);

/* ---- arena_cache.c: the process-wide cache of released chunks ---- */

/** Keeps a chunk an arena released (`size` bytes mapped at `chunk`, no
 *  arena's any more) for another arena, under the reclaim policy. */
void _ak_arena_cache_put(void *chunk, size_t size);
/** A cached chunk of at least `need` bytes (its size in `*size`), its
 *  contents unspecified, or NULL. */
void *_ak_arena_cache_take(size_t need, size_t *size);
/** Unmaps every cached chunk (tests; a process that must give all back). */
void _ak_arena_cache_drain(void);

/* ---- arena_prof.c: the heap profiler's side ---- */

/** Whether the slow path's allocation of `n` bytes crosses the end of
 *  the arena's countdown: it is then sampled, and a new one is drawn. */
bool _ak_arena_prof_due(ak_arena *a, size_t n);
/** Records `p` (`n` bytes asked, just allocated; `due` said so). */
void _ak_arena_prof_sampled(ak_arena *a, void *p, size_t n);
/** Ends every arena call that moves the bump pointer or the limit: with
 *  the profiler on, the fast path's limit stops where the thread's
 *  countdown runs out; off, the real limit is restored. */
void _ak_arena_prof_arm(ak_arena *a);
/** Forgets the blocks of `c` the profiler keeps at addresses >= `from`
 *  (0: all), before their memory can be handed out again. */
void _ak_arena_prof_drop(ak_arena_chunk *c, uintptr_t from);

/** Sets the limit for the current chunk: its end, or lower if the budget
 *  says so (ptr = limit = 0 without a current chunk). */
void _ak_arena_refresh_limit(ak_arena *a);

/** The refill of the slow path: a dedicated chunk for a large request, else
 *  a regular chunk (a spare that fits or a new one) entered and bumped.
 *  NULL + errno (ENOMEM: overflow, budget, the OS). */
void *_ak_arena_refill(ak_arena *a, size_t size, size_t align);

/** The reclaim policy on the spares after `cur`: the data pages of one
 *  unused for the purge delay at `now` are decommitted. */
void _ak_arena_purge_spares(ak_arena *a, uint64_t now);

/* arena_check.c */

/** Checked and hardened builds: `m` is a live mark of `a`; otherwise the
 *  process ends with a message naming ak_arena_restore. */
void _ak_arena_check_mark(const ak_arena *a, const ak_arena_mark *m);

/** Checked build: `reserved` and `nchunks` are the sums over the chunk
 *  lists, and `cur` is on the regular list (a no-op elsewhere). */
void _ak_arena_check_counts(const ak_arena *a);

#endif /* AK_ARENA_INTERNAL_H */
