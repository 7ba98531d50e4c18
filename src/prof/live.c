/* SPDX-License-Identifier: MIT */
/* live.c - the live set: one record per sampled block not yet freed,
 * hashed by the block's address, and the hooks that fill and empty it
 * (_ak_prof_record, _ak_prof_forget).
 *
 * A sample adds its scaled objects and bytes to its site's allocated
 * counters and to the totals; its record keeps what it stands for, so the
 * forget of the block, from any thread, takes exactly that back out of
 * the in-use total, and a dump sums the records per site for the in-use
 * values. When the live set is full the sample still counts as allocated
 * (dropped_live) and the caller is told not to mark the block.
 *
 * The stack is captured before the lock is taken; the lock (`mu`) covers
 * the table updates only. An interval dump a sample makes due is written
 * after the lock is dropped. */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "common/assert.h"
#include "prof/prof_internal.h"

static _ak_prof_rec *rec_at(const _ak_prof_tables *t, uint32_t id) {
  return (_ak_prof_rec *)_ak_prof_vec_at(&t->recs, id);
}

static _ak_prof_site *site_at(const _ak_prof_tables *t, uint32_t id) {
  return (_ak_prof_site *)_ak_prof_vec_at(&t->sites, id);
}

static uint32_t rec_bucket(const _ak_prof_heads *h, uint64_t block) {
  uint64_t x = block * 0x9e3779b97f4a7c15ull;
  return (uint32_t)(x >> 32) & h->mask;
}

/* The relink of _ak_prof_heads_fit: every record in use (block set; the
 * others are on the free list, through the same `next`). */
static void recs_relink(_ak_prof_tables *t, _ak_prof_heads *h) {
  for (uint32_t id = 1; id < t->recs.n; id++) {
    _ak_prof_rec *r = rec_at(t, id);
    if (r->block == 0) continue;
    uint32_t *head = &h->a[rec_bucket(h, r->block)];
    r->next = *head;
    *head = id;
  }
}

uint64_t _ak_prof_scaled_bytes(uint64_t obj, uint64_t size) {
  __extension__ typedef unsigned __int128 u128; /* obj * size may pass 2^64 */
  return (uint64_t)(((u128)obj * size) / AK_PROF_OBJ_ONE);
}

/* A record from the free list or a new one; 0 at the bound. */
static uint32_t rec_take(_ak_prof_tables *t) {
  uint32_t id = t->rec_free;
  if (id != 0) {
    t->rec_free = rec_at(t, id)->next;
    return id;
  }
  return _ak_prof_vec_push(&t->recs, &id) ? id : 0;
}

bool _ak_prof_live_remove(_ak_prof_tables *t, uintptr_t block) {
  uint32_t *link = &t->rec_heads.a[rec_bucket(&t->rec_heads, block)];
  while (*link != 0 && rec_at(t, *link)->block != block) link = &rec_at(t, *link)->next;
  uint32_t id = *link;
  if (id == 0) return false;
  _ak_prof_rec *r = rec_at(t, id);
  uint64_t bytes = _ak_prof_scaled_bytes(r->obj, r->size);
  AK_ASSERT(t->inuse_bytes >= bytes && t->live > 0);
  t->inuse_bytes -= bytes;
  t->live--;
  *link = r->next;
  memset(r, 0, sizeof *r);
  r->next = t->rec_free;
  t->rec_free = id;
  return true;
}

bool _ak_prof_live_add(_ak_prof_tables *t, uintptr_t block, uint64_t size, uint64_t obj, uint32_t site) {
  _ak_prof_site *s = site_at(t, site);
  uint64_t bytes = _ak_prof_scaled_bytes(obj, size);
  s->alloc_obj += obj;
  s->alloc_bytes += bytes;
  t->alloc_bytes += bytes;
  t->samples++;
  /* A block already live was freed without a forget: its record goes. */
  (void)_ak_prof_live_remove(t, block);
  uint32_t id = rec_take(t);
  if (id == 0) {
    t->dropped_live++;
    return false;
  }
  _ak_prof_rec *r = rec_at(t, id);
  r->block = block;
  r->size = size;
  r->obj = obj;
  r->site = site;
  uint32_t *head = &t->rec_heads.a[rec_bucket(&t->rec_heads, block)];
  r->next = *head;
  *head = id;
  t->inuse_bytes += bytes;
  t->live++;
  _ak_prof_heads_fit(t, &t->rec_heads, t->live, AK_PROF_CHAIN_SITE, recs_relink);
  return true;
}

void _ak_prof_live_sum(const _ak_prof_tables *t, uint64_t *obj, uint64_t *bytes, uint32_t nsites) {
  for (uint32_t id = 1; id < t->recs.n; id++) {
    const _ak_prof_rec *r = rec_at(t, id);
    if (r->block == 0 || r->site >= nsites) continue;
    obj[r->site] += r->obj;
    bytes[r->site] += _ak_prof_scaled_bytes(r->obj, r->size);
  }
}

