/* SPDX-License-Identifier: MIT */
/* c_api_ctest.c - the C API checked by a plain C program with assertions,
 * no GoogleTest: the arena, the pool in every sync mode, the malloc, and
 * threads using all three at once. It is the test of the platforms built
 * without GoogleTest (the musl stage links it statically, docs/platforms.md)
 * and runs in every ctest build as well.
 *
 * Built with AK_TEST_OVERRIDE=1 (linked with the drop-in: arenakit::malloc
 * or arenakit::malloc_static), it also checks that the C library's
 * allocation functions are arenakit's, including the calls the C library
 * makes itself (strdup).
 *
 * Exit status 0 when every check held; 1 with one line per failed check. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memalign, malloc_usable_size, strdup */
#endif
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arenakit/arenakit.h"

#if defined(AK_TEST_OVERRIDE) && AK_TEST_OVERRIDE
#include <malloc.h>
#endif

static int checks, failures;
#define CHECK(c)                                                                   \
  do {                                                                             \
    ++checks;                                                                      \
    if (!(c)) {                                                                    \
      ++failures;                                                                  \
      fprintf(stderr, "c_api_ctest: %s:%d: FAILED: %s\n", __FILE__, __LINE__, #c); \
    }                                                                              \
  } while (0)

static int aligned(const void *p, size_t a) { return ((uintptr_t)p & (a - 1)) == 0; }

/* ---- arena ------------------------------------------------------------------- */

static int g_cleanups;
static void count_cleanup(void *arg) { g_cleanups += *(int *)arg; }

static void test_arena(void) {
  ak_arena a;
  CHECK(ak_arena_init(&a, NULL) == 0);
  static const size_t aligns[] = {1, 8, 16, 64, 4096, 1 << 16};
  unsigned char *blocks[sizeof aligns / sizeof aligns[0]];
  for (size_t i = 0; i < sizeof aligns / sizeof aligns[0]; i++) {
    blocks[i] = ak_arena_alloc(&a, 100, aligns[i]);
    CHECK(blocks[i] != NULL && aligned(blocks[i], aligns[i]));
    if (blocks[i]) memset(blocks[i], (int)i + 1, 100);
  }
  for (size_t i = 0; i < sizeof aligns / sizeof aligns[0]; i++)
    if (blocks[i])
      CHECK(blocks[i][0] == i + 1 && blocks[i][99] == i + 1 && ak_arena_owns(&a, blocks[i] + 50));

  /* Past the first chunk and past the largest chunk: a dedicated one. */
  unsigned char *big = ak_arena_alloc(&a, (size_t)8 << 20, 64);
  CHECK(big != NULL && aligned(big, 64));
  if (big) big[0] = big[((size_t)8 << 20) - 1] = 7;
  int *z = ak_arena_zalloc(&a, 1000 * sizeof(int), _Alignof(int));
  CHECK(z != NULL);
  if (z) {
    int sum = 0;
    for (int i = 0; i < 1000; i++) sum |= z[i];
    CHECK(sum == 0);
  }
  char *s = ak_arena_strdup(&a, "arenakit");
  CHECK(s != NULL && strcmp(s, "arenakit") == 0);

  /* Bad input: an error code and a message, never a crash. */
  errno = 0;
  CHECK(ak_arena_alloc(&a, 8, 3) == NULL && errno == EINVAL && strlen(ak_last_error()) > 0);
  errno = 0;
  CHECK(ak_arena_alloc_array(&a, SIZE_MAX / 2, 4, 8, 0) == NULL && errno == ENOMEM);

  /* Save/restore frees what came after the mark. */
  ak_arena_stats before, after;
  ak_arena_stats_get(&a, &before);
  ak_arena_mark m = ak_arena_save(&a);
  for (int i = 0; i < 1000; i++) CHECK(ak_arena_alloc(&a, 64, 8) != NULL);
  ak_arena_restore(&a, m);
  ak_arena_stats_get(&a, &after);
  CHECK(after.used == before.used && after.requested == before.requested);

  /* Cleanups run once, at clear; the arena is usable after. */
  int one = 1;
  g_cleanups = 0;
  CHECK(ak_arena_defer(&a, count_cleanup, &one) == 0);
  ak_arena_clear(&a);
  CHECK(g_cleanups == 1);
  ak_arena_stats_get(&a, &after);
  CHECK(after.used == 0 && after.requested == 0);
  CHECK(ak_arena_alloc(&a, 32, 16) != NULL);
  ak_arena_destroy(&a);
  CHECK(g_cleanups == 1);

  /* A budget: past max_bytes, NULL and ENOMEM. */
  ak_arena_options o;
  memset(&o, 0, sizeof o);
  o.max_bytes = 4096;
  CHECK(ak_arena_init(&a, &o) == 0);
  CHECK(ak_arena_alloc(&a, 4000, 8) != NULL);
  errno = 0;
  CHECK(ak_arena_alloc(&a, 200, 8) == NULL && errno == ENOMEM);
  ak_arena_destroy(&a);
}

/* ---- pool -------------------------------------------------------------------- */

enum { POOL_OBJECTS = 5000 };

static void test_pool(ak_sync sync) {
  ak_pool_options o;
  memset(&o, 0, sizeof o);
  o.object_size = 48;
  o.sync = sync;
  o.name = "c_api_ctest";
  ak_pool *p = ak_pool_create(&o);
  CHECK(p != NULL);
  if (!p) return;
  static void *objs[POOL_OBJECTS];
  for (int round = 0; round < 3; round++) {
    for (size_t i = 0; i < POOL_OBJECTS; i++) {
      objs[i] = ak_pool_alloc(p);
      CHECK(objs[i] != NULL && aligned(objs[i], 16) && ak_pool_owns(p, objs[i]));
      if (objs[i]) memset(objs[i], (int)(i & 0xff), 48);
    }
    ak_pool_stats st;
    ak_pool_stats_get(p, &st);
    CHECK(st.live == POOL_OBJECTS && st.slot_size >= 48 && st.slabs > 0);
    size_t bad = 0;
    for (size_t i = 0; i < POOL_OBJECTS; i++) {
      const unsigned char *b = objs[i];
      if (b && (b[0] != (i & 0xff) || b[47] != (i & 0xff))) bad++;
    }
    CHECK(bad == 0);
    for (size_t i = 0; i < POOL_OBJECTS; i++) ak_pool_free(p, objs[i]);
    ak_pool_trim(p);
    ak_pool_stats_get(p, &st);
    CHECK(st.live == 0);
  }
  ak_pool_destroy(p);

  /* Bad options: NULL, errno, a message naming the call. */
  memset(&o, 0, sizeof o);
  errno = 0;
  CHECK(ak_pool_create(&o) == NULL && errno == EINVAL && strlen(ak_last_error()) > 0);
}

/* ---- malloc -------------------------------------------------------------------- */

static void test_malloc(void) {
  static const size_t sizes[] = {0, 1, 8, 24, 100, 1000, 4096, 65537, (size_t)1 << 20, (size_t)6 << 20};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    unsigned char *p = ak_malloc(sizes[i]);
    CHECK(p != NULL && aligned(p, 16) && ak_usable_size(p) >= sizes[i]);
    if (p && sizes[i]) p[0] = p[sizes[i] - 1] = 0x5a;
    unsigned char *q = ak_realloc(p, sizes[i] * 2 + 10);
    CHECK(q != NULL && (sizes[i] == 0 || q[0] == 0x5a));
    ak_free(q ? q : p);
  }
  unsigned char *c = ak_calloc(1000, 8);
  CHECK(c != NULL);
  if (c) {
    unsigned char any = 0;
    for (size_t i = 0; i < 8000; i++) any |= c[i];
    CHECK(any == 0);
  }
  ak_free(c);
  void *al = NULL;
  CHECK(ak_posix_memalign(&al, 4096, 100) == 0 && aligned(al, 4096));
  ak_free(al);
  void *big = ak_aligned_alloc((size_t)4 << 20, 4096);
  CHECK(big != NULL && aligned(big, (size_t)4 << 20));
  ak_free(big);
  errno = 0;
  CHECK(ak_calloc(SIZE_MAX / 2, 4) == NULL && errno == ENOMEM);
  CHECK(ak_posix_memalign(&al, 3, 8) == EINVAL);
  ak_free(NULL);
  ak_collect(true);
}

