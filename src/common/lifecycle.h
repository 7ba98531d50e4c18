/* SPDX-License-Identifier: MIT */
/* lifecycle.h - the order in which the library sets itself up at load.
 *
 * Each component registers its fork handlers once, in a constructor, so
 * that they exist before any handler of the program can: pthread_atfork
 * runs prepare handlers in reverse order of registration and the others
 * in order, so a handler the program registers (at any time after the
 * library is loaded) prepares before the library takes its locks and runs
 * after the library released them in the parent and the child - it may
 * allocate from a pool or malloc in every step.
 *
 * Among the library's own handlers, a component whose locks are taken
 * first at run time registers last: the pool calls malloc under its locks
 * and malloc never calls the pool, so the malloc registers first and the
 * pool's prepare runs before the malloc's. The reclaim module's registry
 * lock is never held while any other lock is waited for, and its wake
 * takes no lock, so its place is free; it registers first (its prepare
 * runs last).
 *
 * Constructor priorities order these within the library (lower runs
 * first; 0-100 are the C library's); a program's own constructors have no
 * priority and run after them. */
#ifndef AK_LIFECYCLE_H
#define AK_LIFECYCLE_H

#define AK_CTOR_RECLAIM 101 /* src/common/reclaim.c: the background thread's */
#define AK_CTOR_MALLOC 102  /* src/malloc/heap.c: the malloc's fork handlers */
#define AK_CTOR_POOL 103    /* src/pool/registry.c: the pools' fork handlers */
/* 104: the heap profiler's (src/prof/prof_internal.h). The arena's chunk
 * cache lock is a leaf (nothing is called under it), so its place is
 * free: last, its prepare runs first. */
#define AK_CTOR_ARENA 105 /* src/arena/arena_cache.c: the chunk cache's fork handlers */

#endif /* AK_LIFECYCLE_H */
