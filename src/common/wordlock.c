/* SPDX-License-Identifier: MIT */
/* wordlock.c - the contended path of the word lock (common/wordlock.h). */
#include "common/wordlock.h"

#include <sched.h>

/* A hint that the caller spins (lets a sibling hyperthread run, saves power). */
static inline void spin_hint(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield"); /* the spin-wait hint of aarch64 */
#else
  atomic_signal_fence(memory_order_seq_cst); /* keeps the loop: a pause of its own length */
#endif
}

void _ak_word_lock_slow(atomic_int *l) {
  unsigned backoff = 1;
  for (;;) {
    /* Test before the exchange: waiters read the line shared, and only a
     * free lock makes them write it. */
    if (!atomic_load_explicit(l, memory_order_relaxed) &&
        !atomic_exchange_explicit(l, 1, memory_order_acquire))
      return;
    if (backoff <= 64) {
      for (unsigned i = 0; i < backoff; i++) spin_hint();
      backoff *= 2;
    } else {
      sched_yield(); /* more threads than cores: let the holder run */
    }
  }
}
