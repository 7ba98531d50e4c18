/* SPDX-License-Identifier: MIT */
/* stack.c - taking a sample's call stack without allocating and without
 * a lock a malloc could hold: the unwinder or the frame-pointer chain
 * (docs/profiling.md has the measurements behind the default).
 *
 * The unwinder walks the unwind tables (.eh_frame) that nearly all code
 * carries, frame pointers or not: first with its fast walk (cfi.c, rules
 * cached per return address), and where that gives up with libgcc's
 * _Unwind_Backtrace for the whole stack. libgcc's unwinder is found
 * without a link dependency: dlopen("libgcc_s.so.1") + dlsym at the first
 * start (outside any malloc call: dlopen allocates), through weak
 * references to dlopen and dlsym, so a static program, which has no
 * dynamic loader, links without them and falls back to frame pointers.
 * libgcc finds the tables of a pc through the loader's _dl_find_object
 * (glibc 2.35 and later: no lock, no allocation); only frames that a
 * program registered itself (__register_frame, JIT compilers) go through
 * a libgcc mutex that its malloc calls can hold.
 *
 * The frame-pointer walk reads (saved frame pointer, return address)
 * pairs up the stack. It stops at the first pair outside the thread's
 * stack mapping (found once per thread in /proc/self/maps and kept in
 * TLS), misaligned or not strictly above the last, so garbage in a frame
 * pointer register (code built without frame pointers) ends the walk
 * instead of faulting.
 *
 * Both store return addresses; each stored pc is the return address
 * minus 1, inside the call instruction, so that a symbolizer names the
 * line of the call. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/assert.h"
#include "prof/prof_internal.h"

/* Weak: resolved from the C library where the program has a dynamic
 * loader (dlopen is in libc.so.6 since glibc 2.34), NULL in a static
 * program. */
#pragma weak dlopen
#pragma weak dlsym

typedef int (*unwind_trace_fn)(int (*)(void *, void *), void *);
typedef uintptr_t (*unwind_ip_fn)(void *);

static unwind_trace_fn unwind_backtrace; /* set once, read with acquire loads */
static unwind_ip_fn unwind_get_ip;
static uintptr_t own_lo, own_hi; /* this shared object's text; 0, 0 when in the program
                                    (set once; relaxed atomic accesses) */

enum { URC_NO_REASON = 0, URC_END_OF_STACK = 5 };

/* The calling thread's stack mapping, for the frame-pointer walk. */
static __thread struct { uintptr_t lo, hi; } thread_stack __attribute__((tls_model("initial-exec")));

/* ---- the two walks ------------------------------------------------------------ */

typedef struct walk {
  uintptr_t *buf;
  unsigned n, max;
} walk;

static int unwind_step(void *ctx, void *arg) {
  walk *w = (walk *)arg;
  uintptr_t ip = unwind_get_ip(ctx);
  if (ip == 0 || w->n >= w->max) return URC_END_OF_STACK;
  w->buf[w->n++] = ip;
  return URC_NO_REASON;
}

static unsigned walk_unwind(unwind_trace_fn trace, uintptr_t *buf, unsigned max) {
  walk w = {buf, 0, max};
  trace(unwind_step, &w);
  return w.n;
}

/* The end of the stack mapping that holds `sp` (the calling thread's,
 * kept in TLS); 0 when /proc/self/maps does not show one. */
/* Stack mappings found before, by any thread: a thread that starts on a
 * stack block glibc kept from an exited thread (its stack cache) finds the
 * bounds here instead of reading /proc/self/maps at its first sample. An entry stands for a mapping only
 * for a thread whose stack pointer and thread pointer both lie in it:
 * glibc keeps a thread's TCB at the top of its stack block, so both lying
 * in the range seen before means the thread runs on that block. The main
 * thread's TCB is elsewhere: it reads the maps, once. One word an entry
 * (first page, page count), written and read atomically. x86-64 only. */
enum { KNOWN_STACKS = 32 };
static _Atomic uint64_t known_stacks[KNOWN_STACKS];
static _Atomic unsigned known_next;

static uintptr_t thread_pointer(void) {
#if defined(__x86_64__)
  uintptr_t tp;
  __asm__("mov %%fs:0, %0" : "=r"(tp)); /* the TCB's pointer to itself */
  return tp;
#else
  return 0;
#endif
}

static bool known_stack_find(uintptr_t sp, uintptr_t *lo, uintptr_t *hi) {
  uintptr_t tp = thread_pointer();
  if (!tp) return false;
  for (unsigned i = 0; i < KNOWN_STACKS; i++) {
    uint64_t w = atomic_load_explicit(&known_stacks[i], memory_order_relaxed);
    uintptr_t a = (uintptr_t)(w >> 29) << 12, b = a + ((uintptr_t)(w & ((1u << 29) - 1)) << 12);
    if (w && sp >= a && sp < b && tp >= a && tp < b) {
      *lo = a;
      *hi = b;
      return true;
    }
  }
  return false;
}

static void known_stack_add(uintptr_t lo, uintptr_t hi) {
  uintptr_t tp = thread_pointer();
  if (!tp || tp < lo || tp >= hi || (lo & 4095) || (hi & 4095) || lo >> 47 || (hi - lo) >> 41) return;
  uint64_t w = ((uint64_t)(lo >> 12) << 29) | (uint64_t)((hi - lo) >> 12);
  unsigned i = atomic_fetch_add_explicit(&known_next, 1, memory_order_relaxed) % KNOWN_STACKS;
  atomic_store_explicit(&known_stacks[i], w, memory_order_relaxed);
}

