/* slab.c - slab headers, slot carving and remote collection (slab layer). */
#include "slab/slab.h"

#include <string.h>

size_t _ak_slab_header_size(size_t capacity, size_t align, bool checked) {
  size_t h = sizeof(_ak_slab) + (checked ? ((capacity + 63) / 64) * sizeof(uint64_t) : 0);
  return (h + align - 1) & ~(align - 1);
}

size_t _ak_slab_capacity(size_t slab_size, size_t slot, size_t align, bool checked) {
  size_t cap = (slab_size - sizeof(_ak_slab)) / slot;
  while (cap > 0 && _ak_slab_header_size(cap, align, checked) + cap * slot > slab_size) cap--;
  return cap;
}

_ak_slab *_ak_slab_init(void *mem, void *pool, size_t slab_size, size_t slot, size_t align, bool checked) {
  _ak_slab *s = mem;
  size_t cap = _ak_slab_capacity(slab_size, slot, align, checked);
  size_t hdr = _ak_slab_header_size(cap, align, checked);
  memset(s, 0, hdr);
  s->magic = AK_SLAB_MAGIC ^ (uintptr_t)pool;
  s->pool = pool;
  s->start = (uintptr_t)mem + hdr;
  s->bump = s->start;
  s->end = s->start + cap * slot;
  s->slot = slot;
  s->capacity = (uint32_t)cap;
  atomic_init(&s->remote, NULL);
  atomic_init(&s->owner, 0);
  return s;
}

void _ak_slab_carve(_ak_slab *s, size_t bytes) {
  size_t n = bytes / s->slot;
  if (n == 0) n = 1;
  /* Carve in address order: the list pops from low to high addresses. */
  void *head = s->free;
  uintptr_t stop = s->bump + n * s->slot;
  if (stop > s->end || stop < s->bump) stop = s->end;
  for (uintptr_t p = stop; p > s->bump;) {
    p -= s->slot;
    *(void **)p = head;
    head = (void *)p;
  }
  s->free = head;
  s->bump = stop;
}

uint32_t _ak_slab_collect(_ak_slab *s) {
  void *list = atomic_exchange_explicit(&s->remote, NULL, memory_order_acquire);
  uint32_t n = 0;
  while (list) {
    void *next = *(void **)list;
    *(void **)list = s->free;
    s->free = list;
    list = next;
    n++;
  }
  s->used -= n;
  return n;
}
