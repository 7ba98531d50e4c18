/* SPDX-License-Identifier: MIT */
/* sample.h - the heap profiler's per-thread countdown (internal, base
 * layer): the inline test the components put on their allocation fast
 * paths, and the generation word that reaches every thread's countdown.
 *
 * Sampling by bytes: each thread counts down a random number of bytes,
 * drawn from an exponential distribution with the sampling period as its
 * mean; the allocation that takes the countdown below zero is sampled, and
 * a new countdown is drawn. Bytes between samples form a Poisson process,
 * so a block of s bytes is sampled with probability 1 - exp(-s / period),
 * whatever the sizes around it (the dump divides by that probability).
 *
 * The fast path is one subtraction, one store and one branch on an
 * initial-exec TLS word: _ak_prof_sample_due(n) is false while
 * `left - n >= 0`. While the profiler is off, `left` is INT64_MAX, so the
 * branch is never taken.
 *
 * Reaching every thread: start, stop and a new period bump the global
 * generation word `_ak_prof_gen` (its low bit: on). A thread re-arms its
 * countdown when it sees a generation other than the one it armed under:
 * in the slow path of _ak_prof_sample_due (so stop() reaches every thread
 * that allocates within one period, and a sample taken after it is
 * discarded) and in _ak_prof_poll, which the components call on their own
 * slow paths (a refill, a new page or chunk) - that is how start() reaches
 * a thread whose countdown reads INT64_MAX. No thread writes another
 * thread's countdown: the word is the owner's alone, so the fast path
 * needs no atomic operation. */
#ifndef AK_PROF_SAMPLE_H
#define AK_PROF_SAMPLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arenakit/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A thread's sampling state. Only its own thread reads or writes it. */
typedef struct _ak_prof_tls {
  int64_t left;  /**< bytes until the next sample; INT64_MAX while off;
                      >= 0 between allocations */
  uint64_t gen;  /**< _ak_prof_gen when `left` was last armed (0: never) */
  uint64_t rng;  /**< xorshift64* state; 0 until seeded */
  uint32_t busy; /**< > 0 inside the profiler: nothing is sampled */
} _ak_prof_tls;

/** The calling thread's state (zero at thread start: the first allocation
 *  takes the slow path, which arms the countdown). */
extern __thread _ak_prof_tls _ak_prof_self __attribute__((tls_model("initial-exec")));

/** The generation: bumped by every start, stop and period change; its low
 *  bit is 1 while the profiler samples. Written under the profiler's
 *  control lock, read with relaxed atomic loads. Starts at 2 (off), so a
 *  thread's zeroed `gen` never matches it. */
extern uint64_t _ak_prof_gen;

/** The slow path of _ak_prof_sample_due: re-arms the countdown (a new
 *  generation, or the sample's fresh draw) and says whether this
 *  allocation of `n` bytes is sampled. No lock, no allocation. */
bool _ak_prof_sample_slow(size_t n);

/** Re-arms the calling thread's countdown for generation `gen`. */
void _ak_prof_rearm(uint64_t gen);

/** True when an allocation of `n` bytes by the calling thread is to be
 *  sampled: the caller completes the allocation, then calls
 *  _ak_prof_record with the block. Cost when it is false: one subtraction,
 *  one store and one not-taken branch; async-signal-safe (it touches the
 *  thread's own word only), as is its slow path. */
AK_FAST_PATH bool _ak_prof_sample_due(size_t n) {
  int64_t left = (int64_t)((uint64_t)_ak_prof_self.left - n); /* wraps, never overflows */
  _ak_prof_self.left = left;
  if (AK_LIKELY(left >= 0)) return false;
  return _ak_prof_sample_slow(n);
}

/** True while the profiler samples (a relaxed load: a thread may see a
 *  start or stop a little late). */
AK_FAST_PATH bool _ak_prof_is_on(void) {
  return (__atomic_load_n(&_ak_prof_gen, __ATOMIC_RELAXED) & 1u) != 0;
}

/** For the components' slow paths (a free-list refill, a new page, a new
 *  chunk): re-arms the calling thread's countdown when the profiler was
 *  started, stopped or given a new period since the thread last looked.
 *  Cost when nothing changed: two loads and a compare. Async-signal-safe. */
AK_FAST_PATH void _ak_prof_poll(void) {
  uint64_t gen = __atomic_load_n(&_ak_prof_gen, __ATOMIC_RELAXED);
  if (AK_UNLIKELY(_ak_prof_self.gen != gen)) _ak_prof_rearm(gen);
}

#ifdef __cplusplus
}
#endif

#endif /* AK_PROF_SAMPLE_H */
