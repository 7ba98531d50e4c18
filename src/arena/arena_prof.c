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
 * Sampled blocks are recorded in their chunk, so a whole-chunk operation
 * finds them: the first in the header's `prof_one`, later ones in 16-byte
 * nodes bumped right after the block (the node counts in `used`; a block
 * whose node does not fit is counted as allocated, not kept). Invariant:
 * every block in a chunk's records is live in the profiler's live set and
 * lies in the chunk at or above its data start; the list is in decreasing
 * address order (bump order, newest first), and a node lies after its
 * block, so a restore frees a node exactly when it frees its block. */
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

/* The chunk holding `p`: the current one, or the newest dedicated one. */
static ak_arena_chunk *chunk_of(const ak_arena *a, uintptr_t p) {
  if (a->cur && p >= data_start(a->cur) && p < a->cur->end) return a->cur;
  ak_arena_chunk *c = a->large;
  return c && p >= data_start(c) && p < c->end ? c : NULL;
}

void _ak_arena_prof_sampled(ak_arena *a, void *p, size_t n) {
  if (!_ak_prof_record(p, n, "arena", a->opts.name ? a->opts.name : "unnamed")) return;
  ak_arena_chunk *c = chunk_of(a, (uintptr_t)p);
  if (c && !c->prof_one) {
    c->prof_one = p;
    return;
  }
  struct ak_arena_prof_node *node = NULL;
  if (c == a->cur) { /* right after the block: freed with it */
    uintptr_t at = place(a->ptr, real_limit(a), sizeof *node, sizeof(void *));
    if (at) {
      a->ptr = at + granules(sizeof *node);
      node = (struct ak_arena_prof_node *)at;
      AK_TRACK_INTERNAL(node, sizeof *node);
    }
  }
  if (!node) {
    _ak_prof_forget(p); /* counted as allocated, not kept */
    return;
  }
  node->block = p;
  node->next = c->prof_list;
  c->prof_list = node;
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
  while (c->prof_list && (uintptr_t)c->prof_list->block >= from) {
    struct ak_arena_prof_node *node = c->prof_list;
    AK_ASSERT((uintptr_t)node->block >= data_start(c) && (uintptr_t)node->block < c->end);
    AK_ASSERT(!node->next || node->next->block < node->block); /* newest first */
    c->prof_list = node->next;
    _ak_prof_forget(node->block);
  }
  if (c->prof_one && (uintptr_t)c->prof_one >= from) {
    AK_ASSERT(!c->prof_list); /* the first block is below every later one */
    _ak_prof_forget(c->prof_one);
    c->prof_one = NULL;
  }
  c->prof_end = 0;
}

void _ak_arena_prof_check(const ak_arena_chunk *c) {
  if (!AK_CHECKED) return;
  uintptr_t above = UINTPTR_MAX;
  for (const struct ak_arena_prof_node *n = c->prof_list; n; n = n->next) {
    uintptr_t b = (uintptr_t)n->block;
    AK_ASSERT(b >= data_start(c) && (uintptr_t)n > b && (uintptr_t)n < c->end); /* node after its block */
    AK_ASSERT(b < above);                                                       /* newest first */
    above = b;
  }
  AK_ASSERT(!c->prof_list || (c->prof_one && (uintptr_t)c->prof_one < above)); /* the first is the lowest */
  AK_ASSERT(!c->prof_one || ((uintptr_t)c->prof_one >= data_start(c) && (uintptr_t)c->prof_one < c->end));
}
