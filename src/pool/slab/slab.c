/* SPDX-License-Identifier: MIT */
/* slab.c - slab headers, slot carving, remote collection and the hardened
 * checks of free lists (slab layer). */
#include "pool/slab/slab.h"

#include "common/assert.h"

#include <string.h>

#include "common/error.h"

size_t _ak_slab_header_size(size_t capacity, size_t align, bool checked) {
  AK_ASSERT(align > 0 && (align & (align - 1)) == 0); /* the rounding below needs a power of two */
  size_t h = sizeof(_ak_slab) + (checked ? ((capacity + 63) / 64) * sizeof(uint64_t) : 0);
  return (h + align - 1) & ~(align - 1);
}

size_t _ak_slab_capacity(size_t slab_size, size_t slot, size_t align, bool checked) {
  size_t cap = (slab_size - sizeof(_ak_slab)) / slot;
  while (cap > 0 && _ak_slab_header_size(cap, align, checked) + cap * slot > slab_size) cap--;
  AK_ASSERT(cap < UINT32_MAX); /* `capacity` and `used` are 32-bit */
  return cap;
}

_ak_slab *_ak_slab_init(void *mem, void *pool, const char *name, size_t slab_size, size_t slot, size_t align,
                        bool checked) {
  _ak_slab *s = mem;
  size_t cap = _ak_slab_capacity(slab_size, slot, align, checked);
  size_t hdr = _ak_slab_header_size(cap, align, checked);
  memset(s, 0, hdr);
  s->head.magic = AK_SLAB_MAGIC ^ (uintptr_t)pool;
  s->head.pool = pool;
  s->name = name;
  s->head.key = ak_harden_encode ? _ak_random_key() : 0;
  s->start = (uintptr_t)mem + hdr;
  s->bump = s->start;
  s->end = s->start + cap * slot;
  s->slot = slot;
  s->capacity = (uint32_t)cap;
  atomic_init(&s->remote, NULL);
  s->head.owner = 0;
  /* The slots fit the usable part of the slab, after the header. */
  AK_ASSERT(cap > 0 && s->start >= (uintptr_t)mem + sizeof *s && s->end <= (uintptr_t)mem + slab_size);
  AK_ASSERT(s->start % align == 0 &&
            _ak_slab_validate(s, "_ak_slab_init")); /* aligned slots, a valid header */
  return s;
}

void _ak_slab_carve(_ak_slab *s, size_t bytes) {
  size_t n = bytes / s->slot;
  if (n == 0) n = 1;
  size_t left = (size_t)(s->end - s->bump) / s->slot;
  if (n > left) n = left;
  s->head.free.first =
      _ak_chain_blocks(s->bump, s->slot, n, s->head.free.first, s->head.key, _ak_slab_shuffled(s));
  AK_ASSERT(n > 0 && n * s->slot <= (size_t)(s->end - s->bump)); /* whole never-used slots */
  s->bump += n * s->slot;
  AK_ASSERT(s->bump <= s->end && (s->bump - s->start) % s->slot == 0); /* on the slot grid */
}

uint32_t _ak_slab_collect(_ak_slab *s) {
  /* Nothing to collect (the common case): a load, not an atomic exchange. */
  if (_ak_slab_remote_list(atomic_load_explicit(&s->remote, memory_order_relaxed)) == NULL) return 0;
  /* Clears the tag too: the caller takes a slab with remote frees off the
   * full list (a full slab with a remote list is found by its tag). */
  void *list = _ak_slab_remote_list(atomic_exchange_explicit(&s->remote, NULL, memory_order_acquire));
  s->flags &= ~(uint32_t)AK_SLAB_F_REMOTE_FULL;
  uint32_t n = 0;
  while (list) {
    void *next = _ak_slab_link(s, list);
    if (ak_harden_links && AK_UNLIKELY(next && !_ak_slab_in(s, (uintptr_t)next)))
      _ak_slab_corrupt(s, list, next, "ak_pool_alloc");
    _ak_slab_set_link(s, list, s->head.free.first);
    s->head.free.first = list;
    list = next;
    n++;
  }
  AK_ASSERT(n <= s->head.used); /* a remote free was of a live object */
  s->head.used -= n;
  return n;
}

