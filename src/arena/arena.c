/* SPDX-License-Identifier: MIT */
/* arena.c - the region arena (component layer over the OS layer).
 *
 * Call tree:
 *   ak_arena_alloc (inline, arena.h)
 *     -> ak_arena_alloc_slow      bad align, size 0 or > FAST_MAX, tracked
 *          -> bump                 try the current chunk
 *          -> refill               budget check, then
 *               -> alloc_large     dedicated chunk (need > max_chunk / 4)
 *               -> next_regular    a spare chunk that fits, or a new one
 *                                  (sizes double up to max_chunk)
 *               -> enter, bump
 *   ak_arena_clear   -> run_cleanups, release large, retain policy, enter
 *   ak_arena_restore -> run_cleanups, release large after mark, rewind
 *
 * Chunk layout: [header (64 bytes) | data ...... end). Allocations move
 * a->ptr up from the first data byte. Regular chunks form one list in order
 * of first use: chunks before `cur` are full (for this cycle), chunks after
 * `cur` are spares kept by clear or restore.
 *
 * Retained chunks follow the reclaim policy (common/reclaim.h) as far as
 * the arena's contract allows: they stay mapped (the retain policy says
 * which are kept), but a spare left unused for the purge delay has its data
 * pages decommitted (purge_spares, on the slow path that looks for a chunk,
 * and at clear), so a cleared arena does not hold its peak committed
 * forever. A purged spare is reused as it is: its pages read as zero and
 * fault in as they are written. The arena is not thread-safe, so only its
 * own calls run the policy (no background thread). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "arenakit/arena.h"
#include "common/error.h"
#include "common/harden.h" /* AK_HARDENED */
#include "common/reclaim.h"
#include "common/track.h"
#include "os/os_mem.h"

/* A chunk header. Invariant: data_start(c) <= end, and for OS chunks
 * [c, c + size) is one mapping from _ak_os_alloc. */
struct ak_arena_chunk {
  ak_arena_chunk *next;
  size_t size;   /* bytes mapped, header included (0 for the caller buffer) */
  uintptr_t end; /* one past the last data byte */
  unsigned flags;
  uint64_t since; /* spares: reclaim clock (ms) when the chunk was last emptied */
};

/* PURGED: a spare whose data pages were decommitted (the header stays). */
enum { CHUNK_CALLER = 1u, CHUNK_USED = 2u, CHUNK_PURGED = 4u };
#define HDR ((uintptr_t)64)
_Static_assert(sizeof(ak_arena_chunk) <= 64, "chunk header must fit in HDR");

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

static inline uintptr_t data_start(const ak_arena_chunk *c) { return (uintptr_t)c + HDR; }

/* ---- pointers handed back (checked and hardened builds) -----------------
 * ak_arena_realloc's block, ak_arena_restore's mark and the C++ layer's
 * deallocate come back from the caller. These builds validate them against
 * the arena's chunk lists before anything is read through them (only list
 * nodes the arena owns are dereferenced) and end the process with one
 * message naming the call, the pointer and the reason. */
#ifndef AK_CHECKED
#define AK_CHECKED 0
#endif
static const bool arena_check_pointers = AK_CHECKED || AK_HARDENED != 0;

static _Noreturn AK_COLD void bad_pointer(const char *call, const void *p, const char *why) {
  _ak_fatal("%s(%p): %s", call, p, why);
}

static inline uintptr_t real_limit(const ak_arena *a) { return a->tracked ? a->real_limit : a->limit; }

