/* SPDX-License-Identifier: MIT */
/* check.c - the pool's checks and error reports: the slab of a pointer
 * with its validation (slab map, header, slot grid) and the reports of a
 * foreign pointer or a double free, the checked build's live bitmap and
 * the tool annotations of a slot. */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/track.h"
#include "pool/pool.h"

/* ---- errors and checks -------------------------------------------------- */

AK_COLD void _ak_pool_double_free(_ak_pool_impl *p, const void *o) {
  _ak_fatal("ak_pool_free(%p): double free in pool '%s'", o, p->name);
}

_ak_slab *_ak_pool_slab_check(_ak_pool_impl *p, const void *o, const char *call) {
  uintptr_t u = (uintptr_t)o;
  uintptr_t base = (uintptr_t)_ak_slab_of(o, p->slab_size);
  if (_ak_config_validate) {
    if (AK_UNLIKELY(p->destroyed))
      _ak_fatal("%s(%p): pool '%s' was destroyed (ak_pool_destroy)", call, o, p->name);
    /* No header is read where the slab map knows no slab: a stack, static,
     * foreign, unmapped or released address is never dereferenced. */
    if (AK_UNLIKELY(!_ak_table_known(&p->table, base))) {
      const char *other = _ak_pools_owner_name(u);
      if (other) _ak_fatal("%s(%p): pointer belongs to pool '%s', not to pool '%s'", call, o, other, p->name);
      _ak_fatal("%s(%p): pointer was not allocated by pool '%s' (no slab of it contains the address)", call,
                o, p->name);
    }
  }
  _ak_slab *s = (_ak_slab *)base;
  if (AK_UNLIKELY(s->head.magic != (AK_SLAB_MAGIC ^ (uintptr_t)p))) {
    /* Validated builds: `base` is a live slab of another pool. */
    if (_ak_config_validate)
      _ak_fatal("%s(%p): pointer belongs to pool '%s', not to pool '%s'", call, o, s->name, p->name);
    _ak_fatal("%s(%p): pointer was not allocated by pool '%s' (bad slab header)", call, o, p->name);
  }
  /* The slot-grid test (checked and hardened builds): one multiplication
   * where the slots span less than 4 GiB (slot_div, as _ak_pool_on_grid),
   * else a division. */
  uint64_t off = (uint64_t)(u - s->start), div = p->pub.slot_div;
  if (_ak_config_validate &&
      !(div ? u >= s->start && u < s->end && off * div <= div - 1 : _ak_slab_is_slot(s, u))) {
    _ak_fatal("%s(%p): pointer is inside pool '%s' but not the start of an object (slot %zu bytes)", call, o,
              p->name, p->slot);
  }
  AK_ASSERT(s->head.pool == p && _ak_slab_is_slot(s, u)); /* a slot of one of p's slabs */
  return s;
}

static size_t slot_index(const _ak_slab *s, const void *o) {
  AK_ASSERT(_ak_slab_is_slot(s, (uintptr_t)o)); /* found on the grid (_ak_pool_slab_find) */
  return ((uintptr_t)o - s->start) / s->slot;
}

void _ak_pool_mark_live(_ak_pool_impl *p, _ak_slab *s, void *o) {
  (void)p;
  if (!_ak_config_checked) return;
  size_t i = slot_index(s, o);
  AK_ASSERT(i < s->capacity);
  /* Atomic: in the concurrent modes other threads mark other slots of the word. */
  uint64_t was = __atomic_fetch_or(&s->bitmap[i / 64], UINT64_C(1) << (i % 64), __ATOMIC_RELAXED);
  AK_ASSERT(!(was >> (i % 64) & 1)); /* a slot is handed out once until it is freed */
  (void)was;
}

void _ak_pool_mark_free(_ak_pool_impl *p, _ak_slab *s, void *o, const char *call) {
  if (!_ak_config_checked) return;
  size_t i = slot_index(s, o);
  AK_ASSERT(i < s->capacity);
  uint64_t bit = UINT64_C(1) << (i % 64);
  /* Atomic: in the concurrent modes other threads mark other slots of the word. */
  if (!(__atomic_fetch_and(&s->bitmap[i / 64], ~bit, __ATOMIC_RELAXED) & bit))
    _ak_fatal("%s(%p): double free (or never allocated) in pool '%s'", call, o, p->name);
}

void _ak_pool_track_alloc(_ak_pool_impl *p, void *o) {
  if (!p->tracked) return;
  AK_UNPOISON(o, p->slot);
  if (p->tracked & AK_TRACK_MODE_VALGRIND) AK_VG_ALLOC(p->vg_pool, o, p->object_size);
}

void _ak_pool_track_free(_ak_pool_impl *p, void *o) {
  if (!p->tracked) return;
  if (p->tracked & AK_TRACK_MODE_VALGRIND) AK_VG_FREE(p->vg_pool, o);
  /* The first word holds the free link: keep it readable by the pool. */
  AK_TRACK_INTERNAL(o, sizeof(void *));
  if (p->slot > sizeof(void *)) AK_TRACK_RELEASE((char *)o + sizeof(void *), p->slot - sizeof(void *));
}