static uintptr_t stack_end(uintptr_t sp) {
  if (sp < thread_stack.lo || sp >= thread_stack.hi) {
    uintptr_t start, end;
    if (!known_stack_find(sp, &start, &end)) {
      if (!_ak_prof_maps_find(sp, &start, &end, NULL)) return 0;
      known_stack_add(start, end);
    }
    thread_stack.lo = start;
    thread_stack.hi = end;
  }
  return thread_stack.hi;
}

/* Reads the stack through frame pointers. */
AK_PROF_READS_STACK static unsigned walk_fp(uintptr_t *buf, unsigned max) {
  uintptr_t *fp = (uintptr_t *)__builtin_frame_address(0);
  uintptr_t lo = (uintptr_t)fp;
  uintptr_t hi = stack_end(lo);
  if (!hi) return 0;
  unsigned n = 0;
  while (n < max) {
    uintptr_t at = (uintptr_t)fp;
    if ((at & (sizeof(uintptr_t) - 1)) != 0 || at < lo || at > hi - 2 * sizeof(uintptr_t)) break;
    uintptr_t ra = fp[1];
    if (ra == 0) break;
    buf[n++] = ra;
    lo = at + 2 * sizeof(uintptr_t);
    fp = (uintptr_t *)fp[0];
  }
  return n;
}

/* The unwinder's fast walk (cfi.c) from this frame: its pc, rsp and rbp
 * read at one instruction, whose rule the walk finds like any other.
 * -1 where the walk gives up (the caller then uses libgcc's). */
__attribute__((noinline)) static int walk_cfi(uintptr_t *buf, unsigned max) {
#if defined(__x86_64__)
  uintptr_t pc, sp, bp;
  __asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2" : "=&r"(pc), "=&r"(sp), "=&r"(bp));
  uintptr_t hi = stack_end(sp);
  if (!hi) return -1;
  int n = _ak_prof_cfi_walk(pc + 1, sp, bp, sp, hi, buf, max); /* pc + 1: the walk looks at "ra - 1" */
  __asm__ volatile("" ::: "memory");                           /* no tail call: this frame stays */
  return n;
#else
  (void)buf, (void)max;
  return -1;
#endif
}

/* ---- capture --------------------------------------------------------------------- */

__attribute__((noinline)) unsigned _ak_prof_capture(uintptr_t *pcs, unsigned max, int method,
                                                    uintptr_t from) {
  enum { SLACK = 16 }; /* frames of the profiler itself, above `from` */
  uintptr_t buf[AK_PROF_MAX_DEPTH + SLACK];
  if (from == 0) from = (uintptr_t)__builtin_return_address(0);
  if (max > AK_PROF_MAX_DEPTH) max = AK_PROF_MAX_DEPTH;
  unwind_trace_fn trace = __atomic_load_n(&unwind_backtrace, __ATOMIC_ACQUIRE);
  int fast =
      (method == AK_PROF_STACK_UNWIND || method == AK_PROF_STACK_CFI) ? walk_cfi(buf, max + SLACK) : -1;
  unsigned n;
  if (fast >= 0)
    n = (unsigned)fast;
  else if (method == AK_PROF_STACK_CFI)
    n = 0;
  else if ((method == AK_PROF_STACK_UNWIND || method == AK_PROF_STACK_LIBGCC) && trace)
    n = walk_unwind(trace, buf, max + SLACK); /* where the fast walk gives up */
  else
    n = walk_fp(buf, max + SLACK);
  unsigned i = 0;
  while (i < n && buf[i] != from) i++;
  if (i == n) i = 0; /* `from` not seen (a frame without unwind info): keep all */
  uintptr_t lo = __atomic_load_n(&own_lo, __ATOMIC_RELAXED), hi = __atomic_load_n(&own_hi, __ATOMIC_RELAXED);
  while (i < n && buf[i] >= lo && buf[i] < hi) i++;
  unsigned k = 0;
  for (; i < n && k < max; i++) pcs[k++] = buf[i] - 1;
  return k;
}

/* ---- setup ------------------------------------------------------------------------- */

static void find_own_text(void) {
  static bool done;
  if (done) return;
  done = true;
  uintptr_t start, end;
  bool is_main = true;
  if (_ak_prof_maps_find((uintptr_t)&_ak_prof_capture, &start, &end, &is_main) && !is_main) {
    __atomic_store_n(&own_lo, start, __ATOMIC_RELAXED);
    __atomic_store_n(&own_hi, end, __ATOMIC_RELAXED);
  }
}

int _ak_prof_stack_setup(int method) {
  find_own_text();
  if (method != AK_PROF_STACK_UNWIND) return method;
  if (__atomic_load_n(&unwind_backtrace, __ATOMIC_ACQUIRE)) return method;
  if (!dlopen || !dlsym) return AK_PROF_STACK_FP;
  void *lib = dlopen("libgcc_s.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return AK_PROF_STACK_FP;
  unwind_trace_fn trace = (unwind_trace_fn)(uintptr_t)dlsym(lib, "_Unwind_Backtrace");
  unwind_ip_fn ip = (unwind_ip_fn)(uintptr_t)dlsym(lib, "_Unwind_GetIP");
  if (!trace || !ip) return AK_PROF_STACK_FP;
  unwind_get_ip = ip;
  __atomic_store_n(&unwind_backtrace, trace, __ATOMIC_RELEASE);
  return method;
}
