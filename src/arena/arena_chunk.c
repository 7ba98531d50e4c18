/* SPDX-License-Identifier: MIT */
/* arena_chunk.c - the region arena's chunks: mapping and releasing them,
 * entering one, the limit the budget allows, the refill of the slow path
 * (a dedicated chunk, or a regular one: a spare that fits or a new one,
 * sizes doubling up to max_chunk) and the reclaim policy on spare chunks.
 *
 * Retained chunks follow the reclaim policy (common/reclaim.h) as far as
 * the arena's contract allows: they stay mapped (the retain policy says
 * which are kept), but a spare left unused for the purge delay has its data
 * pages decommitted (on the slow path that looks for a chunk, and at
 * clear), so a cleared arena does not hold its peak committed forever. A
 * purged spare is reused as it is: its pages read as zero and fault in as
 * they are written. The arena is not thread-safe, so only its own calls
 * run the policy (no background thread). */
#include <errno.h>

#include "arena/arena_internal.h"
#include "common/error.h"
#include "common/reclaim.h"
#include "common/track.h"
#include "os/os_mem.h"

/* The limit for the current chunk: its end, or lower if the budget says so. */
void _ak_arena_refresh_limit(ak_arena *a) {
  if (!a->cur) {
    a->ptr = 0;
    set_limit(a, 0);
    return;
  }
  uintptr_t lim = a->cur->end;
  AK_ASSERT(data_start(a->cur) <= a->ptr && a->ptr <= lim); /* ptr inside the current chunk */
  if (a->opts.max_bytes) {
    size_t left = budget_left(a);
    if (left < lim - a->ptr) lim = a->ptr + left;
  }
  set_limit(a, lim);
  assert_bump(a);
}

static void account_map(ak_arena *a, size_t size) {
  a->reserved += size;
  a->nchunks++;
  if (a->reserved > a->peak_reserved) a->peak_reserved = a->reserved;
}

void _ak_arena_release_chunk(ak_arena *a, ak_arena_chunk *c) {
  _ak_arena_prof_drop(c, 0);
  if (c->flags & AK_CHUNK_CALLER) return;
  AK_ASSERT(a->nchunks > 0 && a->reserved >= c->size); /* counted when mapped */
  a->reserved -= c->size;
  a->nchunks--;
  /* The kernel may hand the range out again: leave no poison behind. */
  if (annotated(a)) AK_TRACK_INTERNAL((void *)c, c->size);
  _ak_arena_cache_put(c, c->size);
}

static ak_arena_chunk *map_chunk(ak_arena *a, size_t size) {
  size = _ak_os_round_page(size);
  size_t got = 0;
  ak_arena_chunk *c = _ak_arena_cache_take(size, &got); /* another arena's, pages committed */
  if (c) {
    size = got;
  } else {
    c = _ak_os_alloc(size, 1);
    if (!c) return NULL;
  }
  c->next = NULL;
  c->size = size;
  c->end = (uintptr_t)c + size;
  c->flags = 0;
  c->since = 0;
  c->prof_end = 0;
  c->prof_sampled = 0;
  AK_ASSERT(data_start(c) < c->end); /* room for data after the header */
  account_map(a, size);
  if (annotated(a)) AK_TRACK_RELEASE((void *)data_start(c), c->end - data_start(c));
  return c;
}

/* Makes `c` the current chunk; the bytes used in the old one are banked. */
void _ak_arena_enter(ak_arena *a, ak_arena_chunk *c) {
  AK_ASSERT(c != NULL && data_start(c) < c->end);
  if (a->cur) a->used_before += (size_t)(a->ptr - data_start(a->cur));
  a->cur = c;
  c->flags = (c->flags | AK_CHUNK_USED) & ~(unsigned)AK_CHUNK_PURGED;
  a->ptr = data_start(c);
  _ak_arena_refresh_limit(a);
}