#if defined(AK_TEST_OVERRIDE) && AK_TEST_OVERRIDE
/* The C library's names are arenakit's: ak_usable_size accepts their
 * blocks (it ends the program with a message for a block that is not
 * arenakit's), and agrees with malloc_usable_size. */
static void test_override(void) {
  void *p = malloc(3000);
  CHECK(p != NULL && ak_usable_size(p) >= 3000 && malloc_usable_size(p) == ak_usable_size(p));
  p = realloc(p, 100000);
  CHECK(p != NULL && ak_usable_size(p) >= 100000);
  free(p);
  int *c = calloc(10, sizeof(int));
  CHECK(c != NULL && c[9] == 0 && ak_usable_size(c) >= 10 * sizeof(int));
  free(c);
  void *al = NULL;
  CHECK(posix_memalign(&al, 256, 10) == 0 && aligned(al, 256) && ak_usable_size(al) >= 10);
  free(al);
  void *m = memalign(64, 10);
  CHECK(m != NULL && aligned(m, 64) && ak_usable_size(m) >= 10);
  free(m);
  void *a = aligned_alloc(32, 64);
  CHECK(a != NULL && aligned(a, 32) && ak_usable_size(a) >= 64);
  free(a);
  /* A block the C library allocates for the program. */
  char *s = strdup("allocated inside the C library");
  CHECK(s != NULL && ak_usable_size(s) > strlen(s));
  free(s);
  /* One the program allocates and the C library frees (stdio buffers). */
  char *line = NULL;
  size_t cap = 0;
  FILE *f = fopen("/proc/self/status", "r");
  if (f) {
    CHECK(getline(&line, &cap, f) > 0 && line != NULL && ak_usable_size(line) >= cap);
    fclose(f);
  }
  free(line);
}
#endif

