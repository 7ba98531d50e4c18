/* SPDX-License-Identifier: MIT */
/* reclaim.h - the memory-return policy (internal, base layer).
 *
 * What every component does with memory that empties (arenakit/reclaim.h
 * has the user's view): a spare set holds the emptied blocks, stamped with
 * the time they emptied, on two lists, each newest first: `hot` (pages
 * committed) and `cold` (decommitted). Invariant: every hot spare emptied
 * after every cold one (a spare cools from the hot list's tail onto the
 * cold list's head), so both lists stay sorted by time and each step of
 * the policy works at a list's end:
 *   put       a block that emptied goes on hot's head (past the cap, the
 *             oldest spare is released to make room);
 *   take      hot's head, else cold's head (newest first);
 *   purge     hot's tail older than the purge delay is decommitted and
 *             moves to cold's head; cold's tail older than the release
 *             delay is released.
 * `deadline` is when the next of those steps falls due, so the check on a
 * slow path is one clock read and one compare (_ak_spare_tick).
 *
 * The clock is a coarse monotonic clock in milliseconds (one vDSO read,
 * no system call, a few ms of resolution), replaceable by tests
 * (_ak_reclaim_set_clock) so that timing is tested without sleeping.
 *
 * The owner of a set supplies what decommit and release mean for its
 * blocks (_ak_spare_ops) and embeds a _ak_spare node in each block where
 * it stays readable while the block is decommitted (a header page the
 * decommit leaves alone). A set has its own mutex, a leaf lock: the owner
 * may hold its own locks around put/take/purge, and the callbacks run with
 * the set's lock dropped (decommit runs with it held: it must take no
 * lock). Registered sets are purged by the background thread as well. */
#ifndef AK_RECLAIM_H
#define AK_RECLAIM_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arenakit/reclaim.h"
#include "common/list.h"

/** The node a spare block carries (in memory that stays readable while the
 *  block is decommitted). Owned by the set while the block is a spare. */
typedef struct _ak_spare {
  _ak_dnode node; /* on the set's hot or cold list */
  uint64_t since; /* reclaim clock (ms) when the block emptied */
  size_t size;    /* bytes of the block, for the set's counts */
  uint32_t cold;  /* 1 once decommitted */
} _ak_spare;

/** What the set's owner does to its blocks. Both are called with the set's
 *  lock dropped except `decommit`, which must take no lock. */
typedef struct _ak_spare_ops {
  /** Gives the pages of the block behind `s` back to the OS; the block stays
   *  mapped and `s` readable. */
  void (*decommit)(_ak_spare *s, void *ctx);
  /** Gives the block back for good (unmaps it); `s` is gone afterwards.
   *  NULL: blocks are never released by the set (only decommitted). */
  void (*release)(_ak_spare *s, void *ctx);
} _ak_spare_ops;

/** Set flags. */
enum {
  /** Purge by time (the policy's delays); without it spares stay committed
   *  until taken, evicted by the cap or drained. */
  AK_SPARE_TIMED = 1u,
  /** Purged by the background thread and ak_reclaim_collect() too. */
  AK_SPARE_REGISTERED = 2u
};

/** A spare set. Zero-initialise, then _ak_spare_set_init. */
typedef struct _ak_spare_set {
  pthread_mutex_t mu;       /* guards everything below but `deadline` */
  _ak_dlist hot;            /* committed, newest first */
  _ak_dlist cold;           /* decommitted, newest first */
  size_t n, bytes;          /* spares (hot.n + cold.n) and their bytes */
  size_t hot_bytes;         /* of those, bytes still committed (stored with __atomic
                               builtins: _ak_spare_has_hot reads it without mu) */
  size_t cap;               /* most spares kept (0: none; SIZE_MAX: no cap) */
  unsigned flags;           /* AK_SPARE_* */
  uint64_t deadline;        /* clock (ms) of the next due purge step; UINT64_MAX: none;
                                      written under mu, read without it (__atomic builtins) */
  size_t purged_bytes;      /* bytes decommitted by the policy, ever */
  size_t released_bytes;    /* bytes released by the policy (time, cap), ever */
  const _ak_spare_ops *ops; /* the owner's callbacks */
  void *ctx;                /* passed to them */
  _ak_dnode reg;            /* registry of the background thread (under its lock) */
  unsigned pins;            /* passes of the background thread on this set */
} _ak_spare_set;

/** Counts of a set (_ak_spare_stats). */
typedef struct _ak_spare_counts {
  size_t spares;         /* spare blocks held */
  size_t spare_bytes;    /* their bytes */
  size_t committed;      /* of those, bytes still committed */
  size_t purged_bytes;   /* decommitted by the policy, ever */
  size_t released_bytes; /* released by the policy, ever */
} _ak_spare_counts;

/** Initialises `set` (zeroed or finished) for blocks handled by `ops`, with
 *  `ctx`, keeping at most `cap` spares (SIZE_MAX: no cap; 0: every put
 *  releases at once), with AK_SPARE_* `flags`. A registered set is purged
 *  by the background thread until _ak_spare_set_fini; registering reads
 *  AK_BACKGROUND on first use. */
void _ak_spare_set_init(_ak_spare_set *set, const _ak_spare_ops *ops, void *ctx, size_t cap, unsigned flags);