/* In tracked mode the fast path sees limit 0 and always falls through. */
static inline void set_limit(ak_arena *a, uintptr_t lim) {
  if (a->tracked) {
    a->real_limit = lim;
    a->limit = 0;
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

/* The limit for the current chunk: its end, or lower if the budget says so. */
static void refresh_limit(ak_arena *a) {
  if (!a->cur) {
    a->ptr = 0;
    set_limit(a, 0);
    return;
  }
  uintptr_t lim = a->cur->end;
  if (a->opts.max_bytes) {
    size_t left = budget_left(a);
    if (left < lim - a->ptr) lim = a->ptr + left;
  }
  set_limit(a, lim);
}

static void account_map(ak_arena *a, size_t size) {
  a->reserved += size;
  a->nchunks++;
  if (a->reserved > a->peak_reserved) a->peak_reserved = a->reserved;
}

static void release_chunk(ak_arena *a, ak_arena_chunk *c) {
  if (c->flags & CHUNK_CALLER) return;
  a->reserved -= c->size;
  a->nchunks--;
  /* The kernel may hand the range out again: leave no poison behind. */
  if (a->tracked) AK_TRACK_INTERNAL((void *)c, c->size);
  _ak_os_free(c, c->size);
}

static ak_arena_chunk *map_chunk(ak_arena *a, size_t size) {
  ak_arena_chunk *c = _ak_os_alloc(size, 1);
  if (!c) return NULL;
  size = _ak_os_round_page(size);
  c->next = NULL;
  c->size = size;
  c->end = (uintptr_t)c + size;
  c->flags = 0;
  account_map(a, size);
  if (a->tracked) AK_TRACK_RELEASE((void *)data_start(c), c->end - data_start(c));
  return c;
}

/* Makes `c` the current chunk; the bytes used in the old one are banked. */
static void enter(ak_arena *a, ak_arena_chunk *c) {
  if (a->cur) a->used_before += (size_t)(a->ptr - data_start(a->cur));
  a->cur = c;
  c->flags = (c->flags | CHUNK_USED) & ~(unsigned)CHUNK_PURGED;
  a->ptr = data_start(c);
  refresh_limit(a);
}

#define GRANULE ((uintptr_t)AK_ARENA_GRANULE)

/* `n` rounded up to the granule; the caller guarantees no overflow
 * (n <= SIZE_MAX / 2, checked by refill or implied by the fast-path size). */
static inline size_t granules(size_t n) { return (n + GRANULE - 1) & ~(GRANULE - 1); }

/* Places a block of `size` bytes at `align` in [ptr, lim); 0 if it does not
 * fit. `ptr` is granule-aligned; the block ends at p + granules(size).
 * Overflow-safe for any size and align (align a power of two). */
static uintptr_t place(uintptr_t ptr, uintptr_t lim, size_t size, size_t align) {
  if (ptr > lim || size > SIZE_MAX - GRANULE) return 0;
  uintptr_t pad = (0 - ptr) & (uintptr_t)(align - 1);
  uintptr_t room = lim - ptr;
  if (pad > room || granules(size) > room - pad) return 0;
  return ptr + pad;
}

/* The chunk of `a` that handed out byte `u`, with in *top the end of what it
 * handed out (the bump pointer in the current chunk); NULL if none did.
 * Only headers on `a`'s own lists are read; spares after `cur` hold nothing. */
static const ak_arena_chunk *chunk_holding(const ak_arena *a, uintptr_t u, uintptr_t *top) {
  for (const ak_arena_chunk *c = a->large; c; c = c->next) {
    if (u >= data_start(c) && u < c->end) {
      *top = c->end;
      return c;
    }
  }
  for (const ak_arena_chunk *c = a->chunks; c; c = c->next) {
    uintptr_t t = c == a->cur ? a->ptr : c->end;
    if (u >= data_start(c) && u < t) {
      *top = t;
      return c;
    }
    if (c == a->cur) break;
  }
  return NULL;
}

/* Checked and hardened builds: [p, p + size) must be a block `a` handed out
 * (size 0 counts as 1); otherwise the process ends naming `call`. */
static void check_block(const ak_arena *a, const void *p, size_t size, const char *call) {
  uintptr_t u = (uintptr_t)p, top;
  if (!chunk_holding(a, u, &top))
    bad_pointer(call, p,
                "pointer not allocated by this arena (stack, static, another allocator's or "
                "arena's memory, or freed by a clear or restore)");
  if ((size ? size : 1) > top - u)
    bad_pointer(call, p, "the block's size runs past what the arena handed out there");
}

/* Checked and hardened builds: `m` is a live mark of `a` (taken from `a`
 * after its last clear, not restored past); otherwise the process ends. Walks
 * the regular chunks up to `cur`, and the dedicated chunks and cleanups that
 * the restore releases and runs anyway. */
static void check_mark(const ak_arena *a, const ak_arena_mark *m) {
  static const char call[] = "ak_arena_restore";
  const void *at = (const void *)m->ptr;
  if (m->chunk) {
    const ak_arena_chunk *c = a->chunks;
    bool after_cur = false;
    for (; c && c != m->chunk; c = c->next) after_cur = after_cur || c == a->cur;
    if (!c) bad_pointer(call, at, "mark not taken from this arena (its chunk is not the arena's)");
    if (after_cur || !a->cur) bad_pointer(call, at, "stale mark (the arena was cleared or restored past it)");
    uintptr_t top = c == a->cur ? a->ptr : c->end;
    if (m->ptr < data_start(c) || m->ptr > top || (m->ptr & (GRANULE - 1)))
      bad_pointer(call, at, "stale or forged mark (its position is past the arena's or outside its chunk)");
  } else if (m->ptr || m->used_before) {
    bad_pointer(call, at, "forged mark (a position without a chunk)");
  }
  const ak_arena_chunk *l = a->large;
  while (l && l != m->large) l = l->next;
  if (l != m->large) bad_pointer(call, at, "mark not from this arena or stale (its dedicated chunk is gone)");
  const ak_arena_cleanup *k = a->cleanups;
  while (k && k != m->cleanups) k = k->next;
  if (k != m->cleanups)
    bad_pointer(call, at, "mark not from this arena or stale (its cleanup record is gone)");
  if (m->npieces > a->npieces) bad_pointer(call, at, "stale mark (more live pieces than the arena holds)");
}

void ak_arena_check_block(const ak_arena *a, const void *p, size_t size, const char *call) {
  if (!arena_check_pointers || !a || !p) return;
  check_block(a, p, size, call ? call : "ak_arena_check_block");
}

/* Invariant kept: a->ptr stays a multiple of the granule. */
static void *bump(ak_arena *a, size_t size, size_t align) {
  if (!a->cur) return NULL;
  uintptr_t p = place(a->ptr, real_limit(a), size, align);
  if (!p) return NULL;
  a->ptr = p + granules(size);
  return (void *)p;
}

/* Under Valgrind: remember the piece so restore can free it. The table is
 * debugging state, kept on the C heap so it shows in no arena counter. */
static int record_piece(ak_arena *a, void *p, size_t n) {
  if (a->npieces == a->cap_pieces) {
    size_t cap = a->cap_pieces ? a->cap_pieces * 2 : 1024;
    struct ak_arena_piece *np = realloc(a->pieces, cap * sizeof *np);
    if (!np) return -1;
    a->pieces = np;
    a->cap_pieces = cap;
  }
  a->pieces[a->npieces].p = p;
  a->pieces[a->npieces].n = n;
  a->npieces++;
  return 0;
}

static void *track_alloc(ak_arena *a, void *p, size_t n) {
  if (a->tracked & AK_TRACK_MODE_VALGRIND) {
    if (record_piece(a, p, n) != 0) {
      _ak_error(ENOMEM, "ak_arena_alloc: out of memory for the Valgrind piece table");
      return NULL;
    }
    AK_VG_ALLOC((void *)a->vg_pool, p, n);
  }
  AK_UNPOISON(p, n);
  return p;
}

static void free_pieces_after(ak_arena *a, size_t keep) {
  while (a->npieces > keep) {
    a->npieces--;
    AK_VG_FREE((void *)a->vg_pool, a->pieces[a->npieces].p);
  }
}

static void *alloc_large(ak_arena *a, size_t size, size_t align) {
  size_t pad = align > HDR ? align - 1 : 0;
  if (size > SIZE_MAX - pad - HDR - GRANULE) {
    _ak_error(ENOMEM, "ak_arena_alloc: %zu bytes at alignment %zu overflow", size, align);
    return NULL;
  }
  ak_arena_chunk *c = map_chunk(a, HDR + pad + granules(size));
  if (!c) {
    _ak_error(errno ? errno : ENOMEM, "ak_arena_alloc: the OS refused a %zu-byte chunk", HDR + pad + size);
    return NULL;
  }
  uintptr_t p = place(data_start(c), c->end, size, align);
  uintptr_t used = p + granules(size) - data_start(c);
  if (a->opts.max_bytes && used > budget_left(a)) {
    release_chunk(a, c);
    _ak_error(ENOMEM, "ak_arena_alloc: %zu bytes exceed the budget of %zu", size, a->opts.max_bytes);
    return NULL;
  }
  c->flags |= CHUNK_USED;
  c->next = a->large;
  a->large = c;
  a->used_before += used;
  refresh_limit(a); /* the budget ceiling of the current chunk moved */
  return (void *)p;
}

/* The end of what the budget lets an allocation starting at data_start(c)
 * reach in chunk `c` (the used bytes do not change when `c` is entered). */
static uintptr_t budget_end(const ak_arena *a, const ak_arena_chunk *c) {
  if (!a->opts.max_bytes) return c->end;
  size_t left = budget_left(a);
  return left < c->end - data_start(c) ? data_start(c) + left : c->end;
}

/* The least padding any fresh chunk needs before a block aligned to `align`:
 * chunks are page-aligned and data starts HDR bytes in, so an alignment up
 * to the page size always costs align - HDR, a larger one at least
 * page - HDR. Lets refill refuse a request the budget cannot take before
 * mapping anything. */
static size_t min_fresh_pad(size_t align) {
  size_t page = _ak_os_page_size();
  if (align <= HDR) return 0;
  return (align < page ? align : page) - HDR;
}

/* The reclaim policy on the spares after `cur` (emptied at `since`): the
 * data pages of one unused for the purge delay are decommitted, from the
 * first page boundary after the header to the end (the arena's chunks stay
 * mapped: the release step does not apply). The caller buffer is left
 * alone. */
static void purge_spares(ak_arena *a, uint64_t now) {
  size_t page = _ak_os_page_size();
  for (ak_arena_chunk *c = a->cur ? a->cur->next : a->chunks; c; c = c->next) {
    if (c->flags & (CHUNK_CALLER | CHUNK_PURGED) || _ak_reclaim_due(c->since, now, false) < 1) continue;
    uintptr_t from = (data_start(c) + page - 1) & ~(uintptr_t)(page - 1);
    if (c->end > from) (void)_ak_os_decommit((void *)from, c->end - from);
    c->flags |= CHUNK_PURGED;
  }
}

/* A regular chunk with room for `size` at `align` within the budget: the
 * first spare after `cur` that fits (moved to right after `cur`), else a
 * new mapping. NULL + errno when none: a new mapping that the budget cannot
 * use is unmapped again, so a failure leaves the arena as it was. */
static ak_arena_chunk *next_regular(ak_arena *a, size_t size, size_t align) {
  if (a->cur && a->cur->next) purge_spares(a, _ak_reclaim_now());
  ak_arena_chunk **link = a->cur ? &a->cur->next : &a->chunks;
  for (ak_arena_chunk **pp = link; *pp; pp = &(*pp)->next) {
    ak_arena_chunk *c = *pp;
    if (place(data_start(c), budget_end(a, c), size, align)) {
      *pp = c->next;
      c->next = *link;
      *link = c;
      return c;
    }
  }
  size_t need = HDR + granules(size) + (align > HDR ? align - 1 : 0); /* size <= max_chunk/4 */
  size_t want = a->next_chunk;
  if (a->opts.max_bytes) {
    size_t cap = _ak_os_round_page(HDR + budget_left(a) + (align > HDR ? align - 1 : 0));
    if (cap && cap < want) want = cap;
  }
  if (want < need) want = need;
  ak_arena_chunk *c = map_chunk(a, want);
  if (!c) {
    _ak_error(errno ? errno : ENOMEM, "ak_arena_alloc: the OS refused a new chunk");
    return NULL;
  }
  if (!place(data_start(c), budget_end(a, c), size, align)) {
    release_chunk(a, c);
    _ak_error(ENOMEM, "ak_arena_alloc: %zu bytes at alignment %zu exceed the budget of %zu", size, align,
              a->opts.max_bytes);
    return NULL;
  }
  if (a->next_chunk < a->opts.max_chunk && want >= a->next_chunk) {
    a->next_chunk = a->next_chunk > a->opts.max_chunk / 2 ? a->opts.max_chunk : a->next_chunk * 2;
  }
  c->next = *link;
  *link = c;
  return c;
}

static void *refill(ak_arena *a, size_t size, size_t align) {
  if (size > SIZE_MAX / 2 || align > SIZE_MAX / 2 - size) {
    _ak_error(ENOMEM, "ak_arena_alloc: %zu bytes at alignment %zu cannot be satisfied", size, align);
    return NULL;
  }
  /* Nothing is mapped for a request that no chunk could fit in the budget. */
  if (a->opts.max_bytes && granules(size) + min_fresh_pad(align) > budget_left(a)) {
    _ak_error(ENOMEM, "ak_arena_alloc: %zu bytes at alignment %zu exceed the budget (%zu of %zu left)", size,
              align, budget_left(a), a->opts.max_bytes);
    return NULL;
  }
  if (size + align - 1 > a->opts.max_chunk / 4) return alloc_large(a, size, align);
  ak_arena_chunk *c = next_regular(a, size, align);
  if (!c) return NULL;
  enter(a, c);
  return bump(a, size, align); /* next_regular checked that it fits */
}

void *ak_arena_alloc_slow(ak_arena *a, size_t size, size_t align) {
  if (!a) {
    _ak_error(EINVAL, "ak_arena_alloc: arena is NULL");
    return NULL;
  }
  if (align == 0 || (align & (align - 1)) != 0) {
    _ak_error(EINVAL, "ak_arena_alloc: alignment %zu is not a power of two", align);
    return NULL;
  }
  if (AK_UNLIKELY(a->next_chunk == 0)) ak_arena_init(a, NULL); /* zero-filled: defaults */
  size_t n = size ? size : 1;                                  /* size 0 still gets a unique pointer */
  void *p = bump(a, n, align);
  if (!p) p = refill(a, n, align);
  if (!p) return NULL;
  if (a->tracked && !track_alloc(a, p, n)) return NULL;
  a->requested += size;
  return p;
}

static void run_cleanups(ak_arena *a, ak_arena_cleanup *stop) {
  while (a->cleanups && a->cleanups != stop) {
    ak_arena_cleanup *c = a->cleanups;
    a->cleanups = c->next; /* unlink first: fn may not re-run on error */
    c->fn(c->arg);
  }
}

static void release_large_until(ak_arena *a, ak_arena_chunk *stop) {
  while (a->large && a->large != stop) {
    ak_arena_chunk *c = a->large;
    a->large = c->next;
    release_chunk(a, c);
  }
}

static void poison_from(ak_arena *a, ak_arena_chunk *c, uintptr_t from) {
  if (!a->tracked) return;
  for (; c; c = c->next, from = 0) {
    uintptr_t s = from ? from : data_start(c);
    AK_TRACK_RELEASE((void *)s, c->end - s);
  }
}

int ak_arena_init(ak_arena *a, const ak_arena_options *opts) {
  if (!a) {
    _ak_error(EINVAL, "ak_arena_init: arena is NULL");
    return EINVAL;
  }
  ak_arena_options o;
  if (opts) {
    o = *opts;
  } else {
    memset(&o, 0, sizeof o);
  }
  if (o.retain != AK_ARENA_RETAIN_USED && o.retain != AK_ARENA_RETAIN_LIMIT &&
      o.retain != AK_ARENA_RETAIN_NONE) {
    _ak_error(EINVAL, "ak_arena_init: unknown retain mode %d", (int)o.retain);
    return EINVAL;
  }
  if ((o.buffer == NULL) != (o.buffer_size == 0) || (o.buffer && o.buffer_size < AK_ARENA_MIN_BUFFER)) {
    _ak_error(EINVAL, "ak_arena_init: buffer %p of %zu bytes (need both, and at least %d bytes)", o.buffer,
              o.buffer_size, AK_ARENA_MIN_BUFFER);
    return EINVAL;
  }
  size_t first = o.first_chunk ? o.first_chunk : AK_ARENA_DEFAULT_FIRST_CHUNK;
  size_t maxc = o.max_chunk ? o.max_chunk : AK_ARENA_DEFAULT_MAX_CHUNK;
  if (!o.max_chunk && maxc < first) maxc = first;
  first = _ak_os_round_page(first < 2 * HDR ? 2 * HDR : first);
  maxc = _ak_os_round_page(maxc);
  if (first == 0 || maxc == 0 || maxc < first || maxc > SIZE_MAX / 4) {
    _ak_error(EINVAL, "ak_arena_init: chunk sizes first=%zu max=%zu are inconsistent", o.first_chunk,
              o.max_chunk);
    return EINVAL;
  }
  o.first_chunk = first;
  o.max_chunk = maxc;
  memset(a, 0, sizeof *a);
  a->opts = o;
  a->next_chunk = first;
  a->tracked = _ak_track_mode();
  if (a->tracked & AK_TRACK_MODE_VALGRIND) {
    a->vg_pool = (uintptr_t)_ak_track_new_pool_id();
    AK_VG_CREATE_POOL((void *)a->vg_pool);
  }
  if (o.buffer) {
    uintptr_t b = ((uintptr_t)o.buffer + 15) & ~(uintptr_t)15;
    ak_arena_chunk *c = (ak_arena_chunk *)b;
    c->next = NULL;
    c->size = 0;
    c->end = (uintptr_t)o.buffer + o.buffer_size;
    c->flags = CHUNK_CALLER;
    a->chunks = c;
    if (a->tracked) AK_TRACK_RELEASE((void *)data_start(c), c->end - data_start(c));
    enter(a, c);
  }
  return 0;
}

void ak_arena_clear(ak_arena *a) {
  if (!a) return;
  run_cleanups(a, NULL);
  if (a->tracked & AK_TRACK_MODE_VALGRIND) {
    AK_VG_TRIM((void *)a->vg_pool, NULL, 0);
    a->npieces = 0;
  }
  release_large_until(a, NULL);
  size_t kept = 0;
  uint64_t now = _ak_reclaim_now();
  ak_arena_chunk **pp = &a->chunks;
  while (*pp) {
    ak_arena_chunk *c = *pp;
    bool keep;
    switch (a->opts.retain) {
      case AK_ARENA_RETAIN_NONE: keep = false; break;
      case AK_ARENA_RETAIN_LIMIT:
        keep = (c->flags & CHUNK_USED) && kept + c->size <= a->opts.retain_limit;
        break;
      default: keep = (c->flags & CHUNK_USED) != 0; break;
    }
    if (keep || (c->flags & CHUNK_CALLER)) {
      kept += c->size;
      if (c->flags & CHUNK_USED) c->since = now; /* emptied now; an unused spare keeps its age */
      c->flags &= ~(unsigned)CHUNK_USED;
      pp = &c->next;
    } else {
      *pp = c->next;
      release_chunk(a, c);
    }
  }
  poison_from(a, a->chunks, 0);
  a->cur = NULL;
  a->used_before = 0;
  a->requested = 0;
  if (a->chunks) {
    enter(a, a->chunks);
    purge_spares(a, now);
  } else {
    refresh_limit(a);
  }
}

void ak_arena_destroy(ak_arena *a) {
  if (!a) return;
  run_cleanups(a, NULL);
  release_large_until(a, NULL);
  while (a->chunks) {
    ak_arena_chunk *c = a->chunks;
    a->chunks = c->next;
    release_chunk(a, c);
  }
  free(a->pieces);
  if (a->tracked & AK_TRACK_MODE_VALGRIND) AK_VG_DESTROY_POOL((void *)a->vg_pool);
  /* The caller buffer goes back to the caller usable again. */
  if (a->opts.buffer) AK_TRACK_INTERNAL(a->opts.buffer, a->opts.buffer_size);
  memset(a, 0, sizeof *a);
}

ak_arena_mark ak_arena_save(const ak_arena *a) {
  ak_arena_mark m;
  memset(&m, 0, sizeof m);
  if (!a) return m;
  m.chunk = a->cur;
  m.ptr = a->ptr;
  m.requested = a->requested;
  m.used_before = a->used_before;
  m.large = a->large;
  m.cleanups = a->cleanups;
  m.npieces = a->npieces;
  return m;
}

void ak_arena_restore(ak_arena *a, ak_arena_mark m) {
  if (!a) return;
  if (arena_check_pointers) check_mark(a, &m);
  run_cleanups(a, m.cleanups);
  if (a->tracked & AK_TRACK_MODE_VALGRIND) free_pieces_after(a, m.npieces);
  release_large_until(a, m.large);
  if (a->cur) { /* the chunks entered after the mark's are spares again, emptied now */
    uint64_t now = _ak_reclaim_now();
    for (ak_arena_chunk *c = m.chunk ? m.chunk->next : a->chunks; c && c != a->cur->next; c = c->next)
      c->since = now;
  }
  if (m.chunk) {
    poison_from(a, m.chunk->next, 0);
    if (a->tracked) AK_TRACK_RELEASE((void *)m.ptr, m.chunk->end - m.ptr);
    a->cur = m.chunk;
    a->ptr = m.ptr;
  } else {
    poison_from(a, a->chunks, 0);
    a->cur = NULL;
  }
  a->used_before = m.used_before;
  a->requested = m.requested;
  refresh_limit(a);
}

int ak_arena_defer(ak_arena *a, void (*fn)(void *), void *arg) {
  if (!a || !fn) {
    _ak_error(EINVAL, "ak_arena_defer: %s is NULL", a ? "function" : "arena");
    return EINVAL;
  }
  ak_arena_cleanup *c = ak_arena_alloc(a, sizeof *c, _Alignof(ak_arena_cleanup));
  if (!c) return errno;
  c->fn = fn;
  c->arg = arg;
  c->next = a->cleanups;
  a->cleanups = c;
  return 0;
}

void *ak_arena_zalloc(ak_arena *a, size_t size, size_t align) {
  if (!a) {
    _ak_error(EINVAL, "ak_arena_zalloc: arena is NULL");
    return NULL;
  }
  void *p = ak_arena_alloc(a, size, align);
  if (p) memset(p, 0, size);
  return p;
}

void *ak_arena_alloc_array(ak_arena *a, size_t count, size_t size, size_t align, int zero) {
  if (!a) {
    _ak_error(EINVAL, "ak_arena_alloc_array: arena is NULL");
    return NULL;
  }
  if (size && count > SIZE_MAX / size) {
    _ak_error(ENOMEM, "ak_arena_alloc_array: %zu * %zu bytes overflows", count, size);
    return NULL;
  }
  void *p = ak_arena_alloc(a, count * size, align);
  if (p && zero) memset(p, 0, count * size);
  return p;
}

char *ak_arena_strndup(ak_arena *a, const char *s, size_t n) {
  if (!a || !s) {
    _ak_error(EINVAL, "ak_arena_strndup: %s is NULL", a ? "string" : "arena");
    return NULL;
  }
  size_t len = strnlen(s, n);
  char *d = ak_arena_alloc(a, len + 1, 1);
  if (!d) return NULL;
  memcpy(d, s, len);
  d[len] = '\0';
  return d;
}

char *ak_arena_strdup(ak_arena *a, const char *s) {
  if (!a || !s) {
    _ak_error(EINVAL, "ak_arena_strdup: %s is NULL", a ? "string" : "arena");
    return NULL;
  }
  return ak_arena_strndup(a, s, SIZE_MAX);
}

void *ak_arena_realloc(ak_arena *a, void *p, size_t old_size, size_t new_size, size_t align) {
  if (!a) {
    _ak_error(EINVAL, "ak_arena_realloc: arena is NULL");
    return NULL;
  }
  if (!p) return ak_arena_alloc(a, new_size, align);
  if (align == 0 || (align & (align - 1)) != 0) {
    _ak_error(EINVAL, "ak_arena_realloc: alignment %zu is not a power of two", align);
    return NULL;
  }
  uintptr_t up = (uintptr_t)p;
  size_t old_n = old_size ? old_size : 1, new_n = new_size ? new_size : 1;
  /* In place when p is the newest allocation of the current chunk. */
  if (a->cur && old_n <= SIZE_MAX / 2 && new_n <= SIZE_MAX / 2 && up + granules(old_n) == a->ptr &&
      (up & (align - 1)) == 0 && up >= data_start(a->cur) && granules(new_n) <= real_limit(a) - up) {
    a->ptr = up + granules(new_n);
    a->requested = a->requested - old_size + new_size;
    if (a->tracked) {
      if (new_n > old_n)
        AK_TRACK_ACQUIRE((void *)(up + old_n), new_n - old_n);
      else
        AK_TRACK_RELEASE((void *)(up + new_n), old_n - new_n);
      if ((a->tracked & AK_TRACK_MODE_VALGRIND) && a->npieces && a->pieces[a->npieces - 1].p == p) {
        a->pieces[a->npieces - 1].n = new_n;
        AK_VG_CHANGE((void *)a->vg_pool, p, new_n);
      }
    }
    return p;
  }
  if (arena_check_pointers) check_block(a, p, old_size, "ak_arena_realloc");
  void *q = ak_arena_alloc(a, new_size, align);
  if (q) memcpy(q, p, old_size < new_size ? old_size : new_size);
  return q;
}

bool ak_arena_owns(const ak_arena *a, const void *p) {
  uintptr_t top;
  return a && p && chunk_holding(a, (uintptr_t)p, &top) != NULL;
}

void ak_arena_stats_get(const ak_arena *a, ak_arena_stats *out) {
  if (!out) return;
  memset(out, 0, sizeof *out);
  if (!a) return;
  out->requested = a->requested;
  out->used = used_total(a);
  out->reserved = a->reserved;
  out->peak_reserved = a->peak_reserved;
  out->chunks = a->nchunks;
}
