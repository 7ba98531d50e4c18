/* SPDX-License-Identifier: MIT */
/* os_mem.h - the OS memory layer (internal).
 *
 * The only code in arenakit that calls mmap, munmap, madvise, ftruncate,
 * fallocate, flock or membarrier.
 * Every function is thread-safe. Errors: NULL or -1 with errno set to what
 * the system call said (ENOMEM when the kernel refuses memory).
 *
 * Tests can replace the system calls with their own (fault injection) via
 * _ak_os_set_hooks(); the layer keeps counters of what is mapped so that
 * tests can prove nothing leaks. */
#ifndef AK_OS_MEM_H
#define AK_OS_MEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arenakit/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The system calls behind the layer; a test may replace any of them.
 *  `ctx` is passed back unchanged. */
typedef struct _ak_os_hooks {
  /** Map `size` bytes of zeroed, read-write anonymous memory (mmap
   *  semantics: page-aligned result, NULL + errno on failure). `hint`,
   *  if not NULL, is where the mapping would best start (mmap's advisory
   *  address: used if that range is free, never replacing a mapping). */
  void *(*map)(void *hint, size_t size, void *ctx);
  /** Unmap a range the hook's map returned (or part of one). 0 or -1+errno. */
  int (*unmap)(void *p, size_t size, void *ctx);
  /** Give the pages of a range back, keep the range mapped. 0 or -1+errno. */
  int (*decommit)(void *p, size_t size, void *ctx);
  void *ctx;
} _ak_os_hooks;

/** Counters of the OS layer (all mappings made through it). */
typedef struct _ak_os_counters {
  size_t mapped_bytes; /**< bytes currently mapped */
  size_t mappings;     /**< live mappings */
  size_t map_calls;    /**< successful map requests since start */
  size_t failed_calls; /**< map requests that failed */
} _ak_os_counters;

/** Installs `hooks` (NULL restores the system calls). Not for use while
 *  other threads allocate. Returns the hooks in force before. */
_ak_os_hooks _ak_os_set_hooks(const _ak_os_hooks *hooks);

/** The default hooks (the real system calls). */
_ak_os_hooks _ak_os_default_hooks(void);

/** Reads the counters. */
void _ak_os_get_counters(_ak_os_counters *out);

/** The system page size (a power of two). */
size_t _ak_os_page_size(void);

/** Tests only: makes the layer report `ps` (a power of two, a multiple of
 *  the system's page size) as the page size, as on a system with 16 KiB or
 *  64 KiB pages; 0 restores the system's. Call it before anything is
 *  mapped (in a fresh process): the components size their guard pages and
 *  round their decommits by it. Returns the page size in force before. */
size_t _ak_os_set_page_size(size_t ps);

/** Maps `size` bytes (rounded up to the page size) aligned to `align`
 *  (a power of two; values up to the page size cost nothing; a larger one
 *  is asked for at a hint from a region of aligned mappings; the layer
 *  over-maps and trims only without a hint (over 1 GiB, or hints stopped)
 *  or when the kernel places it elsewhere, unaligned). Zero-filled,
 *  read-write. NULL + errno on failure (ENOMEM also when size + align
 *  overflows). */
void *_ak_os_alloc(size_t size, size_t align);

/** Unmaps what _ak_os_alloc returned; `size` as passed to it. */
void _ak_os_free(void *p, size_t size);

/** Resizes a mapping from _ak_os_alloc (old_size as passed to it) to
 *  new_size, keeping its contents without copying: in place when the
 *  address space allows, else moved (mremap) to a new range aligned to
 *  `align`; a range that _ak_os_move_into left in two of the kernel's
 *  mappings is copied instead (mremap moves one at a time). Returns the
 *  (possibly new) address, or NULL + errno with the old mapping
 *  untouched. */
void *_ak_os_remap(void *p, size_t old_size, size_t new_size, size_t align);

