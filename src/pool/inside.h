/* SPDX-License-Identifier: MIT */
/* inside.h - whether the calling thread is inside the pool component's
 * code (internal), so that a call made by a signal handler that
 * interrupted it there is told apart from a plain call: such a nested
 * call must not wait for a lock or a mark that the interrupted call holds
 * (modes.h: _ak_pool_nested_alloc). The pool's locks are taken through the
 * wrappers below, which count themselves in. */
#ifndef AK_POOL_INSIDE_H
#define AK_POOL_INSIDE_H

#include <pthread.h>
#include <stdbool.h>

/** How deep the calling thread is in the pool's code: raised for the
 *  whole of ak_pool_alloc_slow and ak_pool_free_slow, the thread-exit walk
 *  and while any lock of the pool component is held (modes/tls.c defines
 *  it). The signal fences keep the count and the work it covers in program
 *  order as a handler on the same thread sees them. */
extern _Thread_local unsigned _ak_pool_inside __attribute__((tls_model("initial-exec")));

static inline void _ak_pool_enter(void) {
  _ak_pool_inside++;
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
}
static inline void _ak_pool_leave(void) {
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  _ak_pool_inside--;
}

/** pthread_mutex_lock / unlock / trylock (true: taken), counted in. */
static inline void _ak_pool_lock(pthread_mutex_t *mu) {
  _ak_pool_enter();
  pthread_mutex_lock(mu);
}
static inline void _ak_pool_unlock(pthread_mutex_t *mu) {
  pthread_mutex_unlock(mu);
  _ak_pool_leave();
}
static inline bool _ak_pool_trylock(pthread_mutex_t *mu) {
  _ak_pool_enter();
  if (pthread_mutex_trylock(mu) == 0) return true;
  _ak_pool_leave();
  return false;
}

#endif /* AK_POOL_INSIDE_H */
