/* pool_lockfree.c - AK_SYNC_LOCKFREE: one lock-free free stack (a Treiber
 * stack) for the whole pool, the seed 000 lock_free::arena_allocator made
 * ABA-safe.
 *
 * The head is one 64-bit word: a 16-bit tag above a 48-bit slot pointer
 * (x86-64 and AArch64 user addresses fit in 48 bits; slabs above that are
 * refused). Every successful CAS increments the tag, so a thread that read
 * head A, was preempted while A was popped, pushed back and reused, fails
 * its CAS instead of installing a stale `next`. A popper may read the link
 * of a slot another thread has just taken; that memory stays mapped for the
 * pool's lifetime (trim only decommits it), so the read never faults and
 * the tag makes its value irrelevant.
 *
 * When the stack is empty, one thread (under the pool mutex) carves a new
 * slab into a chain and pushes the whole chain with one CAS. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>

#include "common/error.h"
#include "common/track.h"
#include "os/os_mem.h"
#include "pool/pool_internal.h"

#define PTR_BITS 48
#define PTR_MASK ((UINT64_C(1) << PTR_BITS) - 1)
#define TAG_ONE (UINT64_C(1) << PTR_BITS)

#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 8)
#define AK_NO_TSAN __attribute__((no_sanitize("thread")))
#else
#define AK_NO_TSAN
#endif

static inline uint64_t pack(uint64_t old, void *p) { return ((old & ~PTR_MASK) + TAG_ONE) | (uintptr_t)p; }

/* The benign race of a Treiber stack: the link of the head slot may be
 * written by the thread that just popped it. Read it atomically; TSan is
 * told to ignore this one function. */
static AK_NO_TSAN void *read_link(void *slot) { return *(void *volatile *)slot; }

/* Under p->mu: carves a spare or new slab into one chain and pushes the
 * chain with one CAS. 0 or an errno. */
static int push_slab(_ak_pool_impl *p) {
  _ak_slab *s = _ak_pool_slab_get(p);
  if (!s) return errno ? errno : ENOMEM;
  if ((uintptr_t)s + p->slab_size - 1 > PTR_MASK) {
    _ak_pool_slab_release(p, s);
    _ak_pool_error(p, ENOMEM, "ak_pool_alloc", "slab address does not fit 48 bits");
    return ENOMEM;
  }
  _ak_list_push_back(&p->full, s, AK_SLAB_FULL); /* listed for trim/destroy */
  s->free = NULL;
  s->bump = s->start;
  if (p->tracked) AK_TRACK_INTERNAL((void *)s->start, s->end - s->start);
  _ak_slab_carve(s, (size_t)(s->end - s->start));
  if (p->tracked && p->slot > sizeof(void *)) /* links readable, the rest poisoned */
    for (uintptr_t o = s->start; o < s->end; o += p->slot)
      AK_TRACK_RELEASE((void *)(o + sizeof(void *)), p->slot - sizeof(void *));
  void *first = s->free, *last = first;
  while (*(void **)last) last = *(void **)last;
  s->free = NULL;
  s->used = s->capacity; /* the slots now belong to the stack */
  uint64_t old = atomic_load_explicit(&p->lf_head, memory_order_relaxed);
  do {
    __atomic_store_n((void **)last, (void *)(uintptr_t)(old & PTR_MASK), __ATOMIC_RELAXED);
  } while (!atomic_compare_exchange_weak_explicit(&p->lf_head, &old, pack(old, first), memory_order_release,
                                                  memory_order_relaxed));
  return 0;
}

/* The stack ran dry: one thread grows it, the others find it refilled. */
static int grow(_ak_pool_impl *p) {
  pthread_mutex_lock(&p->mu);
  int rc = 0;
  if (!(atomic_load_explicit(&p->lf_head, memory_order_acquire) & PTR_MASK)) rc = push_slab(p);
  pthread_mutex_unlock(&p->mu);
  if (rc) errno = rc;
  return rc;
}

