/* SPDX-License-Identifier: MIT */
/* arenakit/prof.h - the sampled heap profiler: where the memory a program
 * holds was allocated, as a profile that `go tool pprof` reads.
 *
 * Each thread counts down a random number of bytes (exponentially
 * distributed, mean AK_PROF_SAMPLE, 512 KiB by default); the allocation
 * that takes the count below zero is sampled: its call stack (up to 64
 * frames), its size and, for pools and arenas, a label naming them are
 * recorded until the block is freed. A dump writes pprof's profile.proto
 * with four sample types, alloc_objects/count, alloc_space/bytes,
 * inuse_objects/count and inuse_space/bytes (the default), each sample
 * scaled by the inverse of its sampling probability, and the process's
 * mappings with their build ids, so that pprof symbolizes from the
 * binaries on disk:
 *
 *   AK_PROF=1 AK_PROF_DUMP=heap.%p.pb LD_PRELOAD=libarenakit-malloc.so prog
 *   go tool pprof -top prog heap.<pid>.pb
 *   go tool pprof -tagfocus=pool=sessions -top prog heap.<pid>.pb
 *
 * (scripts/heap_profile.sh does both steps and draws the call graph.)
 *
 * Environment, read once when the library loads (precedence: built-in
 * default < environment < the calls below; an invalid value is reported
 * on stderr with the variable's name and the default is kept):
 *   AK_PROF=1             start sampling at load (default 0: off)
 *   AK_PROF_SAMPLE=BYTES  mean bytes between samples (default 524288)
 *   AK_PROF_DUMP=PATH     write a profile to PATH at exit ("%p" = the pid)
 *   AK_PROF_INTERVAL=BYTES  also write one each time the estimated bytes in
 *                         use grow by BYTES past the last such dump, to
 *                         PATH.0001, PATH.0002, ... (PATH from AK_PROF_DUMP,
 *                         else ak-heap.%p.pb)
 *   AK_PROF_STACK=unwind|fp  how stacks are taken (default unwind)
 *
 * Memory: the profiler's tables come from the OS layer (never from
 * malloc) and are bounded: at most 16384 distinct stacks, 65536 distinct
 * return addresses, 262144 call-tree nodes (stacks share their outer
 * frames) and 65536 live sampled blocks; a sample past a bound is counted
 * in the stats instead (ak_prof_stats); docs/profiling.md has what the
 * tables take.
 *
 * What is sampled: every ak_malloc (and, under the drop-in, malloc, new,
 * ...) allocation; every arena's (the label arena=<ak_arena_options.name>;
 * an arena picks a start or stop up at its next slow path, clear or
 * restore); and the pools created while the profiler is on (pool=<name>):
 * such a pool takes the library's path for every call, its inline paths
 * off, for its whole life; a pool created while it is off is not sampled.
 *
 * Fork: the child starts with the parent's profile (its heap is a copy of
 * the parent's, sampled blocks included) and keeps sampling as the parent
 * did; name dumps with "%p" so that the two do not write the same file.
 * Thread exit loses nothing (records are process-wide). The library is
 * never unloaded (linked -z nodelete), so dlclose needs nothing.
 *
 * Thread-safety: every function may be called from any thread at any time.
 * None is async-signal-safe. Errors: -1 with errno, and ak_last_error()
 * naming the call and the reason. */
#ifndef ARENAKIT_PROF_H
#define ARENAKIT_PROF_H

#include <stdbool.h>
#include <stddef.h>

#include "arenakit/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Starts sampling (again). What was recorded before is kept. Each thread
 *  picks the change up at its next sample or allocator slow path. The
 *  first start may allocate (it loads the unwinder, dlopen): do not call
 *  it from a malloc hook or a signal handler. 0, or -1 with ENOMEM when
 *  the profiler's tables cannot be mapped. */
AK_API int ak_prof_start(void);

/** Stops sampling; the records of blocks still live are kept (their frees
 *  still remove them), so a dump after stop shows what the sampled blocks
 *  still hold. A thread that is inside a sample when stop returns may
 *  still add that one. Always 0. */
AK_API int ak_prof_stop(void);

/** True while sampling is on. */
AK_API bool ak_prof_active(void);