/** Registers `set` (initialised without AK_SPARE_REGISTERED) with the
 *  background thread, as that flag does at init; a registered set is left
 *  as it is. For a set initialised where starting the thread is not safe
 *  (registering reads AK_BACKGROUND, whose thread start may call malloc):
 *  its owner registers it later, at a point where it may. */
void _ak_spare_set_register(_ak_spare_set *set);

/** Takes a registered set out of the registry, waiting for a pass of the
 *  background thread on it to end; the spares it still holds are not
 *  touched (drain them first). Call with none of the owner's locks held
 *  that its `release` takes. */
void _ak_spare_set_fini(_ak_spare_set *set);

/** Adds a block that emptied (node `s` of `size` bytes) as the newest
 *  spare. Past the cap the oldest spare is released (the block itself with
 *  cap 0); with a purge delay of 0 the block is decommitted at once. Runs
 *  the purge if one is due. */
void _ak_spare_put(_ak_spare_set *set, _ak_spare *s, size_t size);

/** Takes the newest spare (hot before cold), or NULL. `*cold` (if not
 *  NULL) tells whether its pages were decommitted. Runs the purge first if
 *  one is due (a spare past the release delay is not handed out). */
_ak_spare *_ak_spare_take(_ak_spare_set *set, bool *cold);

/** The check of a slow path: runs the purge if a step fell due (one
 *  coarse clock read and one compare otherwise). */
void _ak_spare_tick(_ak_spare_set *set);

/** Applies the policy at time `now`: decommits hot spares older than the
 *  purge delay and releases spares older than the release delay. */
void _ak_spare_purge(_ak_spare_set *set, uint64_t now);

/** Takes every spare out and releases it (`release`; with none, the
 *  spares are only unlinked). Trim, destroy. */
void _ak_spare_drain(_ak_spare_set *set);

/** Reads the set's counts (under its lock). */
void _ak_spare_stats(_ak_spare_set *set, _ak_spare_counts *out);

/** True if the set holds a spare whose pages are still committed: a hint,
 *  read without the set's lock (a take or a purge may change it at once). */
bool _ak_spare_has_hot(const _ak_spare_set *set);

/** fork(): takes (releases) the set's lock; the owner's atfork handlers
 *  call these after taking their own locks. */
void _ak_spare_set_lock(_ak_spare_set *set);
void _ak_spare_set_unlock(_ak_spare_set *set);

/* ---- the clock and the delays ---------------------------------------------- */

/** The reclaim clock in milliseconds: CLOCK_MONOTONIC_COARSE (a few ms of
 *  resolution, no system call), or the test clock. */
uint64_t _ak_reclaim_now(void);

/** Replaces the clock (tests: a fake clock they advance by hand); NULL
 *  restores the real one. Wakes the background thread. */
void _ak_reclaim_set_clock(uint64_t (*now_ms)(void));

/** The page delay in force at `now` (arenakit/reclaim.h): the set delay,
 *  or longer for a while after pages decommitted were taken again soon
 *  after (_ak_reclaim_page_refault). <= 0 as set. */
long _ak_reclaim_page_delay(uint64_t now);

/** Pages decommitted at `purged` are taken again at `now`: if that is soon
 *  after, the page delay in force doubles (up to 80 ms). */
void _ak_reclaim_page_refault(uint64_t purged, uint64_t now);

/** Milliseconds from `then` to `now` on the reclaim clock, 0 if `then` is
 *  later (a time read before a lock may precede a stamp another thread
 *  wrote under it: an unsigned difference would wrap). */
static inline uint64_t _ak_reclaim_since(uint64_t now, uint64_t then) { return now > then ? now - then : 0; }

/** The policy's steps for a spare that emptied at `since`, at time `now`:
 *  0 keep, 1 decommit, 2 release (`release_ok`: the owner may release). */
int _ak_reclaim_due(uint64_t since, uint64_t now, bool release_ok);

/** Passes over the registered sets so far, of the background thread and
 *  ak_reclaim_collect() (tests). */
size_t _ak_reclaim_thread_passes(void);
/** Background threads started so far (tests). */
size_t _ak_reclaim_thread_starts(void);

/** Wakes a sleeping background thread so it recomputes its deadlines (the
 *  delays or the clock changed). Takes the registry's lock. */
void _ak_reclaim_thread_signal(void);

/** Memory started to wait for a purge (a spare, a cached mapping, free
 *  pages of a segment nobody holds): in AK_BACKGROUND_AUTO, a thread is
 *  wanted if none runs. Atomics only, no lock: callable under any lock. */
void _ak_reclaim_wake(void);

/** Starts the background thread if a wake wanted one. Call where the
 *  caller holds none of the library's locks (starting a thread allocates:
 *  malloc may be entered again): at the end of the slow paths that put
 *  memory aside. One relaxed load when nothing is wanted. */
void _ak_reclaim_start_wanted(void);

/** A component's own policy step, run by each pass of the background
 *  thread (and ak_reclaim_collect) with no lock of the registry held:
 *  returns the reclaim clock (ms) at which it wants to run again, or
 *  UINT64_MAX when nothing of its memory waits. */
typedef uint64_t (*_ak_reclaim_tick_fn)(uint64_t now_ms);
/** Registers a tick (once per component; registering again is a no-op). */
void _ak_reclaim_register_tick(_ak_reclaim_tick_fn fn);

#endif /* AK_RECLAIM_H */
