/* SPDX-License-Identifier: MIT */
/* signals.h - every signal blocked on the calling thread for a stretch of
 * library code, and the thread's mask put back after (internal): where a
 * handler must not run (a thread created to run only the library inherits
 * the mask; a LOCKFREE pool's thread holding its stack empty). */
#ifndef AK_COMMON_SIGNALS_H
#define AK_COMMON_SIGNALS_H

#include <pthread.h>
#include <signal.h>

/** Blocks every signal on the calling thread; `*old` gets the mask it had. */
static inline void _ak_signals_block_all(sigset_t *old) {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, old);
}

/** Puts back the mask that _ak_signals_block_all saved. */
static inline void _ak_signals_restore(const sigset_t *old) { pthread_sigmask(SIG_SETMASK, old, NULL); }

#endif /* AK_COMMON_SIGNALS_H */
