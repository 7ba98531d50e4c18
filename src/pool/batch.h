/* SPDX-License-Identifier: MIT */
/* batch.h - batches of free slots and the lock-free stack that holds them
 * (internal): AK_SYNC_LOCKFREE's shared stack (modes/lockfree.c) and each
 * thread's stash of batches in SPINLOCK and LOCKFREE magazines
 * (modes/magazine/).
 *
 * A batch is a chain of 1..AK_MAG_BATCH free slots linked through their
 * first word (links encoded with the key of the slab of the slot that
 * stores them, _ak_chain_next), the last link NULL. The first slot of a
 * batch also holds, in its second word, the batch's length (top 16 bits)
 * and the first slot of the next batch on the stack (low 48 bits, encoded
 * like a link). So a batch is pushed or popped with one CAS on the head
 * and only its first slot is touched: slots are at least two words
 * wherever batches are stacked (pool.c sizes LOCKFREE slots so; SPINLOCK
 * stashes only with such slots, _ak_batch_ok).
 *
 * The head is one 64-bit word: a 16-bit tag above a 48-bit slot pointer
 * (x86-64 and AArch64 user addresses fit in 48 bits; slabs above that are
 * refused). Every successful CAS increments the tag, so a thread that read
 * head A, was preempted while A was popped, pushed back and reused, fails
 * its CAS instead of installing a stale `next`. A popper may read the
 * second word of a slot another thread has just taken; that memory stays
 * mapped for the pool's lifetime (trim only decommits it), so the read
 * never faults and the tag makes its value irrelevant. No lock is taken:
 * every operation here is async-signal-safe. */
#ifndef AK_POOL_BATCH_H
#define AK_POOL_BATCH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "common/track.h"
#include "pool/modes.h"

#define AK_BATCH_PTR_BITS 48
#define AK_BATCH_PTR_MASK ((UINT64_C(1) << AK_BATCH_PTR_BITS) - 1)
#define AK_BATCH_TAG_ONE (UINT64_C(1) << AK_BATCH_PTR_BITS)

#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 8)
#define AK_NO_SANITIZE_RACE __attribute__((no_sanitize("thread", "address")))
#else
#define AK_NO_SANITIZE_RACE
#endif

/** Whether slots of `p` can be stacked as batches (two words each). */
static inline bool _ak_batch_ok(const _ak_pool_impl *p) { return p->slot >= 2 * sizeof(void *); }

/** The head word after a successful CAS from `old` to first slot `o`. */
static inline uint64_t _ak_batch_head(uint64_t old, const void *o) {
  AK_ASSERT(((uintptr_t)o & ~(uintptr_t)AK_BATCH_PTR_MASK) == 0); /* slot addresses fit 48 bits */
  return ((old & ~AK_BATCH_PTR_MASK) + AK_BATCH_TAG_ONE) | (uintptr_t)o;
}
static inline void *_ak_batch_top(uint64_t head) { return (void *)(uintptr_t)(head & AK_BATCH_PTR_MASK); }

/** A link word `w` read from slot `o`, decoded with the codec of
 *  arenakit/detail/link.h and the key of the slot's slab. */
static inline void *_ak_batch_decode(const _ak_pool_impl *p, const void *o, uintptr_t w) {
  _ak_link l;
  memcpy(&l, &w, sizeof l);
  return _ak_link_get(&l, _ak_slab_key(_ak_slab_of(o, p->slab_size)));
}
/** The word slot `o` stores for link `next`. */
static inline uintptr_t _ak_batch_encode(const _ak_pool_impl *p, const void *o, const void *next) {
  _ak_link l;
  _ak_link_set(&l, next, _ak_slab_key(_ak_slab_of(o, p->slab_size)));
  uintptr_t w;
  memcpy(&w, &l, sizeof w);
  return w;
}

#define AK_BATCH_SHIFT 48
static inline uintptr_t *_ak_batch_word(void *o) { return (uintptr_t *)o + 1; }

/** Stores in batch `o` its length `n` and the next batch `next`. */
static inline void _ak_batch_set(const _ak_pool_impl *p, void *o, const void *next, uint32_t n) {
  AK_ASSERT(n > 0 && n <= AK_MAG_BATCH); /* a batch: its length fits above the pointer */
  if (p->tracked) AK_TRACK_INTERNAL(_ak_batch_word(o), sizeof(uintptr_t));
  uintptr_t w = ((uintptr_t)n << AK_BATCH_SHIFT) | (_ak_batch_encode(p, o, next) & AK_BATCH_PTR_MASK);
  __atomic_store_n(_ak_batch_word(o), w, __ATOMIC_RELAXED);
}
static inline uint32_t _ak_batch_len(uintptr_t w) { return (uint32_t)(w >> AK_BATCH_SHIFT); }
static inline void *_ak_batch_next(const _ak_pool_impl *p, const void *o, uintptr_t w) {
  return (void *)((uintptr_t)_ak_batch_decode(p, o, w & AK_BATCH_PTR_MASK) & AK_BATCH_PTR_MASK);
}

