/* SPDX-License-Identifier: MIT */
/* serial.c - the serial core's out-of-line parts (pool/serial.h): counts,
 * reserve and trim. */
#define _GNU_SOURCE
#include <errno.h>

#include "pool/serial.h"
#include "pool/slab/backing.h"

size_t _ak_serial_live(const _ak_pool_impl *p) {
  if (!_ak_serial_inline(p)) return p->serial.live;
  size_t n = 0;
  for (const _ak_slab *s = _ak_slab_first(&p->serial.avail); s; s = _ak_slab_next(s))
    n += (uintptr_t)s == p->pub.cur.hot_slab ? p->pub.cur.hot_used : s->head.used;
  for (const _ak_slab *s = _ak_slab_first(&p->serial.full); s; s = _ak_slab_next(s)) n += s->head.used;
  for (const _ak_slab *s = _ak_slab_first(&p->serial.pending); s; s = _ak_slab_next(s)) n += s->head.used;
  AK_ASSERT(n <= (p->serial.avail.n + p->serial.full.n + p->serial.pending.n) * p->capacity);
  return n;
}

int _ak_serial_reserve(_ak_pool_impl *p, size_t n) {
  AK_ASSERT(p->pub.cur.hot_slab <= 1); /* the caller checked the current slab in */
  _ak_serial_place_pending(p);
  size_t room = 0;
  for (_ak_slab *s = _ak_slab_first(&p->serial.avail); s; s = _ak_slab_next(s))
    room += s->capacity - s->head.used;
  int rc = 0;
  while (room < n) {
    /* Spares are taken onto `avail`, not counted: the reclaim policy could
     * release them before they are used. */
    _ak_slab *s = _ak_pool_slab_spare(p, &p->spares);
    if (!s) s = _ak_pool_slab_new(p, "ak_pool_reserve");
    if (!s) {
      rc = errno ? errno : ENOMEM;
      break;
    }
    _ak_slab_list_push_back(&p->serial.avail, s, AK_SLAB_AVAIL);
    room += p->capacity;
  }
  AK_ASSERT(rc != 0 || room >= n); /* the room asked for, or the reason there is none */
  return rc;
}

void _ak_serial_trim(_ak_pool_impl *p) {
  AK_ASSERT(p->pub.cur.hot_slab <= 1); /* the caller checked the current slab in */
  _ak_spare_drain(&p->spares);
  _ak_serial_place_pending(p);
  for (_ak_slab *s = _ak_slab_first(&p->serial.avail), *next; s; s = next) {
    next = _ak_slab_next(s);
    if (s->head.used == 0) {
      _ak_slab_list_remove(&p->serial.avail, s);
      _ak_pool_slab_release(p, s);
    }
  }
}

void _ak_serial_release(_ak_pool_impl *p) {
  _ak_pool_slab_list_release(p, &p->serial.avail);
  _ak_pool_slab_list_release(p, &p->serial.full);
  _ak_pool_slab_list_release(p, &p->serial.pending);
}

void _ak_serial_counts(_ak_pool_impl *p, size_t *live, size_t *peak) {
  *live = _ak_serial_live(p);
  if (*live > p->serial.peak_live) p->serial.peak_live = *live;
  *peak = p->serial.peak_live;
}