/* ---- threads: every component at once, blocks freed by other threads ---- */

enum { THREADS = 4, ROUNDS = 2000 };
static ak_pool *g_shared_pool;
static void *g_handoff[THREADS][64];

static void *worker(void *arg) {
  size_t id = (size_t)(uintptr_t)arg;
  ak_arena a;
  if (ak_arena_init(&a, NULL) != 0) return (void *)1;
  uintptr_t bad = 0;
  for (int r = 0; r < ROUNDS; r++) {
    size_t n = 16 + (size_t)(r * 37 + (int)id * 11) % 2000;
    unsigned char *m = ak_malloc(n);
    void *po = ak_pool_alloc(g_shared_pool);
    char *s = ak_arena_alloc(&a, n, 8);
    if (!m || !po || !s) {
      bad++;
      break;
    }
    memset(m, (int)id, n);
    memset(po, (int)id, 64);
    memset(s, (int)id, n);
    if (m[n - 1] != id) bad++;
    ak_free(m);
    /* Keep one pool object per slot of the ring; free the one it held
     * (allocated by this thread) and free another thread's on its behalf
     * at the end. */
    void **slot = &g_handoff[id][r % 64];
    if (*slot) ak_pool_free(g_shared_pool, *slot);
    *slot = po;
    if (r % 500 == 499) ak_arena_clear(&a);
  }
  ak_arena_destroy(&a);
  return (void *)bad;
}

static void test_threads(void) {
  ak_pool_options o;
  memset(&o, 0, sizeof o);
  o.object_size = 64;
  o.name = "c_api_ctest threads";
  g_shared_pool = ak_pool_create(&o);
  CHECK(g_shared_pool != NULL);
  if (!g_shared_pool) return;
  pthread_t t[THREADS];
  for (size_t i = 0; i < THREADS; i++) CHECK(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i) == 0);
  for (size_t i = 0; i < THREADS; i++) {
    void *r = (void *)1;
    pthread_join(t[i], &r);
    CHECK(r == NULL);
  }
  /* The objects the threads kept, freed here: by a thread other than the
   * one that allocated them. */
  for (size_t i = 0; i < THREADS; i++)
    for (size_t k = 0; k < 64; k++)
      if (g_handoff[i][k]) ak_pool_free(g_shared_pool, g_handoff[i][k]);
  ak_pool_trim(g_shared_pool);
  ak_pool_stats st;
  ak_pool_stats_get(g_shared_pool, &st);
  CHECK(st.live == 0);
  ak_pool_destroy(g_shared_pool);
}

int main(void) {
  CHECK(ak_version() == AK_VERSION);
  test_arena();
  test_pool(AK_SYNC_NONE);
  test_pool(AK_SYNC_THREADS);
  test_pool(AK_SYNC_SPINLOCK);
  test_pool(AK_SYNC_LOCKFREE);
  test_malloc();
#if defined(AK_TEST_OVERRIDE) && AK_TEST_OVERRIDE
  test_override();
#endif
  test_threads();
  if (failures) {
    fprintf(stderr, "c_api_ctest: %d of %d checks FAILED\n", failures, checks);
    return 1;
  }
#if defined(AK_TEST_OVERRIDE) && AK_TEST_OVERRIDE
  printf("c_api_ctest: %d checks passed (malloc & co. are arenakit's)\n", checks);
#else
  printf("c_api_ctest: %d checks passed\n", checks);
#endif
  return 0;
}
