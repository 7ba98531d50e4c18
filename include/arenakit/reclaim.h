/* SPDX-License-Identifier: MIT */
/* arenakit/reclaim.h - when memory that empties goes back to the OS.
 *
 * One policy for every component: memory that empties (a pool's slab, a
 * malloc segment, an arena chunk kept by a clear) becomes a spare, stamped
 * with the time it emptied. Spares are reused first, the most recently
 * emptied first (its pages are likeliest to be resident and cached). A
 * spare left unused for the purge delay is decommitted (its pages are given
 * back, the range stays mapped); one left unused for the release delay is
 * unmapped (an arena's chunks stay mapped: its retain option decides which
 * it keeps). So a program that churns memory reuses it without page faults
 * or munmap calls, and one that stops using it gets it back into the OS's
 * hands. The free pages of a malloc segment that a running thread holds
 * are that thread's spares too (purge delay). Free pages that no running
 * thread holds, among live blocks (a malloc segment whose thread exited),
 * follow the same rule with a shorter delay, the page delay (see
 * AK_RECLAIM_PAGE_DELAY_MS). The malloc's cache of freed large mappings
 * keeps what the program's recent use of large blocks shows it reuses, and
 * unmaps a mapping unused for the release delay.
 *
 * The policy runs on the components' slow paths (when they take or give a
 * slab, chunk or span), which read a coarse clock once, and on the
 * background thread (ak_background), which by default starts when memory
 * waits and ends when nothing does: a program that frees a burst and
 * makes no call gets its memory back too.
 */
#ifndef ARENAKIT_RECLAIM_H
#define ARENAKIT_RECLAIM_H

#include <stdbool.h>

#include "arenakit/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Default purge delay: ms a spare waits before its pages are decommitted. */
#define AK_RECLAIM_PURGE_DELAY_MS 250
/** Default release delay: ms after emptying before a spare is unmapped. */
#define AK_RECLAIM_RELEASE_DELAY_MS 1000
/** Default page delay: ms the free pages that no running thread holds
 *  (those of a malloc segment whose thread exited, among its live blocks)
 *  wait before they are decommitted. Shorter than the purge delay: a
 *  segment of a thread that exited keeps a few live blocks among many free
 *  pages, and no thread allocates there until one adopts it. While such
 *  pages are taken again soon after they were decommitted, the delay in
 *  force doubles, up to 80 ms, so that a program reusing memory in cycles
 *  does not fault every page in again; it is the set delay again after a
 *  second without such a refault. A running thread's free pages wait the
 *  purge delay (or this one, if longer). */
#define AK_RECLAIM_PAGE_DELAY_MS 10

/** Sets the process-wide delays, in milliseconds: a spare unused for
 *  `purge_ms` is decommitted (0: at once, as it empties; -1: never), one
 *  unused for `release_ms` (counted from when it emptied) is unmapped
 *  (-1: never; a value below purge_ms acts as purge_ms). Components that
 *  keep their memory mapped by contract (the arena's retained chunks) only
 *  decommit. Takes effect at the next check of each component. Returns 0,
 *  or EINVAL (errno set, message in ak_last_error()) for a value below -1.
 *  Thread-safe. */
AK_API int ak_reclaim_set_delays(long purge_ms, long release_ms);

/** Reads the delays in force (either pointer may be NULL). Thread-safe. */
AK_API void ak_reclaim_get_delays(long *purge_ms, long *release_ms);

/** Sets the page delay (AK_RECLAIM_PAGE_DELAY_MS), in milliseconds: free
 *  pages that no running thread holds, among live blocks, are decommitted
 *  once unused for `ms`. 0: at once, every free page of the malloc, and it
 *  caches no large mapping; -1: only on ak_collect(), also a running
 *  thread's, and cached large mappings only then; at most 86400000. The
 *  malloc's environment variable AK_PURGE_DELAY and its option
 *  AK_OPTION_PURGE_DELAY set this delay. Returns 0, or EINVAL (errno set,
 *  message in ak_last_error()) for a value out of range. Thread-safe. */
AK_API int ak_reclaim_set_page_delay(long ms);

/** The page delay set (without the temporary doubling). Thread-safe. */
AK_API long ak_reclaim_get_page_delay(void);

/** When the background thread runs. It applies the policy to every pool
 *  and to the malloc (spare segments, free pages of exited threads'
 *  segments, the large-block cache), sleeping until the next step is due
 *  (at most 250 ms), so the memory of a program that went idle goes back
 *  without any call of the program. */
typedef enum ak_background AK_ENUM_INT {
  /** Default (AK_BACKGROUND unset or "auto"): started when memory first
   *  waits to be given back, at the end of the call that put it aside;
   *  ends once nothing has waited for a second; started again as needed
   *  (in a fork child too). If the thread cannot be created (a sandbox, a
   *  thread limit), the mode becomes OFF. */
  AK_BACKGROUND_AUTO = 0,
  AK_BACKGROUND_OFF = 1, /**< never (AK_BACKGROUND=0): memory goes back on the library's calls only */
  AK_BACKGROUND_ON = 2   /**< from now until switched off (AK_BACKGROUND=1: from the first pool or heap) */
} ak_background;

/** Sets the mode (the environment variable is read once; a call wins).
 *  OFF stops a running thread and waits for it (a pass in progress
 *  finishes first); ON starts one. Returns 0, EINVAL for an unknown mode,
 *  or the errno of pthread_create (errno set, message in ak_last_error()).
 *  Thread-safe; not from an atfork handler. Fork: the child has no thread;
 *  its mode is the parent's, ON becoming AUTO. */
AK_API int ak_reclaim_set_background(ak_background mode);

/** The mode in force. Thread-safe. */
AK_API ak_background ak_reclaim_get_background(void);

/** ak_reclaim_set_background(AK_BACKGROUND_ON): starts the thread; 0 (also
 *  when it runs already) or the errno of pthread_create. Thread-safe. */
AK_API int ak_reclaim_thread_start(void);

/** ak_reclaim_set_background(AK_BACKGROUND_OFF): stops the thread and
 *  keeps it off. Thread-safe; must not be called from an atfork handler. */
AK_API void ak_reclaim_thread_stop(void);

/** True while the background thread runs. Thread-safe. */
AK_API bool ak_reclaim_thread_running(void);

/** Applies the policy to every pool and the malloc's spare segments now,
 *  as one pass of the background thread does: spares past their delays
 *  are decommitted or unmapped. Thread-safe. */
AK_API void ak_reclaim_collect(void);

#ifdef __cplusplus
}
#endif

#endif /* ARENAKIT_RECLAIM_H */