void *_ak_lockfree_alloc(_ak_pool_impl *p) {
  size_t n = atomic_fetch_add_explicit(&p->lf_live, 1, memory_order_relaxed) + 1;
  if (p->max_objects && n > p->max_objects) {
    atomic_fetch_sub_explicit(&p->lf_live, 1, memory_order_relaxed);
    _ak_pool_error(p, ENOMEM, "ak_pool_alloc", "max_objects live objects already");
    return NULL;
  }
  size_t peak = atomic_load_explicit(&p->lf_peak, memory_order_relaxed);
  while (n > peak && !atomic_compare_exchange_weak(&p->lf_peak, &peak, n)) {
  }
  uint64_t old = atomic_load_explicit(&p->lf_head, memory_order_acquire);
  for (;;) {
    void *top = (void *)(uintptr_t)(old & PTR_MASK);
    if (!top) {
      if (grow(p) != 0) {
        atomic_fetch_sub_explicit(&p->lf_live, 1, memory_order_relaxed);
        return NULL;
      }
      old = atomic_load_explicit(&p->lf_head, memory_order_acquire);
      continue;
    }
    void *next = read_link(top);
    if (atomic_compare_exchange_weak_explicit(&p->lf_head, &old, pack(old, next), memory_order_acquire,
                                              memory_order_acquire)) {
      if (ak_config_checked || p->tracked) {
        _ak_slab *s = (_ak_slab *)((uintptr_t)top & ~(uintptr_t)(p->slab_size - 1));
        _ak_pool_mark_live(p, s, top);
        _ak_pool_track_alloc(p, top);
      }
      return top;
    }
  }
}

void _ak_lockfree_free(_ak_pool_impl *p, void *o) {
  _ak_slab *s = _ak_pool_slab_fast(p, o, "ak_pool_free");
  if (AK_UNLIKELY(p->debug)) {
    _ak_pool_mark_free(p, s, o, "ak_pool_free");
    _ak_pool_track_free(p, o);
  }
  uint64_t old = atomic_load_explicit(&p->lf_head, memory_order_relaxed);
  do {
    __atomic_store_n((void **)o, (void *)(uintptr_t)(old & PTR_MASK), __ATOMIC_RELAXED);
  } while (!atomic_compare_exchange_weak_explicit(&p->lf_head, &old, pack(old, o), memory_order_release,
                                                  memory_order_relaxed));
  atomic_fetch_sub_explicit(&p->lf_live, 1, memory_order_relaxed);
}

/* With no live object, the whole stack is taken down and every slab's
 * pages are decommitted; the slabs stay mapped (a racing pop may still read
 * a link) and are re-carved by grow() when needed. */
void _ak_lockfree_trim(_ak_pool_impl *p) {
  pthread_mutex_lock(&p->mu);
  if (atomic_load(&p->lf_live) == 0) {
    uint64_t old = atomic_load(&p->lf_head);
    while (!atomic_compare_exchange_weak(&p->lf_head, &old, pack(old, NULL))) {
    }
    while (p->full.head) {
      _ak_slab *s = p->full.head;
      _ak_list_remove(&p->full, s);
      if (p->backing != AK_BACKING_HEAP) {
        size_t ps = _ak_os_page_size();
        uintptr_t from = (s->start + ps - 1) & ~(uintptr_t)(ps - 1);
        uintptr_t to = (uintptr_t)s + p->slab_size;
        if (to > from) (void)_ak_os_decommit((void *)from, to - from);
      }
      s->free = NULL;
      s->bump = s->start;
      s->used = 0;
      _ak_list_push_back(&p->spare, s, AK_SLAB_SPARE);
    }
  }
  pthread_mutex_unlock(&p->mu);
}

int _ak_lockfree_reserve(_ak_pool_impl *p, size_t n) {
  /* Grow until the stack holds n slots beyond the live ones: counted by
   * slabs, since the stack itself cannot be measured without popping. */
  pthread_mutex_lock(&p->mu);
  size_t have = (p->full.n + p->spare.n) * p->capacity;
  pthread_mutex_unlock(&p->mu);
  size_t live = atomic_load(&p->lf_live);
  while (have < live + n) {
    pthread_mutex_lock(&p->mu);
    int rc = push_slab(p);
    pthread_mutex_unlock(&p->mu);
    if (rc) return rc;
    have += p->capacity;
  }
  return 0;
}