/** Writes the profile to `path` ("%p" is replaced by the pid), created or
 *  truncated with mode 0644 (through a temporary file renamed into place,
 *  so a reader never sees half a profile). May be called while other
 *  threads allocate and free: the tables are copied under the profiler's
 *  locks and written afterwards. Allocates nothing through malloc.
 *  0, or -1 with errno: EINVAL (path NULL or empty, or over 4095 bytes
 *  once expanded), ENOMEM, or the error of open/write/rename (then the
 *  message names the path). */
AK_API int ak_prof_dump(const char *path);

/** Sets the path of the exit dump and of the interval dumps (AK_PROF_DUMP;
 *  "%p" = the pid; NULL: no dump at exit). The text is copied. 0, or -1
 *  with EINVAL when it is empty or over 4095 bytes. */
AK_API int ak_prof_set_dump_path(const char *path);

/** Run-time options; each is read from the environment variable of its
 *  name once at load. */
typedef enum ak_prof_option AK_ENUM_INT {
  AK_PROF_OPTION_SAMPLE = 0,   /**< AK_PROF_SAMPLE: mean bytes between
                                    samples, 1 .. 2^40 (default 524288) */
  AK_PROF_OPTION_INTERVAL = 1, /**< AK_PROF_INTERVAL: bytes of growth in use
                                    between interval dumps (0: none) */
  AK_PROF_OPTION_STACK = 2,    /**< AK_PROF_STACK: AK_PROF_STACK_UNWIND or
                                    AK_PROF_STACK_FP */
  AK_PROF_OPTION_COUNT_ = 3
} ak_prof_option;

/** Values of AK_PROF_OPTION_STACK: the libgcc unwinder (_Unwind_Backtrace,
 *  from libgcc_s.so.1 loaded at the first start: every frame of code built
 *  with unwind tables, that is nearly all code, frame pointers or not), or
 *  the frame-pointer chain (faster, but stops or skips frames in code built
 *  without frame pointers, which most distribution binaries are). Where
 *  the unwinder cannot be loaded (a static program) frame pointers are
 *  used. A program that registers its own unwind tables
 *  (__register_frame, as JIT compilers do) should use
 *  AK_PROF_STACK_FP: libgcc's registry takes a lock that its malloc
 *  calls hold. */
enum { AK_PROF_STACK_UNWIND = 0, AK_PROF_STACK_FP = 1 };

/** Reads an option's value (-1 for an unknown option, with EINVAL). */
AK_API long ak_prof_option_get(ak_prof_option o);

/** Sets an option; a new period reaches each thread at its next sample or
 *  allocator slow path. 0, or -1 with EINVAL (unknown option, value out
 *  of range). */
AK_API int ak_prof_option_set(ak_prof_option o, long value);

/** The profiler's counters (ak_prof_stats_get). Version 1. */
typedef struct ak_prof_stats {
  unsigned version;      /**< AK_PROF_STATS_VERSION */
  bool active;           /**< sampling now */
  int stack_method;      /**< AK_PROF_STACK_* in use */
  size_t sample_bytes;   /**< mean bytes between samples */
  size_t samples;        /**< samples recorded, ever */
  size_t live_samples;   /**< sampled blocks not freed yet */
  size_t stacks;         /**< distinct stacks kept */
  size_t frames;         /**< distinct return addresses in them */
  size_t nodes;          /**< nodes of the call tree that holds them
                              (stacks share their outer frames' nodes) */
  size_t labels;         /**< distinct labels */
  size_t dropped_stacks; /**< samples whose stack did not fit (counted
                              under an empty stack in the profile) */
  size_t dropped_live;   /**< samples counted as allocated but not kept
                              as live (the live set was full) */
  size_t dropped_labels; /**< samples recorded unlabelled (label table
                              full) */
  size_t unknown_frees;  /**< forgets of a block not in the live set */
  size_t dumps;          /**< profiles written */
  size_t dump_errors;    /**< exit and interval dumps that failed */
  size_t memory;         /**< bytes the profiler holds: the tables it has
                              mapped, and its stack walk's cache of unwind
                              rules (library data) once the walk used it */
  size_t inuse_bytes;    /**< estimated bytes held by sampled live blocks,
                              unsampled (what inuse_space sums to) */
  size_t alloc_bytes;    /**< estimated bytes allocated, unsampled */
} ak_prof_stats;

#define AK_PROF_STATS_VERSION 1u

/** Fills `out` (a consistent snapshot, taken under the profiler's lock);
 *  does nothing with EINVAL if `out` is NULL. Allocates nothing. */
AK_API void ak_prof_stats_get(ak_prof_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* ARENAKIT_PROF_H */
