/* SPDX-License-Identifier: MIT */
/* malloc_override.c - the drop-in front end: libarenakit-malloc.so exports
 * the C library's allocation functions and every C++ operator new/delete,
 * each forwarding to the ak_ heap. Works with LD_PRELOAD and when linked.
 *
 * The C++ operators are defined here in C under their mangled names, so
 * the library does not depend on libstdc++: operator new's failure path
 * (new-handler loop, then std::bad_alloc) calls libstdc++ through weak
 * references that only a C++ program resolves. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

#include "arenakit/malloc.h"

#define EXPORT __attribute__((visibility("default")))

/* The shim's one call below the public malloc API: the base layer's
 * fatal-error path (src/common/error.h: "arenakit: TEXT" on stderr, then
 * abort()). The shim's include root holds arenakit/malloc.h only, so the
 * call is declared here, with the same signature. */
_Noreturn void _ak_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), cold, noinline));

/* The malloc's sized free (src/malloc/free_sized.c): checks the size
 * against the block in the hardened build, naming `call` if it does not
 * match; a plain free otherwise. `exact`: the block came from operator new,
 * so it is of the size class the size maps to. */
void _ak_free_sized_call(const char *call, void *p, size_t align, size_t n, bool exact);

/* malloc, free, calloc, realloc, reallocarray, posix_memalign,
 * aligned_alloc, memalign and malloc_usable_size are aliases defined in
 * src/malloc/alloc.c (built with AK_OVERRIDE for this library); glibc's
 * malloc_trim, mallinfo, mallinfo2 and malloc_info are in malloc_glibc.c. */

static size_t page_size(void) {
  long ps = sysconf(_SC_PAGESIZE);
  return ps > 0 ? (size_t)ps : 4096;
}

EXPORT void *valloc(size_t n) { return ak_memalign(page_size(), n); }

EXPORT void *pvalloc(size_t n) {
  size_t ps = page_size();
  if (n > SIZE_MAX - ps) {
    errno = ENOMEM;
    return NULL;
  }
  return ak_memalign(ps, n ? (n + ps - 1) & ~(ps - 1) : ps);
}

/* glibc's internal names of the same functions, which some programs and
 * libraries call directly (to reach "the real malloc" from a hook of their
 * own): they are arenakit's too, so a block from __libc_malloc can go to
 * free() and the other way round. */
EXPORT void *__libc_malloc(size_t n) { return ak_malloc(n); }
EXPORT void __libc_free(void *p) { ak_free(p); }
EXPORT void *__libc_calloc(size_t count, size_t size) { return ak_calloc(count, size); }
EXPORT void *__libc_realloc(void *p, size_t n) { return ak_realloc(p, n); }
EXPORT void *__libc_memalign(size_t align, size_t n) { return ak_memalign(align, n); }
EXPORT void *__libc_valloc(size_t n) { return valloc(n); }
EXPORT void *__libc_pvalloc(size_t n) { return pvalloc(n); }

/* C23's sized frees: the size is checked in the hardened build. */
EXPORT void free_sized(void *p, size_t n) { _ak_free_sized_call("free_sized", p, 0, n, false); }
EXPORT void free_aligned_sized(void *p, size_t align, size_t n) {
  _ak_free_sized_call("free_aligned_sized", p, align, n, false);
}

/* ---- C++ operators ---------------------------------------------------------------- */

typedef void (*new_handler_fn)(void);
extern new_handler_fn _ZSt15get_new_handlerv(void) __attribute__((weak));   /* std::get_new_handler() */
extern void _ZSt17__throw_bad_allocv(void) __attribute__((weak, noreturn)); /* std::__throw_bad_alloc() */

/* operator new: retry through the new-handler, then throw std::bad_alloc
 * (a program without libstdc++ that calls it by its mangled name cannot
 * catch anything: it gets the fatal message instead). */
static void *new_throwing(size_t n, size_t align) {
  for (;;) {
    void *p = align ? ak_aligned_alloc(align, n) : ak_malloc(n);
    if (p) return p;
    new_handler_fn h = _ZSt15get_new_handlerv ? _ZSt15get_new_handlerv() : NULL;
    if (!h) {
      if (_ZSt17__throw_bad_allocv) _ZSt17__throw_bad_allocv();
      _ak_fatal("operator new(%zu): out of memory, and no C++ runtime to throw std::bad_alloc", n);
    }
    h();
  }
}

/* nothrow forms: the same loop, but NULL instead of the exception. (A
 * new-handler that throws is the program's business, as in libstdc++.) */
static void *new_nothrow(size_t n, size_t align) {
  for (;;) {
    void *p = align ? ak_aligned_alloc(align, n) : ak_malloc(n);
    if (p) return p;
    new_handler_fn h = _ZSt15get_new_handlerv ? _ZSt15get_new_handlerv() : NULL;
    if (!h) return NULL;
    h();
  }
}