void _ak_prof_check_live(const _ak_prof_tables *t) {
  size_t live = 0, free_n = 0;
  uint64_t inuse = 0;
  for (uint32_t b = 0; b <= t->rec_heads.mask; b++)
    for (uint32_t id = t->rec_heads.a[b]; id != 0; id = rec_at(t, id)->next) {
      const _ak_prof_rec *r = rec_at(t, id);
      if (r->block == 0 || rec_bucket(&t->rec_heads, r->block) != b || r->site == 0 || r->site >= t->sites.n)
        _ak_fatal("prof: live record %u (block %#llx) is misplaced", id, (unsigned long long)r->block);
      live++;
      inuse += _ak_prof_scaled_bytes(r->obj, r->size);
    }
  for (uint32_t id = t->rec_free; id != 0; id = rec_at(t, id)->next) free_n++;
  if (live != t->live || live + free_n + 1 != t->recs.n)
    _ak_fatal("prof: live set: %zu hashed, %zu counted, %zu free, %u in all", live, t->live, free_n,
              t->recs.n);
  if (inuse != t->inuse_bytes)
    _ak_fatal("prof: in-use total %llu, its records sum to %llu", (unsigned long long)t->inuse_bytes,
              (unsigned long long)inuse);
}

/* ---- the hooks ------------------------------------------------------------------- */

bool _ak_prof_record_stack(void *block, size_t size, const uintptr_t *pcs, unsigned depth,
                           const char *label_key, const char *label_value) {
  if (!_ak_prof_is_on()) return false;
  uint64_t obj = _ak_prof_weight(size, __atomic_load_n(&_ak_prof_g.period, __ATOMIC_RELAXED));
  _ak_prof_tables *t = &_ak_prof_g.t;
  pthread_mutex_lock(&_ak_prof_g.mu);
  if (!t->ready) {
    pthread_mutex_unlock(&_ak_prof_g.mu);
    return false;
  }
  uint32_t node = _ak_prof_stack_intern(t, pcs, depth < AK_PROF_MAX_DEPTH ? depth : AK_PROF_MAX_DEPTH);
  uint32_t label = _ak_prof_label_intern(t, label_key, label_value);
  uint32_t site = _ak_prof_site_intern(t, node, label);
  if (site == 0) {
    t->dropped_stacks++;
    site = 1; /* (0, 0): the empty stack, always there */
  }
  bool kept = _ak_prof_live_add(t, (uintptr_t)block, size, obj, site);
  uint64_t inuse = t->inuse_bytes;
  pthread_mutex_unlock(&_ak_prof_g.mu);
  _ak_prof_interval_check(inuse);
  return kept;
}

/* noinline: the stack starts at this function's return address, so its
 * frame (and the capture's) is never part of it. */
__attribute__((noinline)) bool _ak_prof_record(void *block, size_t size, const char *label_key,
                                               const char *label_value) {
  _ak_prof_tls *self = &_ak_prof_self;
  if (self->busy || !_ak_prof_is_on()) return false;
  self->busy++;
  int saved = errno;
  uintptr_t pcs[AK_PROF_MAX_DEPTH];
  int method = __atomic_load_n(&_ak_prof_g.stack_method, __ATOMIC_RELAXED);
  unsigned n = _ak_prof_capture(pcs, AK_PROF_MAX_DEPTH, method, (uintptr_t)__builtin_return_address(0));
  bool kept = _ak_prof_record_stack(block, size, pcs, n, label_key, label_value);
  errno = saved;
  self->busy--;
  return kept;
}

/* Removes `block`'s record; `count_unknown`: a block without one is
 * counted in unknown_frees. Returns whether it had one. */
static bool forget(void *block, bool count_unknown) {
  pthread_mutex_lock(&_ak_prof_g.mu);
  _ak_prof_tables *t = &_ak_prof_g.t;
  bool kept = t->ready && _ak_prof_live_remove(t, (uintptr_t)block);
  if (t->ready && !kept && count_unknown) t->unknown_frees++;
  pthread_mutex_unlock(&_ak_prof_g.mu);
  return kept;
}

void _ak_prof_forget(void *block) { (void)forget(block, true); }

bool _ak_prof_forget_if_kept(void *block) { return forget(block, false); }

size_t _ak_prof_forget_range(uintptr_t lo, uintptr_t hi) {
  size_t n = 0;
  pthread_mutex_lock(&_ak_prof_g.mu);
  _ak_prof_tables *t = &_ak_prof_g.t;
  for (uint32_t b = 0; t->ready && b <= t->rec_heads.mask; b++) {
    uint32_t id = t->rec_heads.a[b];
    while (id != 0) {
      const _ak_prof_rec *r = rec_at(t, id);
      uint32_t next = r->next; /* the record is recycled by the remove */
      if (r->block >= lo && r->block < hi && _ak_prof_live_remove(t, r->block)) n++;
      id = next;
    }
  }
  pthread_mutex_unlock(&_ak_prof_g.mu);
  return n;
}
