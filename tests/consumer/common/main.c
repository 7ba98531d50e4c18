/* SPDX-License-Identifier: MIT */
/* main.c - the consumer program: a small real user of arenakit's C API,
 * built by tests/consumer/run.sh through the installed CMake package,
 * through pkg-config and through add_subdirectory(). Exits non-zero on any
 * mismatch. Define CONSUMER_NO_CXX to build it from the C units alone. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "consumer.h"

static int g_cleanups;
static void count_cleanup(void *arg) {
  (void)arg;
  ++g_cleanups;
}

static int check_version(void) {
  CONSUMER_CHECK(ak_version() == AK_VERSION);
#ifdef AK_CONSUMER_EXPECT_VERSION
  /* The version the package manager (CMake package / pkg-config) reports. */
  CONSUMER_CHECK(AK_VERSION == AK_CONSUMER_EXPECT_VERSION);
#endif
  return 0;
}

static int check_alloc(ak_arena *a) {
  static const size_t aligns[] = {1, 2, 4, 8, 16, 64, 512, 4096, 16384};
  uintptr_t prev[sizeof aligns / sizeof aligns[0]];
  for (size_t i = 0; i < sizeof aligns / sizeof aligns[0]; ++i) {
    unsigned char *p = (unsigned char *)ak_arena_alloc(a, 40, aligns[i]);
    CONSUMER_CHECK(p != NULL);
    CONSUMER_CHECK((uintptr_t)p % aligns[i] == 0);
    memset(p, (int)i, 40);
    prev[i] = (uintptr_t)p;
  }
  /* Earlier blocks are intact and distinct. */
  for (size_t i = 0; i < sizeof aligns / sizeof aligns[0]; ++i) {
    const unsigned char *p = (const unsigned char *)prev[i];
    for (size_t k = 0; k < 40; ++k) CONSUMER_CHECK(p[k] == (unsigned char)i);
    for (size_t j = 0; j < i; ++j) CONSUMER_CHECK(prev[j] + 40 <= prev[i] || prev[i] + 40 <= prev[j]);
  }
  /* Beyond the fast path: a large block and a large alignment. */
  unsigned char *big = (unsigned char *)ak_arena_alloc(a, (size_t)1 << 20, 64);
  CONSUMER_CHECK(big != NULL && (uintptr_t)big % 64 == 0);
  big[0] = 1;
  big[((size_t)1 << 20) - 1] = 2;
  CONSUMER_CHECK(ak_arena_owns(a, big + 12345));
  int *zeros = (int *)ak_arena_zalloc(a, 64 * sizeof(int), _Alignof(int));
  CONSUMER_CHECK(zeros != NULL);
  for (int i = 0; i < 64; ++i) CONSUMER_CHECK(zeros[i] == 0);
  errno = 0;
  CONSUMER_CHECK(ak_arena_alloc(a, 8, 3) == NULL);
  CONSUMER_CHECK(errno == EINVAL);
  CONSUMER_CHECK(strlen(ak_last_error()) > 0);
  return 0;
}

static int check_strings(ak_arena *a) {
  const char *src = "arenakit consumer";
  char *s = ak_arena_strdup(a, src);
  CONSUMER_CHECK(s != NULL && s != src && strcmp(s, src) == 0);
  CONSUMER_CHECK(ak_arena_owns(a, s));
  char *n = ak_arena_strndup(a, src, 8);
  CONSUMER_CHECK(n != NULL && strcmp(n, "arenakit") == 0);
  char *e = ak_arena_strdup(a, "");
  CONSUMER_CHECK(e != NULL && e[0] == '\0');
  return 0;
}

static int check_cycles(ak_arena *a) {
  ak_arena_stats st;
  CONSUMER_CHECK(ak_arena_defer(a, count_cleanup, NULL) == 0);
  ak_arena_stats_get(a, &st);
  CONSUMER_CHECK(st.requested > 0 && st.used >= st.requested && st.reserved > 0 && st.chunks > 0);

  g_cleanups = 0;
  ak_arena_clear(a);
  CONSUMER_CHECK(g_cleanups == 1);
  ak_arena_stats_get(a, &st);
  CONSUMER_CHECK(st.requested == 0);

  /* The arena is usable after a clear; a mark frees what follows it. */
  char *keep = ak_arena_strdup(a, "kept");
  CONSUMER_CHECK(keep != NULL);
  ak_arena_mark m = ak_arena_save(a);
  for (int i = 0; i < 100; ++i) CONSUMER_CHECK(ak_arena_alloc(a, 1000, 16) != NULL);
  ak_arena_restore(a, m);
  ak_arena_stats_get(a, &st);
  CONSUMER_CHECK(st.requested == 5);
  CONSUMER_CHECK(strcmp(keep, "kept") == 0);
  return 0;
}

static int check_buffer_arena(void) {
  _Alignas(64) static unsigned char buf[4096];
  ak_arena_options opts;
  memset(&opts, 0, sizeof opts);
  opts.buffer = buf;
  opts.buffer_size = sizeof buf;
  opts.max_bytes = 1 << 16;
  ak_arena b;
  CONSUMER_CHECK(ak_arena_init(&b, &opts) == 0);
  void *p = ak_arena_alloc(&b, 100, 16);
  CONSUMER_CHECK(p != NULL && (uintptr_t)p % 16 == 0);
  CONSUMER_CHECK((unsigned char *)p >= buf && (unsigned char *)p < buf + sizeof buf);
  errno = 0;
  CONSUMER_CHECK(ak_arena_alloc(&b, (size_t)1 << 20, 16) == NULL); /* over the budget */
  CONSUMER_CHECK(errno == ENOMEM);
  ak_arena_destroy(&b);

  opts.buffer_size = 16; /* under AK_ARENA_MIN_BUFFER */
  CONSUMER_CHECK(ak_arena_init(&b, &opts) == EINVAL);
  return 0;
}

int main(void) {
  if (check_version() != 0) return 1;

  ak_arena a;
  CONSUMER_CHECK(ak_arena_init(&a, NULL) == 0);
  if (check_alloc(&a) != 0) return 1;
  if (check_strings(&a) != 0) return 1;

  /* Other translation units share the arena. */
  const char *from_c = NULL;
  if (consumer_part_c(&a, &from_c) != 0) return 1;
  CONSUMER_CHECK(from_c != NULL && strcmp(from_c, "from part_c.c") == 0);
  CONSUMER_CHECK(consumer_alloc_addr_c() != NULL);
#ifndef CONSUMER_NO_CXX
  if (consumer_part_cpp(&a) != 0) return 1;
#endif
  void *mine = ak_arena_alloc(&a, 8, 8);
  if (consumer_part_c_check(&a, mine, 8) != 0) return 1;

  if (check_cycles(&a) != 0) return 1;
  ak_arena_destroy(&a);
  ak_arena_destroy(&a); /* harmless twice */
  if (check_buffer_arena() != 0) return 1;

#ifdef CONSUMER_NO_CXX
  printf("consumer (C only): all checks passed\n");
#else
  printf("consumer (C and C++): all checks passed\n");
#endif
  return 0;
}
