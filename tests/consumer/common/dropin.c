/* SPDX-License-Identifier: MIT */
/* dropin.c - the consumer program of arenakit-malloc.pc (tests/consumer/
 * run.sh): linked with the drop-in, its malloc and the C library's own
 * allocations (strdup) are arenakit's. ak_usable_size ends the program
 * ("invalid pointer") on a block arenakit did not hand out. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arenakit/malloc.h>

int main(void) {
  char *p = malloc(100);
  char *q = strdup("from the C library's own call of malloc");
  if (!p || !q) return 1;
  size_t u = ak_usable_size(p) + ak_usable_size(q);
  uint64_t allocations = 0;
  if (ak_malloc_stat("allocations", &allocations) != 0 || allocations < 2) return 2;
  printf("drop-in: malloc and strdup are arenakit's (%zu bytes usable, %llu allocations)\n", u,
         (unsigned long long)allocations);
  free(q);
  free(p);
  return 0;
}
