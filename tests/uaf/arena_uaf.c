/* SPDX-License-Identifier: MIT */
/* arena_uaf.c - one deliberate use after free inside an arena, for
 * Valgrind memcheck (tests/uaf/memcheck.sh): a block is written and read
 * after ak_arena_clear() gave it back. memcheck must report the invalid
 * write and the invalid read at the lines marked UAF-WRITE and UAF-READ.
 *
 * Usage: arena_uaf [control]
 * "control" runs the same steps without the two bad accesses, and must be
 * clean. */
#include <arenakit/arenakit.h>
#include <stdio.h>
#include <string.h>

/* The value read after free goes here: a load whose value is never used
 * can be dropped (by the compiler or by Valgrind's JIT). */
static volatile long sink;

int main(int argc, char **argv) {
  int control = argc > 1 && strcmp(argv[1], "control") == 0;
  ak_arena a;
  if (ak_arena_init(&a, NULL) != 0) return 2;
  void *first = ak_arena_alloc(&a, 40, 8); /* the block below is not the chunk's first */
  volatile long *p = ak_arena_alloc(&a, 8 * sizeof(long), 8);
  if (!first || !p) return 2;
  for (int i = 0; i < 8; i++) p[i] = i;
  long sum = p[3] + p[5];
  ak_arena_clear(&a); /* every block of the arena is free now */
  if (!control) {
    p[5] = 42;   /* UAF-WRITE */
    sink = p[6]; /* UAF-READ */
  }
  volatile long *q = ak_arena_alloc(&a, 8 * sizeof(long), 8); /* after the clear: usable */
  if (!q) return 2;
  q[7] = sum;
  printf("arena_uaf: %s, sum %ld\n", control ? "control" : "use after clear done", q[7]);
  ak_arena_destroy(&a);
  return 0;
}
