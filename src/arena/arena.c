/* SPDX-License-Identifier: MIT */
/* arena.c - the region arena's API (component layer over the base layer):
 * init, the slow path of ak_arena_alloc, clear, restore, cleanups, the
 * tool annotations (ASan, Valgrind), realloc and stats. Chunks are
 * arena_chunk.c's, the checks of pointers and marks arena_check.c's
 * (arena_internal.h has the layout and the invariants; docs/design.md the
 * call tree). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "arena/arena_internal.h"
#include "common/error.h"
#include "common/reclaim.h"
#include "common/track.h"
#include "os/os_mem.h"

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
  bool sample = _ak_arena_prof_due(a, n);
  void *p = bump(a, n, align);
  if (!p) p = _ak_arena_refill(a, n, align);
  if (p) {
    AK_ASSERT(((uintptr_t)p & (align - 1)) == 0 && ((uintptr_t)p & (AK_GRANULE - 1)) == 0);
    AK_ASSERT(!a->opts.max_bytes || used_total(a) <= a->opts.max_bytes); /* the budget holds */
    if (annotated(a) && !track_alloc(a, p, n)) p = NULL;
  }
  if (p) {
    a->requested += size;
    if (AK_UNLIKELY(sample)) _ak_arena_prof_sampled(a, p, n);
  }
  _ak_arena_prof_arm(a);
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
    _ak_arena_release_chunk(a, c);
  }
}

static void poison_from(ak_arena *a, ak_arena_chunk *c, uintptr_t from) {
  if (!annotated(a)) return;
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
  first = _ak_os_round_page(first < 2 * AK_CHUNK_HDR ? 2 * AK_CHUNK_HDR : first);
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
    c->flags = AK_CHUNK_CALLER;
    c->since = 0;
    c->prof_end = 0;
    c->prof_sampled = 0;
    AK_ASSERT(data_start(c) + AK_GRANULE <= c->end); /* AK_ARENA_MIN_BUFFER leaves room for data */
    a->chunks = c;
    if (annotated(a)) AK_TRACK_RELEASE((void *)data_start(c), c->end - data_start(c));
    _ak_arena_enter(a, c);
  }
  _ak_arena_prof_arm(a);
  return 0;
}

void ak_arena_clear(ak_arena *a) {
  if (!a) return;
  run_cleanups(a, NULL);
  if (a->tracked & AK_TRACK_MODE_VALGRIND) {
    AK_VG_TRIM((void *)a->vg_pool, NULL, 0);
    a->npieces = 0;
  }
  _ak_arena_growth_restart(a); /* from the chunks this cycle went through, before they are reset */
  release_large_until(a, NULL);
  AK_ASSERT(a->large == NULL && a->cleanups == NULL);
  size_t kept = 0;
  uint64_t now = _ak_reclaim_now();
  ak_arena_chunk **pp = &a->chunks;
  while (*pp) {
    ak_arena_chunk *c = *pp;
    bool keep;
    switch (a->opts.retain) {
      case AK_ARENA_RETAIN_NONE: keep = false; break;
      case AK_ARENA_RETAIN_LIMIT:
        keep = (c->flags & AK_CHUNK_USED) && kept + c->size <= a->opts.retain_limit;
        break;
      default: keep = (c->flags & AK_CHUNK_USED) != 0; break;
    }
    if (keep || (c->flags & AK_CHUNK_CALLER)) {
      _ak_arena_prof_drop(c, 0);
      kept += c->size;
      if (c->flags & AK_CHUNK_USED) c->since = now; /* emptied now; an unused spare keeps its age */
      c->flags &= ~(unsigned)AK_CHUNK_USED;
      pp = &c->next;
    } else {
      *pp = c->next;
      _ak_arena_release_chunk(a, c);
    }
  }
  AK_ASSERT(a->opts.retain != AK_ARENA_RETAIN_LIMIT || kept <= a->opts.retain_limit);
  poison_from(a, a->chunks, 0);
  a->cur = NULL;
  a->used_before = 0;
  a->requested = 0;
  if (a->chunks) {
    _ak_arena_enter(a, a->chunks);
    _ak_arena_purge_spares(a, now);
  } else {
    _ak_arena_refresh_limit(a);
  }
  _ak_arena_prof_arm(a);
  AK_ASSERT(used_total(a) == 0);
  _ak_arena_check_counts(a);
  _ak_reclaim_start_wanted(); /* released chunks wait in the cache */
}

void ak_arena_destroy(ak_arena *a) {
  if (!a) return;
  run_cleanups(a, NULL);
  release_large_until(a, NULL);
  while (a->chunks) {
    ak_arena_chunk *c = a->chunks;
    a->chunks = c->next;
    _ak_arena_release_chunk(a, c);
  }
  AK_ASSERT(a->reserved == 0 && a->nchunks == 0); /* every chunk unmapped */
  free(a->pieces);
  if (a->tracked & AK_TRACK_MODE_VALGRIND) AK_VG_DESTROY_POOL((void *)a->vg_pool);
  /* The caller buffer goes back to the caller usable again. */
  if (a->opts.buffer) AK_TRACK_INTERNAL(a->opts.buffer, a->opts.buffer_size);
  memset(a, 0, sizeof *a);
  _ak_reclaim_start_wanted(); /* the chunk cache's purge, for a program that goes idle */
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
  AK_ASSERT(m.chunk ? data_start(m.chunk) <= m.ptr && m.ptr <= m.chunk->end : m.ptr == 0);
  return m;
}

void ak_arena_restore(ak_arena *a, ak_arena_mark m) {
  if (!a) return;
  if (arena_check_pointers) _ak_arena_check_mark(a, &m);
  /* Past the check (the checked build always checks): a live mark. */
  AK_ASSERT(m.chunk ? (m.ptr & (AK_GRANULE - 1)) == 0 && m.ptr >= data_start(m.chunk) : m.ptr == 0);
  run_cleanups(a, m.cleanups);
  if (a->tracked & AK_TRACK_MODE_VALGRIND) free_pieces_after(a, m.npieces);
  release_large_until(a, m.large);
  if (a->cur) { /* the chunks entered after the mark's are spares again, emptied now */
    uint64_t now = _ak_reclaim_now();
    for (ak_arena_chunk *c = m.chunk ? m.chunk->next : a->chunks; c && c != a->cur->next; c = c->next) {
      c->since = now;
      _ak_arena_prof_drop(c, 0);
    }
  }
  if (m.chunk) {
    _ak_arena_prof_drop(m.chunk, m.ptr);
    poison_from(a, m.chunk->next, 0);
    if (annotated(a)) AK_TRACK_RELEASE((void *)m.ptr, m.chunk->end - m.ptr);
    a->cur = m.chunk;
    a->ptr = m.ptr;
  } else {
    poison_from(a, a->chunks, 0);
    a->cur = NULL;
  }
  a->used_before = m.used_before;
  a->requested = m.requested;
  _ak_arena_refresh_limit(a);
  _ak_arena_prof_arm(a);
  _ak_arena_check_counts(a);
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
    AK_ASSERT(a->ptr <= real_limit(a)); /* the bump limit: chunk end or budget */
    a->requested = a->requested - old_size + new_size;
    if (annotated(a)) {
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
  ak_arena_check_block(a, p, old_size, "ak_arena_realloc"); /* checked and hardened builds */
  void *q = ak_arena_alloc(a, new_size, align);
  if (q) memcpy(q, p, old_size < new_size ? old_size : new_size);
  return q;
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