/** Moves the pages of mapping [p, p + size) from _ak_os_alloc onto
 *  [dst, dst + size), the start of another such mapping at least `size`
 *  long, without copying (mremap): the pages that were at the start of
 *  `dst` are discarded, those after dst + size stay as they are, and
 *  [p, p + size) is unmapped. 0, or -1 + errno with both untouched. */
int _ak_os_move_into(void *p, size_t size, void *dst);

/** Returns the physical pages of [p, p + size) to the OS; the range stays
 *  mapped and reads as zero afterwards. `p` page-aligned. 0 or -1 + errno. */
int _ak_os_decommit(void *p, size_t size);

/** Makes [p, p + size) inaccessible (guard pages: any access faults) or,
 *  with `on` false, read-write again. `p` and `size` page-aligned. 0 or
 *  -1 + errno (mprotect's). */
int _ak_os_guard(void *p, size_t size, bool on);

/** 64 bits from the kernel's random source (getrandom, non-blocking);
 *  0 if it has none to give. Seeds the hardened build's generator. */
uint64_t _ak_os_entropy(void);

/** Rounds `n` up to a multiple of the page size; 0 if that overflows. */
size_t _ak_os_round_page(size_t n);

/** Fraction of [p, p + size) resident in RAM, in bytes (mincore); 0 on
 *  error. `p` page-aligned. Without mincore (AK_HAVE_MINCORE 0): the whole
 *  range, rounded to pages. */
size_t _ak_os_resident(const void *p, size_t size);

/** Bytes one request may still commit: the lower of the overcommit
 *  policy's bound (strict policy, overcommit_memory 2: CommitLimit -
 *  Committed_AS; otherwise RAM + swap, the most a mapping can ever make
 *  resident) and what RLIMIT_AS leaves beside the address space in use.
 *  SIZE_MAX where nothing can be read. Reads /proc: for up-front checks
 *  of large requests, not for every allocation. Thread-safe. */
size_t _ak_os_commit_limit(void);

/* ---- C-heap backing ------------------------------------------------------ */

/** aligned_alloc(align, size) from the C library, not zero-filled (the
 *  pool writes every slot before it reads it, and sets up its headers);
 *  NULL + errno. Counted like mappings. */
void *_ak_os_heap_alloc(size_t size, size_t align);

/** Frees what _ak_os_heap_alloc returned. */
void _ak_os_heap_free(void *p, size_t size);

/* ---- file backing ----------------------------------------------------------
 * A file whose contents are mapped MAP_SHARED, one aligned window per slab. */

/** Creates the file at `path` for read-write (or opens it, following
 *  links), checks that it is a regular file, takes an exclusive advisory
 *  lock on it (flock: one per open file, so a second pool in the same
 *  process is refused too), truncates it to 0 and proves that its file
 *  system can do what the backing needs: map a page shared, then allocate
 *  its blocks (posix_fallocate); the file is left empty. Returns the
 *  descriptor, or -1 + errno with `*why` the reason for the message
 *  ("file 'PATH' <why>"), NULL when open itself failed (the message says
 *  the file cannot be created): EINVAL "is not a regular file" (a FIFO, a
 *  device, a directory opened somehow, a socket; also through a link;
 *  nothing was truncated); EBUSY "is in use by another pool (locked)"
 *  (nothing was truncated); the probe's errno with "is on a file system
 *  that cannot map it shared" (ENODEV: /proc and sysfs files) or "... that
 *  cannot allocate blocks for it". */
int _ak_os_file_open(const char *path, const char **why);

/** Sets the file's size to `size` bytes (ftruncate); used to shrink it.
 *  0 or -1 + errno. */
int _ak_os_file_resize(int fd, size_t size);

/** Allocates the blocks of [offset, offset + size) of the file for real
 *  (posix_fallocate), growing the file if it ends before: a full file
 *  system answers ENOSPC here, never with SIGBUS at the first store into a
 *  page it cannot back. 0 or -1 + errno. */
int _ak_os_file_alloc(int fd, size_t offset, size_t size);

/** Bytes the file system of `fd` has free for this user (fstatvfs);
 *  SIZE_MAX if unknown. */