void _ak_slab_corrupt(const _ak_slab *s, const void *o, const void *next, const char *call) {
  _ak_fatal(
      "%s: pool '%s': corrupted free list in slab %p: the free slot %p links to %p, "
      "outside the slab (write after free or a forged link)",
      call, s->name ? s->name : "?", (const void *)s, o, next);
}

/* Walks a list from `head` for at most `limit` steps; stops at a link that
 * leaves the slab (another thread may be changing a remote list). */
static bool list_has(const _ak_slab *s, const void *head, const void *o, size_t limit) {
  for (const void *b = head; b && limit--; b = _ak_slab_link(s, b)) {
    if (b == o) return true;
    if (!_ak_slab_in(s, (uintptr_t)b)) return false;
  }
  return false;
}

bool _ak_slab_search(const _ak_slab *s, const void *o, bool local) {
  AK_ASSERT(_ak_slab_in(s, (uintptr_t)o)); /* the object being freed lies in the slab */
  size_t limit = (size_t)s->capacity + 1;
  return (local && list_has(s, s->head.free.first, o, limit)) ||
         list_has(s,
                  _ak_slab_remote_list(
                      atomic_load_explicit(&((_ak_slab *)(uintptr_t)s)->remote, memory_order_acquire)),
                  o, limit);
}

/* Aborts: invariant `what` of slab `s` is broken (checked by `where`). */
static _Noreturn AK_COLD void invalid(const _ak_slab *s, const char *where, const char *what) {
  _ak_fatal("%s: pool '%s': slab %p is invalid: %s", where, s->name ? s->name : "?", (const void *)s, what);
}

bool _ak_slab_validate(const _ak_slab *s, const char *where) {
  if (s->head.magic != (AK_SLAB_MAGIC ^ (uintptr_t)s->head.pool)) invalid(s, where, "bad magic");
  if (s->slot == 0 || s->start <= (uintptr_t)s || s->end - s->start != (uintptr_t)s->capacity * s->slot)
    invalid(s, where, "slot area");
  if (s->bump < s->start || s->bump > s->end || (s->bump - s->start) % s->slot != 0)
    invalid(s, where, "never-used slots off the slot grid");
  if (s->head.used > s->capacity) invalid(s, where, "more live objects than slots");
  /* The tag of the remote list is set and cleared by the caller, with its
   * copy in the flags (remote frees keep it). */
  if (((uintptr_t)atomic_load_explicit(&((_ak_slab *)(uintptr_t)s)->remote, memory_order_relaxed) &
       AK_SLAB_REMOTE_FULL) != !!(s->flags & AK_SLAB_F_REMOTE_FULL))
    invalid(s, where, "the remote list's tag and its flag differ");
  if ((s->flags & AK_SLAB_F_PENDING) && s->head.state != AK_SLAB_AVAIL)
    invalid(s, where, "a pending slab not of kind avail");
  /* The local free list: slots already carved, each once (the count is
   * bounded, so a cycle is caught too), none live in the checked build's
   * bitmap. Objects on the remote list are still counted in `used`. */
  size_t carved = (size_t)(s->bump - s->start) / s->slot, n = 0;
  for (const void *o = s->head.free.first; o; o = _ak_slab_link(s, o)) {
    uintptr_t u = (uintptr_t)o;
    if (u < s->start || u >= s->bump || (u - s->start) % s->slot != 0)
      invalid(s, where, "a free-list link off the carved slots");
    if (++n > carved) invalid(s, where, "the free list is longer than the carved slots (a cycle)");
    size_t i = (u - s->start) / s->slot;
    if (AK_CHECKED && (s->bitmap[i / 64] >> (i % 64) & 1)) invalid(s, where, "a live slot on the free list");
  }
  if (s->head.used + n + (size_t)(s->end - s->bump) / s->slot != s->capacity)
    invalid(s, where, "used + free + never-used slots != capacity");
  return true;
}