static void *alloc_large(ak_arena *a, size_t size, size_t align) {
  size_t pad = align > AK_CHUNK_HDR ? align - 1 : 0;
  if (size > SIZE_MAX - pad - AK_CHUNK_HDR - AK_GRANULE) {
    _ak_error(ENOMEM, "ak_arena_alloc: %zu bytes at alignment %zu overflow", size, align);
    return NULL;
  }
  ak_arena_chunk *c = map_chunk(a, AK_CHUNK_HDR + pad + granules(size));
  if (!c) {
    _ak_error(errno ? errno : ENOMEM, "ak_arena_alloc: the OS refused a %zu-byte chunk",
              AK_CHUNK_HDR + pad + size);
    return NULL;
  }
  uintptr_t p = place(data_start(c), c->end, size, align);
  AK_ASSERT(p != 0 && p + granules(size) <= c->end); /* mapped with room for the padding */
  uintptr_t used = p + granules(size) - data_start(c);
  if (a->opts.max_bytes && used > budget_left(a)) {
    _ak_arena_release_chunk(a, c);
    _ak_error(ENOMEM, "ak_arena_alloc: %zu bytes exceed the budget of %zu", size, a->opts.max_bytes);
    return NULL;
  }
  c->flags |= AK_CHUNK_USED;
  c->next = a->large;
  a->large = c;
  a->used_before += used;
  _ak_arena_refresh_limit(a); /* the budget ceiling of the current chunk moved */
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
 * chunks are page-aligned and data starts AK_CHUNK_HDR bytes in, so an alignment up
 * to the page size always costs align - AK_CHUNK_HDR, a larger one at least
 * page - AK_CHUNK_HDR. Lets refill refuse a request the budget cannot take before
 * mapping anything. */
static size_t min_fresh_pad(size_t align) {
  size_t page = _ak_os_page_size();
  if (align <= AK_CHUNK_HDR) return 0;
  return (align < page ? align : page) - AK_CHUNK_HDR;
}

/* The reclaim policy on the spares after `cur` (emptied at `since`): the
 * data pages of one unused for the purge delay are decommitted, from the
 * first page boundary after the header to the end (the arena's chunks stay
 * mapped: the release step does not apply). The caller buffer is left
 * alone. */
void _ak_arena_purge_spares(ak_arena *a, uint64_t now) {
  size_t page = _ak_os_page_size();
  for (ak_arena_chunk *c = a->cur ? a->cur->next : a->chunks; c; c = c->next) {
    AK_ASSERT(c != a->cur); /* spares only: the chunks after cur */
    if (c->flags & (AK_CHUNK_CALLER | AK_CHUNK_PURGED) || _ak_reclaim_due(c->since, now, false) < 1) continue;
    uintptr_t from = (data_start(c) + page - 1) & ~(uintptr_t)(page - 1);
    if (c->end > from) (void)_ak_os_decommit((void *)from, c->end - from);
    c->flags |= AK_CHUNK_PURGED;
  }
}

/* A regular chunk with room for `size` at `align` within the budget: the
 * first spare after `cur` that fits (moved to right after `cur`), else a
 * new mapping. NULL + errno when none: a new mapping that the budget cannot
 * use is unmapped again, so a failure leaves the arena as it was. */
static ak_arena_chunk *next_regular(ak_arena *a, size_t size, size_t align) {
  if (a->cur && a->cur->next) _ak_arena_purge_spares(a, _ak_reclaim_now());
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
  size_t need =
      AK_CHUNK_HDR + granules(size) + (align > AK_CHUNK_HDR ? align - 1 : 0); /* size <= max_chunk/4 */
  size_t want = a->next_chunk;
  if (a->opts.max_bytes) {
    size_t cap = _ak_os_round_page(AK_CHUNK_HDR + budget_left(a) + (align > AK_CHUNK_HDR ? align - 1 : 0));
    if (cap && cap < want) want = cap;
  }
  if (want < need) want = need;
  ak_arena_chunk *c = map_chunk(a, want);
  /* Degrade, not give up: the doubled size may exceed what the system
   * grants (an address-space limit, overcommit) while the request fits a
   * smaller chunk; the growth step stays for the next refill. */
  if (!c && want > need) {
    want = need; /* not a growth step: next_chunk stays */
    c = map_chunk(a, want);
  }
  if (!c) {
    _ak_error(errno ? errno : ENOMEM, "ak_arena_alloc: the OS refused a new chunk of %zu bytes", need);
    return NULL;
  }
  if (!place(data_start(c), budget_end(a, c), size, align)) {
    _ak_arena_release_chunk(a, c);
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

/* The growth step (next_chunk) doubles with each chunk a cycle maps, so a
 * cycle that grows needs log2(size / first_chunk) mappings, not one per
 * first_chunk bytes. It is not kept across cycles: a clear restarts it from
 * the regular-chunk bytes the cycle that ends went through (the chunks
 * before cur whole, cur up to ptr; dedicated chunks are not growth), so
 * the chunk a later cycle maps when its requests do not fit the kept ones
 * is sized by the last cycle's use, not by every growth step the arena
 * ever took. Without the restart, an arena that clears a few MiB each
 * cycle maps ever larger chunks (each overflow doubles the step, up to
 * max_chunk) and keeps them: its reserved and resident memory grow with
 * the number of cycles, not with their size. */
void _ak_arena_growth_restart(ak_arena *a) {
  size_t went = 0;
  for (ak_arena_chunk *c = a->cur ? a->chunks : NULL; c; c = c->next) {
    if (c == a->cur) {
      went += (size_t)(a->ptr - data_start(c));
      break;
    }
    went += (size_t)(c->end - data_start(c));
  }
  size_t cap = a->opts.max_chunk;
  size_t want = went < cap - AK_CHUNK_HDR ? _ak_os_round_page(AK_CHUNK_HDR + went) : cap;
  if (want > cap) want = cap;
  a->next_chunk = want > a->opts.first_chunk ? want : a->opts.first_chunk;
}

void *_ak_arena_refill(ak_arena *a, size_t size, size_t align) {
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
  _ak_arena_enter(a, c);
  void *p = bump(a, size, align);
  AK_ASSERT(p != NULL); /* next_regular checked that it fits */
  return p;
}
