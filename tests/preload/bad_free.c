/* SPDX-License-Identifier: MIT */
/* bad_free.c - a program that knows nothing of arenakit hands free(),
 * realloc() or malloc_usable_size() a pointer that malloc did not hand out
 * (argv[1]: the call, argv[2]: static, stack, freed-large or unmapped).
 * Under LD_PRELOAD=libarenakit-malloc.so it must end with arenakit's
 * message and SIGABRT, as glibc's "free(): invalid pointer" does
 * (bad_free.sh checks both). */
#define _GNU_SOURCE /* MAP_ANONYMOUS, malloc_usable_size */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static char static_buf[256];

int main(int argc, char **argv) {
  if (argc != 3) return 2;
  char local[64];
  void *p = NULL;
  if (strcmp(argv[2], "static") == 0) {
    p = static_buf + 64;
  } else if (strcmp(argv[2], "stack") == 0) {
    p = local;
  } else if (strcmp(argv[2], "freed-large") == 0) {
    p = malloc(8 << 20);
    free(p);
  } else if (strcmp(argv[2], "unmapped") == 0) {
    void *m = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return 2;
    munmap(m, 1 << 16);
    p = (char *)m + 4096;
  } else {
    return 2;
  }
  /* The call through a volatile pointer: the compiler may not reason
   * about (or warn of) a free of a non-heap object. */
  void *volatile q = p;
  if (strcmp(argv[1], "free") == 0)
    free(q);
  else if (strcmp(argv[1], "realloc") == 0)
    (void)!realloc(q, 64);
  else if (strcmp(argv[1], "malloc_usable_size") == 0)
    (void)!malloc_usable_size(q);
  else
    return 2;
  puts("not detected");
  return 0;
}
