/* SPDX-License-Identifier: MIT */
/* prof.c - the pool's side of the heap profiler (src/prof): sampling its
 * allocations by bytes, labelled pool=<name>, and forgetting the sampled
 * objects when they are freed or their slab goes.
 *
 * The inline paths are compiled into the program and cannot reach the
 * profiler's countdown, so a pool created while the profiler is on is a
 * sampled pool (`prof`) for its life: its inline paths are off (as in a
 * pool with a cap), every allocation and free takes the library's slow
 * path, which counts the object's bytes down (_ak_prof_sample_due) and
 * records the object that crosses zero, and which checks each free
 * against the profiler before the mode frees it. A pool created while the
 * profiler is off keeps its inline paths and is never sampled.
 *
 * Each slab counts the objects of it the profiler keeps (`prof_n`): a free
 * asks the profiler only in a slab that has one, and a slab released with
 * objects in it (destroy) forgets its address range. Invariant: every
 * object of the pool the profiler keeps lies in a slab whose prof_n counts
 * it; prof_live is the sum over the pool. */
#include "prof/prof.h"
#include "pool/pool.h"

void _ak_pool_prof_sampled(_ak_pool_impl *p, void *o) {
  if (!_ak_prof_record(o, p->object_size, "pool", p->name)) return;
  _ak_slab *s = _ak_slab_of(o, p->slab_size);
  AK_ASSERT(_ak_pool_slab_ok(p, o, s)); /* a slot of one of p's slabs */
  atomic_fetch_add_explicit(&s->prof_n, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&p->prof_live, 1, memory_order_relaxed);
}

void _ak_pool_prof_free(_ak_pool_impl *p, void *o) {
  _ak_slab *s = _ak_pool_slab_find(p, o, "ak_pool_free"); /* a bad pointer is reported here */
  if (!atomic_load_explicit(&s->prof_n, memory_order_relaxed) || !_ak_prof_forget_if_kept(o)) return;
  uint32_t was = atomic_fetch_sub_explicit(&s->prof_n, 1, memory_order_relaxed);
  size_t live = atomic_fetch_sub_explicit(&p->prof_live, 1, memory_order_relaxed);
  AK_ASSERT(was > 0 && live > 0); /* the kept object was counted in its slab and its pool */
  (void)was;
  (void)live;
}

void _ak_pool_prof_release(_ak_pool_impl *p, _ak_slab *s) {
  size_t n = _ak_prof_forget_range(s->start, s->end);
  AK_ASSERT(n <= atomic_load_explicit(&s->prof_n, memory_order_relaxed)); /* only the slab's own */
  atomic_store_explicit(&s->prof_n, 0, memory_order_relaxed);
  atomic_fetch_sub_explicit(&p->prof_live, n, memory_order_relaxed);
}
