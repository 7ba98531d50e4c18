/* SPDX-License-Identifier: MIT */
/* part_c.c - the second C translation unit of the consumer program. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "consumer.h"

int consumer_part_c(ak_arena *a, const char **out_str) {
  static const size_t aligns[] = {1, 2, 4, 8, 16, 32, 64, 128, 4096};
  for (size_t i = 0; i < sizeof aligns / sizeof aligns[0]; ++i) {
    unsigned char *p = (unsigned char *)ak_arena_alloc(a, 24, aligns[i]);
    CONSUMER_CHECK(p != NULL);
    CONSUMER_CHECK((uintptr_t)p % aligns[i] == 0);
    memset(p, 0x5a, 24);
    CONSUMER_CHECK(ak_arena_owns(a, p));
  }
  /* Through the function pointer (an out-of-line copy in this unit). */
  consumer_alloc_fn fn = consumer_alloc_addr_c();
  double *d = (double *)fn(a, 8 * sizeof(double), _Alignof(double));
  CONSUMER_CHECK(d != NULL);
  CONSUMER_CHECK((uintptr_t)d % _Alignof(double) == 0);
  for (int i = 0; i < 8; ++i) d[i] = i * 0.5;
  CONSUMER_CHECK(d[7] == 3.5);

  errno = 0;
  CONSUMER_CHECK(ak_arena_alloc(a, 8, 48) == NULL); /* not a power of two */
  CONSUMER_CHECK(errno == EINVAL);

  char *s = ak_arena_strdup(a, "from part_c.c");
  CONSUMER_CHECK(s != NULL);
  CONSUMER_CHECK(strcmp(s, "from part_c.c") == 0);
  *out_str = s;
  return 0;
}

int consumer_part_c_check(ak_arena *a, const void *p, size_t align) {
  CONSUMER_CHECK(p != NULL);
  CONSUMER_CHECK((uintptr_t)p % align == 0);
  CONSUMER_CHECK(ak_arena_owns(a, p));
  return 0;
}

consumer_alloc_fn consumer_alloc_addr_c(void) { return &ak_arena_alloc; }
