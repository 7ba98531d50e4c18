/* SPDX-License-Identifier: MIT */
/* arena_cache.c - the arenas' process-wide cache of released chunks.
 *
 * A program that makes an arena per request (or per frame) and destroys
 * it would otherwise map every chunk afresh and fault each of its pages
 * in again, round after round, and unmap it at the end (a TLB flush on
 * every core). Chunks an arena releases go here instead, and the next
 * arena that needs a chunk of that size takes one back, pages still
 * committed. The cache follows the reclaim policy (common/reclaim.h) like
 * the pools' and the malloc's spares: a chunk unused for the purge delay
 * has its data pages decommitted (the header page stays), one unused for
 * the release delay is unmapped, by the arenas' own calls or by the
 * background thread, so an idle program gets the memory back.
 *
 * One spare set per power of two: bin k holds chunks of [2^k, 2^(k+1))
 * bytes, so a chunk taken from bin ceil(log2(need)) is at least `need`
 * bytes (an arena uses the chunk's own size); for a `need` that is not a
 * power of two (a dedicated chunk), the newest chunk of its own bin is
 * tried too, and put back when it is too small. A cached chunk's header
 * holds the set's node (_ak_spare) in place of the arena's fields: the
 * chunk belongs to no arena while it is cached. Each set's lock is a leaf
 * (its callbacks run without it and take no lock); the fork handlers take
 * them all around fork(). */
#include <pthread.h>
#include <string.h>

#include "arena/arena_internal.h"
#include "common/lifecycle.h"
#include "common/reclaim.h"
#include "os/os_mem.h"

enum {
  BINS = 48,       /* chunk sizes up to 2^48 bytes */
  PER_BIN_CAP = 16 /* chunks kept per bin; past it the oldest is unmapped */
};

_Static_assert(sizeof(_ak_spare) <= AK_CHUNK_HDR, "the spare node lives in the chunk header");

static _ak_spare_set bins[BINS];
static pthread_once_t bins_once = PTHREAD_ONCE_INIT;
static bool bins_ready; /* set once by init_bins; read with acquire loads */

/* Decommits a cached chunk's data pages: from the first page boundary
 * after the header (which holds the node) to its end. */
static void chunk_decommit(_ak_spare *s, void *ctx) {
  (void)ctx;
  size_t page = _ak_os_page_size();
  uintptr_t c = (uintptr_t)s, from = (c + AK_CHUNK_HDR + page - 1) & ~(uintptr_t)(page - 1);
  if (c + s->size > from) (void)_ak_os_decommit((void *)from, c + s->size - from);
}

static void chunk_release(_ak_spare *s, void *ctx) {
  (void)ctx;
  _ak_os_free(s, s->size);
}

static const _ak_spare_ops chunk_ops = {chunk_decommit, chunk_release};

static void init_bins(void) {
  for (unsigned k = 0; k < BINS; k++)
    _ak_spare_set_init(&bins[k], &chunk_ops, NULL, PER_BIN_CAP, AK_SPARE_TIMED | AK_SPARE_REGISTERED);
  __atomic_store_n(&bins_ready, true, __ATOMIC_RELEASE);
}

static unsigned floor_log2(size_t n) { return 63u - (unsigned)__builtin_clzll((unsigned long long)n); }

void _ak_arena_cache_put(void *chunk, size_t size) {
  AK_ASSERT(size >= AK_CHUNK_HDR && ((uintptr_t)chunk & (_ak_os_page_size() - 1)) == 0); /* a mapped chunk */
  unsigned k = floor_log2(size);
  if (k >= BINS) {
    _ak_os_free(chunk, size);
    return;
  }
  pthread_once(&bins_once, init_bins);
  _ak_spare *s = (_ak_spare *)chunk;
  memset(s, 0, sizeof *s);
  _ak_spare_put(&bins[k], s, size);
}

void *_ak_arena_cache_take(size_t need, size_t *size) {
  if (!__atomic_load_n(&bins_ready, __ATOMIC_ACQUIRE) || need < 2) return NULL;
  unsigned lo = floor_log2(need), k = floor_log2(need - 1) + 1;    /* k = ceil(log2(need)) */
  _ak_spare *s = k < BINS ? _ak_spare_take(&bins[k], NULL) : NULL; /* every chunk of bin k fits */
  if (!s && lo != k && lo < BINS) { /* need is not a power of two: its own bin's newest may fit */
    s = _ak_spare_take(&bins[lo], NULL);
    if (s && s->size < need) {
      _ak_spare_put(&bins[lo], s, s->size);
      s = NULL;
    }
  }
  if (!s) return NULL;
  AK_ASSERT(s->size >= need && floor_log2(s->size) >= lo); /* the bins' invariant */
  *size = s->size;
  return s;
}

void _ak_arena_cache_drain(void) {
  if (!__atomic_load_n(&bins_ready, __ATOMIC_ACQUIRE)) return;
  for (unsigned k = 0; k < BINS; k++) _ak_spare_drain(&bins[k]);
}

/* ---- fork ---------------------------------------------------------------- */

static void before_fork(void) {
  if (!__atomic_load_n(&bins_ready, __ATOMIC_ACQUIRE)) return;
  for (unsigned k = 0; k < BINS; k++) _ak_spare_set_lock(&bins[k]);
}

static void after_fork(void) {
  if (!__atomic_load_n(&bins_ready, __ATOMIC_ACQUIRE)) return;
  for (unsigned k = BINS; k-- > 0;) _ak_spare_set_unlock(&bins[k]);
}

/* Registered at load, before any handler of the program (lifecycle.h). */
__attribute__((constructor(AK_CTOR_ARENA))) static void fork_register(void) {
  (void)pthread_atfork(before_fork, after_fork, after_fork);
}
