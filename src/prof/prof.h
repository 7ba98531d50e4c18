/* SPDX-License-Identifier: MIT */
/* prof.h - the heap profiler's API for the allocators (internal, base
 * layer): what the malloc, the pool and the arena call to have their
 * allocations sampled. The user's view is arenakit/prof.h; how the
 * profiler works is docs/profiling.md.
 *
 * A component's allocation path, with the hooks in place:
 *
 *   if (AK_UNLIKELY(_ak_prof_sample_due(n))) {   // inline: sub, store, branch
 *     p = <allocate n bytes as usual>;             // on a slow path of its own
 *     if (p && _ak_prof_record(p, n, "pool", pool->name))
 *       <mark p sampled>;                          // one bit per block or page
 *     return p;
 *   }
 *
 * and its free path, before the block can be handed out again:
 *
 *   if (AK_UNLIKELY(<p is marked sampled>)) { <unmark p>; _ak_prof_forget(p); }
 *
 * and, on each slow path it already has (refill, new page, new chunk):
 *
 *   _ak_prof_poll();                                // inline: two loads, a compare
 *
 * A component whose fast path already counts bytes down in a TLS word of
 * its own (the malloc's) keeps one subtraction by mirroring the
 * profiler's countdown: it sets its word (and the base it counts from) to
 * _ak_prof_self.left, and when its word goes below zero, on its slow
 * path:
 *
 *   sampled = _ak_prof_sample_due(base - word);  // the bytes since the last sync
 *   word = base = _ak_prof_self.left;            // the next countdown (INT64_MAX: off)
 *
 * The profiler's count then crosses zero at the very allocation that took
 * the word below zero, and the same allocations are sampled. After its
 * _ak_prof_poll a component syncs its word the same way.
 *
 * Contract of the hooks:
 * - _ak_prof_sample_due(n) and _ak_prof_poll() may be called anywhere,
 *   with any lock held, in signal handlers too: they touch only the
 *   calling thread's word and a global read with a relaxed load.
 * - _ak_prof_record and _ak_prof_forget take the profiler's own lock and
 *   _ak_prof_record may write an interval dump (open, write, rename):
 *   call them with none of the component's locks held. The profiler never
 *   calls malloc, a pool or an arena, and holds its locks only around its
 *   own tables, so it cannot deadlock with the components, at fork either.
 * - Neither is async-signal-safe: a component whose path runs in a signal
 *   handler (the lock-free pool mode) skips sampling there.
 * - Block addresses are opaque to the profiler: it never reads or writes
 *   the block. */
#ifndef AK_PROF_PROF_H
#define AK_PROF_PROF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "prof/sample.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Most frames kept per stack (the outermost ones are cut). */
#define AK_PROF_MAX_DEPTH 64

/** Records the allocation of `block` (`size` bytes: the same size passed to
 *  _ak_prof_sample_due) that _ak_prof_sample_due chose: captures the
 *  caller's stack (up to AK_PROF_MAX_DEPTH frames, starting at the caller
 *  of this function; frames of the library's own shared object are left
 *  out), and adds the block to the live set under the label
 *  `label_key`=`label_value` (both NULL: no label; the text is copied, at
 *  most 15 and 63 bytes kept). Call it from the thread that allocated,
 *  with none of the component's locks held, before the block is handed
 *  to the user.
 *  Returns true when the block is in the live set: the component must then
 *  remember it as sampled and call _ak_prof_forget when it is freed. False
 *  when the profiler is off, the call comes from inside the profiler, or
 *  the live set is full (the sample still counts as allocated).
 *  Cost: one stack capture (by the unwinder or the frame-pointer chain:
 *  docs/profiling.md has the figures), one lock, two hash lookups per
 *  frame. Never calls malloc. */
bool _ak_prof_record(void *block, size_t size, const char *label_key, const char *label_value);

/** Removes `block`, which _ak_prof_record kept, from the live set. Any
 *  thread; call it when the block is freed, before it can be handed out
 *  again, with none of the component's locks held. A block that is not in
 *  the live set is counted (unknown_frees) and otherwise ignored. One lock,
 *  one hash lookup. Never calls malloc. */
void _ak_prof_forget(void *block);
/** A countdown of its own for a component whose fast path cannot share
 *  the thread's (the arena's inline bump, which stops at an address): the
 *  bytes until its next sample, drawn like the thread's (exponential,
 *  mean the current period, from the calling thread's generator), or
 *  INT64_MAX while the profiler is off. The distribution is memoryless, so
 *  a countdown may be dropped and drawn again at any time without bias.
 *  No lock, no allocation; async-signal-safe. */
int64_t _ak_prof_countdown(void);
/** The mean bytes between samples now in force (AK_PROF_SAMPLE or
 *  ak_prof_option_set): a relaxed load, async-signal-safe. */
uint64_t _ak_prof_period(void);
/** _ak_prof_forget for a block that may or may not be in the live set (a
 *  component that marks a group of blocks, not each one): true when it
 *  was and is now forgotten; a block that was not is not counted. */
bool _ak_prof_forget_if_kept(void *block);
/** Forgets every kept block at an address in [lo, hi) (a component that
 *  releases memory whose blocks it cannot list, with samples in it: a
 *  pool's slab at destroy). One pass over the live set under the lock;
 *  returns how many were forgotten. */
size_t _ak_prof_forget_range(uintptr_t lo, uintptr_t hi);

#ifdef __cplusplus
}
#endif

#endif /* AK_PROF_PROF_H */
