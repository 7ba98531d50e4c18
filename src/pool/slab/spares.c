/* SPDX-License-Identifier: MIT */
/* spares.c - a pool's empty slabs kept for reuse (slab/spares.h): getting
 * a slab (a spare under the reclaim policy first, else a new one from the
 * backing), putting an empty one back, releasing one, and the spare set's
 * view of the pool's slabs. */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>

#include "common/track.h"
#include "pool/pool.h"
#include "pool/slab/backing.h"
#include "pool/slab/spares.h"

/* The slab whose header holds spare-set node `n`. */
static _ak_slab *spare_slab(_ak_spare *n) { return (_ak_slab *)((char *)n - offsetof(_ak_slab, spare)); }

/* A slab of spare set `set` (p's or one of its heaps'), or NULL;
 * `*failed` when a punched-out file spare cannot get its blocks back
 * (error reported; the spare is released: put back, it would pass for a
 * committed one). */
static _ak_slab *spare_take(_ak_pool_impl *p, _ak_spare_set *set, bool *failed) {
  *failed = false;
  bool cold = true;
  _ak_spare *n = _ak_spare_take(set, &cold);
  if (!n) return NULL;
  _ak_slab *s = spare_slab(n);
  /* A file spare that was punched out (_ak_pool_slab_decommit) has its
   * blocks allocated again before a slot is written. */
  if (cold && _ak_pool_slab_recommit(p, s) != 0) {
    int e = errno;
    _ak_pool_slab_release(p, s);
    errno = e;
    *failed = true;
    return NULL;
  }
  AK_ASSERT(!_ak_dnode_linked(&s->node) && s->head.used == 0); /* an empty slab on no list */
  AK_ASSERT(s->head.state == AK_SLAB_SPARE &&
            _ak_slab_validate(s, "_ak_pool_slab_spare")); /* reset when put */
  return s;
}

_ak_slab *_ak_pool_slab_spare(_ak_pool_impl *p, _ak_spare_set *set) {
  bool failed;
  return spare_take(p, set, &failed);
}

_ak_slab *_ak_pool_slab_slack(_ak_pool_impl *p, _ak_spare_set *set) {
  int e = errno;
  bool failed = false;
  _ak_slab *s = set ? spare_take(p, set, &failed) : NULL;
  if (!s && !failed && p->backing != AK_BACKING_FILE) s = _ak_pool_slab_new(p, NULL);
  errno = e;
  AK_ASSERT(!s || (s->head.used == 0 && !_ak_dnode_linked(&s->node))); /* empty, unlisted */
  return s;
}

_ak_slab *_ak_pool_slab_get(_ak_pool_impl *p) {
  bool failed;
  _ak_slab *s = spare_take(p, &p->spares, &failed);
  if (!s && !failed) s = _ak_pool_slab_new(p, "ak_pool_alloc");
  AK_ASSERT(!s || (s->head.used == 0 && !_ak_dnode_linked(&s->node) &&
                   s->head.pool == p)); /* empty, unlisted, p's */
  return s;
}

void _ak_pool_slab_release(_ak_pool_impl *p, _ak_slab *s) {
  AK_ASSERT(!_ak_dnode_linked(&s->node));                     /* taken off its list first */
  AK_ASSERT(s->head.magic == (AK_SLAB_MAGIC ^ (uintptr_t)p)); /* a live slab of p, released once */
  if (AK_UNLIKELY(atomic_load_explicit(&s->prof_n, memory_order_relaxed))) _ak_pool_prof_release(p, s);
  _ak_table_del(&p->table, (uintptr_t)s);
  if (p->tracked) AK_TRACK_INTERNAL((void *)s, p->slab_size);
  s->head.magic = 0;
  _ak_pool_backing_put(p, s, s->file_offset);
}

void _ak_pool_slab_reset(_ak_slab *s) {
  /* A reused slab starts from scratch: carving is lazy again (no slot is
   * touched before it is handed out, and no cold list is chased). */
  s->head.free.first = NULL;
  s->bump = s->start;
  s->head.used = 0;
  s->flags |= AK_SLAB_F_REUSED;
}

void _ak_pool_slab_put(_ak_pool_impl *p, _ak_spare_set *set, _ak_slab *s) {
  AK_ASSERT(!_ak_dnode_linked(&s->node)); /* on no list: the spare set holds it by `spare` */
  AK_ASSERT(s->head.used == 0 && _ak_slab_validate(s, "_ak_pool_slab_put")); /* empty before it is reset */
  _ak_pool_slab_reset(s);
  s->head.state = AK_SLAB_SPARE;
  _ak_spare_put(set, &s->spare, p->slab_size);
}

void _ak_pool_slab_hand_over(_ak_pool_impl *p, _ak_spare_set *from) {
  bool cold;
  for (_ak_spare *n; (n = _ak_spare_take(from, &cold)) != NULL;) {
    _ak_slab *s = spare_slab(n);
    AK_ASSERT(s->head.state == AK_SLAB_SPARE && s->head.used == 0); /* a spare, reset when put */
    if (cold)
      _ak_pool_slab_release(p, s); /* decommitted: reuse would fault its pages anyway */
    else
      _ak_pool_slab_put(p, &p->spares, s);
  }
}

/* The spare set's view of a pool's slabs (common/reclaim.h). Decommit
 * keeps the header page, where the set's node lives. */
static void spare_decommit(_ak_spare *n, void *ctx) { _ak_pool_slab_decommit(ctx, spare_slab(n)); }
static void spare_release(_ak_spare *n, void *ctx) { _ak_pool_slab_release(ctx, spare_slab(n)); }
const _ak_spare_ops _ak_pool_spare_ops = {spare_decommit, spare_release};

void _ak_pool_slab_list_release(_ak_pool_impl *p, _ak_slab_list *l) {
  while (l->head) {
    _ak_slab *s = _ak_slab_first(l);
    _ak_slab_list_remove(l, s);
    _ak_pool_slab_release(p, s);
  }
  AK_ASSERT(l->n == 0 && l->tail == NULL);
}
