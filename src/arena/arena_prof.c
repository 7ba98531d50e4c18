/* SPDX-License-Identifier: MIT */
/* arena_prof.c - the region arena's side of the heap profiler (src/prof):
 * sampling its allocations by bytes, labelled with the arena's name, and
 * forgetting the sampled blocks when a clear, restore or destroy frees
 * them.
 *
 * The fast path (ak_arena_alloc) is inline in the program and counts
 * nothing: while the profiler is on, the arena's `limit` is its countdown.
 * The arena draws a countdown of its own (_ak_prof_countdown: bytes until
 * its next sample) and notes where it ends in the current chunk
 * (`prof_end`); `limit` is lowered to that address, so the fast path
 * never crosses it, and the allocation that would is the slow path's,
 * which samples it and draws the next countdown. A countdown is redrawn
 * whenever the arena enters another chunk, clears or restores (the
 * exponential distribution is memoryless: no bias). The real limit is in
 * `real_limit` meanwhile (AK_ARENA_PROF in `tracked`). While the profiler
 * is off the slow path pays a test of that bit and of the generation word,
 * the fast path nothing; an arena notices a start or a stop at its next
 * slow path, clear or restore.
 *
 * A chunk notes that it holds sampled blocks (`prof_sampled`); a clear,
 * a restore and a destroy forget the kept blocks of the address range
 * they free (_ak_prof_forget_range, one pass over the profiler's live set
 * per such chunk), so nothing is kept in the arena's own memory and its
 * budget and counts are the same with the profiler on. Invariant: every
 * kept block of an arena lies in a chunk whose `prof_sampled` is set. */
#include "arena/arena_internal.h"
#include "prof/prof.h"

bool _ak_arena_prof_due(ak_arena *a, size_t n) {
  if (!(a->tracked & AK_ARENA_PROF) || !a->cur) return false;
  uintptr_t end = a->cur->prof_end;
  if (end < a->ptr) return false; /* none drawn, or passed by an in-place realloc: the arm draws */
  if (n <= end - a->ptr) return false;
  a->cur->prof_end = 0; /* crossed: the arm draws the next */
  return true;
}

void _ak_arena_prof_sampled(ak_arena *a, void *p, size_t n) {
  if (!_ak_prof_record(p, n, "arena", a->opts.name ? a->opts.name : "unnamed")) return;
  uintptr_t b = (uintptr_t)p;
  ak_arena_chunk *c = a->cur && b >= data_start(a->cur) && b < a->cur->end ? a->cur : a->large;
  AK_ASSERT(c && b >= data_start(c) &&
            b < c->end); /* the block lies in the current or the newest dedicated chunk */
  c->prof_sampled = 1;
}

void _ak_arena_prof_arm(ak_arena *a) {
  bool on = _ak_prof_is_on();
  if (!on && !(a->tracked & AK_ARENA_PROF)) return;
  if (!(a->tracked & AK_ARENA_PROF)) { /* the real limit moves to real_limit */
    if (!a->tracked) a->real_limit = a->limit;
    a->tracked |= AK_ARENA_PROF;
  }
  uintptr_t lim = a->real_limit;
  if (!on) {
    a->tracked &= ~AK_ARENA_PROF;
    if (!a->tracked) a->limit = lim;
    if (a->cur) a->cur->prof_end = 0;
    return;
  }
  if (!a->cur) return; /* no chunk yet: the first one's slow path draws */
  ak_arena_chunk *c = a->cur;
  if (c->prof_end < a->ptr) { /* none drawn in this chunk, or crossed: draw */
    int64_t left = _ak_prof_countdown();
    uintptr_t room = UINTPTR_MAX - a->ptr;
    c->prof_end = left >= 0 && (uint64_t)left < room ? a->ptr + (uintptr_t)left : UINTPTR_MAX;
  }
  if (!annotated(a)) a->limit = c->prof_end < lim ? c->prof_end : lim; /* annotated: 0, every call is slow */
  AK_ASSERT(annotated(a) || (a->ptr <= a->limit && a->limit <= lim));  /* inside the real limit */
}

void _ak_arena_prof_drop(ak_arena_chunk *c, uintptr_t from) {
  if (c->prof_sampled) {
    (void)_ak_prof_forget_range(from > data_start(c) ? from : data_start(c), c->end);
    if (from <= data_start(c)) c->prof_sampled = 0; /* a partial drop may leave blocks below `from` */
  }
  c->prof_end = 0;
}