/** The racy read of a Treiber stack: the second word of the head slot may
 *  be written by the thread that just popped it (or, tracked, poisoned
 *  after it was freed again): read atomically, the tools told to ignore
 *  this one function; a CAS on the tagged head decides whether it counts. */
static AK_NO_SANITIZE_RACE inline uintptr_t _ak_batch_read(void *slot) {
  return *(uintptr_t volatile *)_ak_batch_word(slot);
}

/** Pushes the batches `first` .. `last` (linked to each other already;
 *  `last` holds `last_n` slots) onto the stack at `head` with one CAS. */
static inline void _ak_batch_push(const _ak_pool_impl *p, _Atomic uint64_t *head, void *first, void *last,
                                  uint32_t last_n) {
  uint64_t old = atomic_load_explicit(head, memory_order_relaxed);
  do {
    _ak_batch_set(p, last, _ak_batch_top(old), last_n);
  } while (!atomic_compare_exchange_weak_explicit(head, &old, _ak_batch_head(old, first),
                                                  memory_order_release, memory_order_relaxed));
}

/** Cuts the chain `first` (held by the caller, NULL-terminated) into
 *  batches of the pool's batch (p->mag.batch; the last may be shorter) linked to each
 *  other in chain order, and pushes them all with one CAS: the chain's
 *  first slots are popped first. Returns the number of slots. */
static inline size_t _ak_batch_push_chain(const _ak_pool_impl *p, _Atomic uint64_t *head, void *first) {
  size_t total = 0;
  void *top = NULL, *prev_batch = NULL; /* first batch; batch whose link is pending */
  uint32_t prev_n = 0;
  while (first) {
    /* Cut one batch of at most p->mag.batch slots off the chain. */
    void *b = first, *o = first;
    uint32_t n = 1;
    void *next = _ak_chain_next(p, o);
    while (next && n < p->mag.batch) {
      o = next;
      next = _ak_chain_next(p, o);
      n++;
    }
    _ak_chain_set(p, o, NULL);              /* the batch ends here */
    AK_ASSERT(n >= 1 && n <= p->mag.batch); /* one batch of the pool's */
    first = next;
    total += n;
    if (prev_batch)
      _ak_batch_set(p, prev_batch, b, prev_n);
    else
      top = b;
    prev_batch = b;
    prev_n = n;
  }
  AK_ASSERT((top == NULL) == (total == 0) && (top == NULL) == (prev_batch == NULL));
  if (top) _ak_batch_push(p, head, top, prev_batch, prev_n);
  return total;
}

/** Reports a batch whose length or link is not one of `p`'s. */
static inline _Noreturn void _ak_batch_corrupt(_ak_pool_impl *p, void *o, void *next) {
  _ak_slab_corrupt(_ak_slab_of(o, p->slab_size), o, next, "ak_pool_alloc");
}

/** Pops the top batch of the stack at `head` into *batch; its length, or
 *  0 if the stack is empty. A length or link that cannot be one of `p`'s
 *  is reported as corruption once the CAS proved it was read from the
 *  top batch (not a race). */
static inline uint32_t _ak_batch_pop(_ak_pool_impl *p, _Atomic uint64_t *head, void **batch) {
  uint64_t old = atomic_load_explicit(head, memory_order_acquire);
  for (;;) {
    void *top = _ak_batch_top(old);
    if (!top) {
      *batch = NULL;
      return 0;
    }
    uintptr_t w = _ak_batch_read(top);
    void *next = _ak_batch_next(p, top, w);
    if (atomic_compare_exchange_weak_explicit(head, &old, _ak_batch_head(old, next), memory_order_acquire,
                                              memory_order_acquire)) {
      uint32_t n = _ak_batch_len(w);
      if (AK_UNLIKELY(n == 0 || n > AK_MAG_BATCH) ||
          (ak_harden_links && AK_UNLIKELY(!_ak_pool_plausible(p, (uintptr_t)next))))
        _ak_batch_corrupt(p, top, next);
      AK_ASSERT(_ak_slab_of(top, p->slab_size)->head.pool == p); /* a slot of one of p's slabs */
      *batch = top;
      return n;
    }
  }
}

/** Takes the whole stack at `head` (one exchange): its first batch, NULL
 *  if it was empty. The caller walks it with _ak_batch_read/_ak_batch_next. */
static inline void *_ak_batch_take_all(_Atomic uint64_t *head) {
  uint64_t old = atomic_load_explicit(head, memory_order_relaxed);
  while (!atomic_compare_exchange_weak_explicit(head, &old, _ak_batch_head(old, NULL), memory_order_acquire,
                                                memory_order_relaxed)) {
  }
  return _ak_batch_top(old);
}

#endif /* AK_POOL_BATCH_H */
