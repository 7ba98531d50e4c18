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
#include <stdio.h>
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

/* The slab of slot `o`: its header holds the key of the links stored in
 * its slots (links cross slabs here, each encoded with its slot's key). */
static inline _ak_slab *slab_of(const _ak_pool_impl *p, const void *o) {
  return (_ak_slab *)((uintptr_t)o & ~(uintptr_t)(p->slab_size - 1));
}

static inline void *decode(const _ak_pool_impl *p, const void *o, uintptr_t w) {
  return (void *)(ak_harden_encode ? w ^ slab_of(p, o)->key : w);
}

static inline uintptr_t encode(const _ak_pool_impl *p, const void *o, const void *next) {
  return ak_harden_encode ? (uintptr_t)next ^ slab_of(p, o)->key : (uintptr_t)next;
}

/* Hardened: could `next` be a slot of this pool? Within the address range
 * of its slabs and on the slot grid of a slab (no memory is read: a wild
 * value must not fault here). */
static bool plausible(const _ak_pool_impl *p, uintptr_t next) {
  if (next == 0) return true;
  if (next < atomic_load_explicit(&p->lf_lo, memory_order_relaxed) ||
      next >= atomic_load_explicit(&p->lf_hi, memory_order_relaxed))
    return false;
  size_t off = next & (p->slab_size - 1);
  return off >= p->lf_hdr && (off - p->lf_hdr) % p->slot == 0 && off - p->lf_hdr < p->capacity * p->slot;
}

static _Noreturn AK_COLD void corrupt(_ak_pool_impl *p, void *o, void *next) {
  _ak_slab_corrupt(slab_of(p, o), o, next, "ak_pool_alloc");
}

/* The benign race of a Treiber stack: the link of the head slot may be
 * written by the thread that just popped it. Read it atomically; TSan is
 * told to ignore this one function. */
static AK_NO_TSAN uintptr_t read_link(void *slot) { return *(uintptr_t volatile *)slot; }

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
  p->lf_hdr = s->start - (uintptr_t)s;
  if (!atomic_load(&p->lf_lo) || (uintptr_t)s < atomic_load(&p->lf_lo)) atomic_store(&p->lf_lo, (uintptr_t)s);
  if ((uintptr_t)s + p->slab_size > atomic_load(&p->lf_hi))
    atomic_store(&p->lf_hi, (uintptr_t)s + p->slab_size);
  s->free = NULL;
  s->bump = s->start;
  if (p->tracked) AK_TRACK_INTERNAL((void *)s->start, s->end - s->start);
  _ak_slab_carve(s, (size_t)(s->end - s->start));
  if (p->tracked && p->slot > sizeof(void *)) /* links readable, the rest poisoned */
    for (uintptr_t o = s->start; o < s->end; o += p->slot)
      AK_TRACK_RELEASE((void *)(o + sizeof(void *)), p->slot - sizeof(void *));
  void *first = s->free, *last = first;
  while (_ak_slab_link(s, last)) last = _ak_slab_link(s, last);
  s->free = NULL;
  s->used = s->capacity; /* the slots now belong to the stack */
  uint64_t old = atomic_load_explicit(&p->lf_head, memory_order_relaxed);
  do {
    __atomic_store_n((uintptr_t *)last, encode(p, last, (void *)(uintptr_t)(old & PTR_MASK)),
                     __ATOMIC_RELAXED);
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
    void *next = decode(p, top, read_link(top));
    if (atomic_compare_exchange_weak_explicit(&p->lf_head, &old, pack(old, next), memory_order_acquire,
                                              memory_order_acquire)) {
      /* The CAS proves `top` was the head throughout: `next` is its real
       * link, so a bad one is corruption, not a race. */
      if (ak_harden_links && AK_UNLIKELY(!plausible(p, (uintptr_t)next))) corrupt(p, top, next);
      /* No stale link in a handed-out slot: freeing it untouched must not
       * look like a double free. */
      if (ak_harden_double_free) __atomic_store_n((uintptr_t *)top, 0, __ATOMIC_RELAXED);
      if (ak_config_checked || p->tracked) {
        _ak_slab *s = (_ak_slab *)((uintptr_t)top & ~(uintptr_t)(p->slab_size - 1));
        _ak_pool_mark_live(p, s, top);
        _ak_pool_track_alloc(p, top);
      }
      return top;
    }
  }
}

/* Hardened double-free check: if the first word of `o` decodes to a
 * plausible link, search the stack (bounded; a link changed under the
 * walk by a concurrent pop ends it). */
static bool on_stack(_ak_pool_impl *p, void *o) {
  if (!plausible(p, (uintptr_t)decode(p, o, *(uintptr_t *)o))) return false;
  size_t limit = (atomic_load_explicit(&p->lf_hi, memory_order_relaxed) -
                  atomic_load_explicit(&p->lf_lo, memory_order_relaxed)) /
                     p->slot +
                 1;
  for (void *b = (void *)(uintptr_t)(atomic_load(&p->lf_head) & PTR_MASK); b && limit--;) {
    if (b == o) return true;
    void *next = decode(p, b, read_link(b));
    if (!plausible(p, (uintptr_t)next)) return false;
    b = next;
  }
  return false;
}

void _ak_lockfree_free(_ak_pool_impl *p, void *o) {
  _ak_slab *s = _ak_pool_slab_fast(p, o, "ak_pool_free");
  if (AK_UNLIKELY(p->debug)) {
    _ak_pool_mark_free(p, s, o, "ak_pool_free");
    _ak_pool_track_free(p, o);
  }
  if (ak_harden_double_free && AK_UNLIKELY(on_stack(p, o))) {
    fprintf(stderr, "arenakit: ak_pool_free(%p): double free in pool '%s'\n", o, p->name);
    abort();
  }
  uint64_t old = atomic_load_explicit(&p->lf_head, memory_order_relaxed);
  do {
    __atomic_store_n((uintptr_t *)o, encode(p, o, (void *)(uintptr_t)(old & PTR_MASK)), __ATOMIC_RELAXED);
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
