/* SPDX-License-Identifier: MIT */
/* consumer.h - shared declarations of the consumer program used by
 * tests/consumer/run.sh. The program is several translation units (C and
 * C++) that all include the arenakit headers and call ak_arena_alloc(), so
 * that linking it proves the inline fast path needs no external definition
 * (the C99 `extern inline` trap). */
#ifndef AK_CONSUMER_H
#define AK_CONSUMER_H

#include <stdio.h>

#include <arenakit/arenakit.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Prints a failure and makes the enclosing function return 1. */
#define CONSUMER_CHECK(cond)                                                                          \
  do {                                                                                                \
    if (!(cond)) {                                                                                    \
      fprintf(stderr, "%s:%d: check failed: %s (ak_last_error: \"%s\")\n", __FILE__, __LINE__, #cond, \
              ak_last_error());                                                                       \
      return 1;                                                                                       \
    }                                                                                                 \
  } while (0)

/* Another C translation unit: allocates from `a` with several alignments
 * and hands back a string built in the arena. Returns 0 on success. */
int consumer_part_c(ak_arena *a, const char **out_str);

/* Checks a pointer allocated by another translation unit. */
int consumer_part_c_check(ak_arena *a, const void *p, size_t align);

/* The C++ translation unit. Returns 0 on success. */
int consumer_part_cpp(ak_arena *a);

/* Each translation unit takes the address of ak_arena_alloc(): with a C99
 * plain `inline` definition this would need an external definition that no
 * translation unit provides, and the link would fail. */
typedef void *(*consumer_alloc_fn)(ak_arena *, size_t, size_t);
consumer_alloc_fn consumer_alloc_addr_c(void);
consumer_alloc_fn consumer_alloc_addr_cpp(void);

#ifdef __cplusplus
}
#endif

#endif /* AK_CONSUMER_H */