size_t _ak_os_file_room(int fd);

/** Maps [offset, offset + size) of the file read-write and shared at an
 *  address aligned to `align` (a power of two). NULL + errno. */
void *_ak_os_file_map(int fd, size_t offset, size_t size, size_t align);

/** Unmaps a window from _ak_os_file_map and punches the range out of the
 *  file, so the disk and page cache are given back. */
void _ak_os_file_unmap(int fd, void *p, size_t offset, size_t size);

/** Gives the pages of [p, p + size), mapped from [offset, offset + size) of
 *  the file, back while the window stays mapped: the range is punched out
 *  of the file (which drops it from the page cache and every mapping), so
 *  mincore and the file's blocks show it gone; it reads as zero after. A
 *  store into it needs _ak_os_file_alloc first (or it may fault on a full
 *  file system). `p`, `offset`, `size` page-aligned. 0 or -1 + errno. */
int _ak_os_file_decommit(int fd, void *p, size_t offset, size_t size);

/** Closes the descriptor. */
void _ak_os_file_close(int fd);

/* ---- process-wide barriers (membarrier(2)) ---------------------------------- */

/** Registers the process for _ak_os_barrier (MEMBARRIER_CMD_PRIVATE_EXPEDITED).
 *  False when the kernel, an emulator or a seccomp filter does not offer it;
 *  call once, before the first _ak_os_barrier. */
bool _ak_os_barrier_register(void);

/** A full memory barrier on every CPU that runs a thread of the process,
 *  after a successful _ak_os_barrier_register. 0 or -1 + errno. */
int _ak_os_barrier(void);

/* ---- fault injection (tests only) ------------------------------------------
 * The layer can be told to fail the Nth call of one kind, once, with a given
 * errno, before the system is asked (nothing is mapped, resized or changed).
 * What counts as which kind:
 *   _AK_OS_FAULT_RESERVE  every new reservation: _ak_os_alloc (also the
 *                         aligned window that _ak_os_file_map reserves and
 *                         the destination a moving _ak_os_remap reserves)
 *                         and _ak_os_heap_alloc (C-heap backing). Argument
 *                         errors (size 0, bad alignment, overflow) are
 *                         reported before the count and do not count.
 *   _AK_OS_FAULT_COMMIT   making memory of an existing mapping usable:
 *                         _ak_os_remap when it grows a mapping, and
 *                         _ak_os_guard(p, n, false) (guard pages made
 *                         read-write again). Shrinking remaps, decommits
 *                         and guard(on) do not count.
 *   _AK_OS_FAULT_FILE     _ak_os_file_resize (any size), _ak_os_file_alloc
 *                         and _ak_os_file_map.
 * Each kind has its own countdown; kinds are independent. Counters are
 * atomics, but arming is meant for one test thread at a time. */
typedef enum _ak_os_fault {
  _AK_OS_FAULT_RESERVE = 0,
  _AK_OS_FAULT_COMMIT = 1,
  _AK_OS_FAULT_FILE = 2,
  _AK_OS_FAULT_KINDS_ = 3
} _ak_os_fault;

/** Arms (n > 0) or disarms (n == 0) fault injection for `kind`: the Nth
 *  call of that kind from now on fails once with errno `err` (0 = ENOMEM),
 *  then calls succeed again. Resets the kind's call count. */
void _ak_os_fail_nth(_ak_os_fault kind, size_t n, int err);

/** Calls of `kind` seen since it was last armed or disarmed. */
size_t _ak_os_fault_calls(_ak_os_fault kind);

/** Injected failures of `kind` since the process started. */
size_t _ak_os_faults_fired(_ak_os_fault kind);

/** Older spelling of _ak_os_fail_nth(_AK_OS_FAULT_FILE, nth, err): when
 *  > 0, the Nth following file resize or file map fails with `err`
 *  (0 = off). */
void _ak_os_fail_file_op(int nth, int err);

#ifdef __cplusplus
}
#endif

#endif /* AK_OS_MEM_H */