/* operator new / new[] (size), (size, nothrow), (size, align), (size, align, nothrow) */
EXPORT void *op_new(size_t n) __asm__("_Znwm");
EXPORT void *op_new_arr(size_t n) __asm__("_Znam");
EXPORT void *op_new_nt(size_t n, const void *nt) __asm__("_ZnwmRKSt9nothrow_t");
EXPORT void *op_new_arr_nt(size_t n, const void *nt) __asm__("_ZnamRKSt9nothrow_t");
EXPORT void *op_new_al(size_t n, size_t al) __asm__("_ZnwmSt11align_val_t");
EXPORT void *op_new_arr_al(size_t n, size_t al) __asm__("_ZnamSt11align_val_t");
EXPORT void *op_new_al_nt(size_t n, size_t al, const void *nt) __asm__("_ZnwmSt11align_val_tRKSt9nothrow_t");
EXPORT void *op_new_arr_al_nt(size_t n, size_t al,
                              const void *nt) __asm__("_ZnamSt11align_val_tRKSt9nothrow_t");

void *op_new(size_t n) { return new_throwing(n, 0); }
void *op_new_arr(size_t n) { return new_throwing(n, 0); }
void *op_new_nt(size_t n, const void *nt) {
  (void)nt;
  return new_nothrow(n, 0);
}
void *op_new_arr_nt(size_t n, const void *nt) {
  (void)nt;
  return new_nothrow(n, 0);
}
void *op_new_al(size_t n, size_t al) { return new_throwing(n, al); }
void *op_new_arr_al(size_t n, size_t al) { return new_throwing(n, al); }
void *op_new_al_nt(size_t n, size_t al, const void *nt) {
  (void)nt;
  return new_nothrow(n, al);
}
void *op_new_arr_al_nt(size_t n, size_t al, const void *nt) {
  (void)nt;
  return new_nothrow(n, al);
}

/* operator delete / delete[]: plain, sized, aligned, sized+aligned, nothrow. */
EXPORT void op_del(void *p) __asm__("_ZdlPv");
EXPORT void op_del_arr(void *p) __asm__("_ZdaPv");
EXPORT void op_del_sz(void *p, size_t n) __asm__("_ZdlPvm");
EXPORT void op_del_arr_sz(void *p, size_t n) __asm__("_ZdaPvm");
EXPORT void op_del_al(void *p, size_t al) __asm__("_ZdlPvSt11align_val_t");
EXPORT void op_del_arr_al(void *p, size_t al) __asm__("_ZdaPvSt11align_val_t");
EXPORT void op_del_sz_al(void *p, size_t n, size_t al) __asm__("_ZdlPvmSt11align_val_t");
EXPORT void op_del_arr_sz_al(void *p, size_t n, size_t al) __asm__("_ZdaPvmSt11align_val_t");
EXPORT void op_del_nt(void *p, const void *nt) __asm__("_ZdlPvRKSt9nothrow_t");
EXPORT void op_del_arr_nt(void *p, const void *nt) __asm__("_ZdaPvRKSt9nothrow_t");
EXPORT void op_del_al_nt(void *p, size_t al, const void *nt) __asm__("_ZdlPvSt11align_val_tRKSt9nothrow_t");
EXPORT void op_del_arr_al_nt(void *p, size_t al,
                             const void *nt) __asm__("_ZdaPvSt11align_val_tRKSt9nothrow_t");

void op_del(void *p) { ak_free(p); }
void op_del_arr(void *p) { ak_free(p); }
void op_del_sz(void *p, size_t n) { _ak_free_sized_call("operator delete(void*, size_t)", p, 0, n, true); }
void op_del_arr_sz(void *p, size_t n) {
  _ak_free_sized_call("operator delete[](void*, size_t)", p, 0, n, true);
}
void op_del_al(void *p, size_t al) {
  (void)al;
  ak_free(p);
}
void op_del_arr_al(void *p, size_t al) {
  (void)al;
  ak_free(p);
}
void op_del_sz_al(void *p, size_t n, size_t al) {
  _ak_free_sized_call("operator delete(void*, size_t, align_val_t)", p, al, n, true);
}
void op_del_arr_sz_al(void *p, size_t n, size_t al) {
  _ak_free_sized_call("operator delete[](void*, size_t, align_val_t)", p, al, n, true);
}
void op_del_nt(void *p, const void *nt) {
  (void)nt;
  ak_free(p);
}
void op_del_arr_nt(void *p, const void *nt) {
  (void)nt;
  ak_free(p);
}
void op_del_al_nt(void *p, size_t al, const void *nt) {
  (void)al;
  (void)nt;
  ak_free(p);
}
void op_del_arr_al_nt(void *p, size_t al, const void *nt) {
  (void)al;
  (void)nt;
  ak_free(p);
}
