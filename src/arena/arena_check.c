/* SPDX-License-Identifier: MIT */
/* arena_check.c - pointers and marks handed back to the arena (checked and
 * hardened builds), ak_arena_owns, and the checked build's walk of the
 * chunk counts.
 *
 * ak_arena_realloc's block, ak_arena_restore's mark and the C++ layer's
 * deallocate come back from the caller. These builds validate them against
 * the arena's chunk lists before anything is read through them (only list
 * nodes the arena owns are dereferenced) and end the process with one
 * message naming the call, the pointer and the reason. */
#include "arena/arena_internal.h"
#include "common/error.h"

static _Noreturn AK_COLD void bad_pointer(const char *call, const void *p, const char *why) {
  _ak_fatal("%s(%p): %s", call, p, why);
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
void _ak_arena_check_mark(const ak_arena *a, const ak_arena_mark *m) {
  static const char call[] = "ak_arena_restore";
  const void *at = (const void *)m->ptr;
  if (m->chunk) {
    const ak_arena_chunk *c = a->chunks;
    bool after_cur = false;
    for (; c && c != m->chunk; c = c->next) after_cur = after_cur || c == a->cur;
    if (!c) bad_pointer(call, at, "mark not taken from this arena (its chunk is not the arena's)");
    if (after_cur || !a->cur) bad_pointer(call, at, "stale mark (the arena was cleared or restored past it)");
    uintptr_t top = c == a->cur ? a->ptr : c->end;
    if (m->ptr < data_start(c) || m->ptr > top || (m->ptr & (AK_GRANULE - 1)))
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

bool ak_arena_owns(const ak_arena *a, const void *p) {
  uintptr_t top;
  return a && p && chunk_holding(a, (uintptr_t)p, &top) != NULL;
}

void _ak_arena_check_counts(const ak_arena *a) {
  if (!AK_CHECKED) return;
  size_t bytes = 0, n = 0;
  bool cur_seen = a->cur == NULL;
  for (const ak_arena_chunk *c = a->chunks; c; c = c->next) {
    cur_seen = cur_seen || c == a->cur;
    _ak_arena_prof_check(c);
    if (c->flags & AK_CHUNK_CALLER) continue;
    AK_ASSERT(data_start(c) < c->end && c->end - (uintptr_t)c == c->size); /* chunk bounds */
    bytes += c->size;
    n++;
  }
  for (const ak_arena_chunk *c = a->large; c; c = c->next) {
    AK_ASSERT(!(c->flags & AK_CHUNK_CALLER) && c->end - (uintptr_t)c == c->size);
    _ak_arena_prof_check(c);
    bytes += c->size;
    n++;
  }
  AK_ASSERT(cur_seen);
  AK_ASSERT(bytes == a->reserved && n == a->nchunks);
  AK_ASSERT(a->reserved <= a->peak_reserved);
}
