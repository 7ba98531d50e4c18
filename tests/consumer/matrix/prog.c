/* SPDX-License-Identifier: MIT */
/* prog.c - the consumer matrix's program (tests/consumer/matrix.sh), built
 * as C and as C++ against the installed library in every way users build.
 *
 * It runs the inline paths of the pool (AK_SYNC_NONE and the default sync
 * mode; 1,000 objects x 5 rounds, then a steady alloc/free loop that keeps
 * crossing slabs and so takes the slow paths) and of the arena, while values
 * of every register class stay live across the calls: more integers and
 * pointers than there are callee-saved registers, doubles and floats (SSE), a
 * long double (x87) and an int read from argv before the loop. After each
 * loop every value is compared with a reference computed without any
 * arenakit call; a mismatch is printed and the program exits 1.
 *
 * The first slow-path call of each symbol is the one the dynamic linker's
 * lazy resolver handles, so the scenario named by argv[2] ("none", "default"
 * or "arena") runs first, before anything else has called into the library;
 * the others and the README's examples (linked in as ak_matrix_readme_N,
 * listed in AK_MATRIX_README) run after it.
 *
 * Usage: prog <int> <none|default|arena> */
#include <arenakit/arenakit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __cplusplus
#include <arenakit/arenakit.hpp>
#include <vector>
#endif

#define NOBJ 1000
#define ROUNDS 5
#define STEADY 20000
#define WINDOW 700

/* The live values: 10 integers, 4 pointers, 4 doubles, 2 floats and one
 * long double (x86-64 has 6 callee-saved integer registers and none for
 * SSE or x87 values). Each step is one or two instructions per value, so
 * the compiler keeps the integers and pointers in registers across the
 * calls - in caller-saved ones too, wherever it believes a call keeps them -
 * instead of spilling them. */
#define INTS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9)
#define PTRS(X) X(0) X(1) X(2) X(3)
#define DBLS(X) X(0) X(1) X(2) X(3)
#define FLTS(X) X(0) X(1)

static char ring[64 + 8];

typedef struct state {
#define FIELD_I(n) unsigned long i##n;
#define FIELD_P(n) const char *p##n;
#define FIELD_D(n) double d##n;
#define FIELD_F(n) float f##n;
  INTS(FIELD_I) PTRS(FIELD_P) DBLS(FIELD_D) FLTS(FIELD_F) long double ld;
  int arg;
} state;

/* Declares the locals from the seed; one step of the values for step k. */
#define DECL_I(n) unsigned long i##n = (unsigned long)seed * (2u * n + 1u) + 0x9e3779b9ul * n;
#define DECL_P(n) const char *p##n = ring + ((unsigned)seed + n) % 64u;
#define DECL_D(n) double d##n = (double)seed / (n + 2);
#define DECL_F(n) float f##n = (float)seed / (float)(n + 3);
#define DECLS                                                                                    \
  INTS(DECL_I) PTRS(DECL_P) DBLS(DECL_D) FLTS(DECL_F) long double ld = (long double)seed / 7.0L; \
  int arg = seed;
#define STEP_I(n) i##n += (unsigned long)k ^ n;
#define STEP_P(n) p##n = ring + (((size_t)(p##n - ring) + n + 1u) & 63u);
#define STEP_D(n) d##n = d##n * 0.5 + (double)(k & 15) * (n + 1);
#define STEP_F(n) f##n = f##n * 0.25f + (float)(k & 7);
#define STEP(k_)                                                                               \
  do {                                                                                         \
    long k = (k_);                                                                             \
    INTS(STEP_I) PTRS(STEP_P) DBLS(STEP_D) FLTS(STEP_F) ld = ld * 0.5L + (long double)(k & 3); \
  } while (0)
/* Saves the locals into a state for the comparison. */
#define SAVE_I(n) out->i##n = i##n;
#define SAVE_P(n) out->p##n = p##n;
#define SAVE_D(n) out->d##n = d##n;
#define SAVE_F(n) out->f##n = f##n;
#define SAVE(to)                                                      \
  do {                                                                \
    state *out = (to);                                                \
    INTS(SAVE_I) PTRS(SAVE_P) DBLS(SAVE_D) FLTS(SAVE_F) out->ld = ld; \
    out->arg = arg;                                                   \
  } while (0)

/* What the values must be after `steps` steps: the same arithmetic with no
 * arenakit call in between. noinline, so it is compiled on its own. */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((noinline))
#endif
static void
reference(int seed, long steps, state *s) {
  DECLS
  for (long j = 0; j < steps; j++) STEP(j);
  SAVE(s);
}

static int failures;
/* The int from argv, kept in memory: the reference and the check use it. */
static volatile int g_seed;

/* Compares `got` with the reference after `steps` steps; prints each value
 * that differs. */
static void check(const char *what, long steps, const state *got) {
  int seed = g_seed;
  state want;
  reference(seed, steps, &want);
  int bad = 0;
#define CMP_I(n) \
  if (got->i##n != want.i##n) bad = 1, printf("%s: i%d = %lu, expected %lu\n", what, n, got->i##n, want.i##n);
#define CMP_P(n)              \
  if (got->p##n != want.p##n) \
    bad = 1, printf("%s: p%d = %p, expected %p\n", what, n, (const void *)got->p##n, (const void *)want.p##n);
#define CMP_D(n)              \
  if (got->d##n != want.d##n) \
    bad = 1, printf("%s: d%d = %.17g, expected %.17g\n", what, n, got->d##n, want.d##n);
#define CMP_F(n)              \
  if (got->f##n != want.f##n) \
    bad = 1, printf("%s: f%d = %.9g, expected %.9g\n", what, n, (double)got->f##n, (double)want.f##n);
  do {
    INTS(CMP_I) PTRS(CMP_P) DBLS(CMP_D) FLTS(CMP_F)
  } while (0);
  if (got->ld != want.ld) bad = 1, printf("%s: ld = %.21Lg, expected %.21Lg\n", what, got->ld, want.ld);
  if (got->arg != seed)
    printf("%s: the int read from argv is %d after the loop, expected %d\n", what, got->arg, seed), bad = 1;
  if (bad) failures++;
}

/* An allocation that must not fail did: print and exit. */
static void fail(const char *what, const char *why) {
  printf("%s: %s (%s)\nFAILED\n", what, why, ak_last_error());
  exit(1);
}

/* The pool scenario: rounds of NOBJ allocations and frees, then a steady
 * loop that frees the oldest of WINDOW live objects and allocates one. */
static void pool_scenario(const char *what, ak_sync sync, int seed) {
  ak_pool_options o;
  memset(&o, 0, sizeof o);
  o.object_size = 48;
  o.sync = sync;
  ak_pool *p = ak_pool_create(&o);
  if (!p) fail(what, "ak_pool_create failed");
  static long *objs[NOBJ];
  long steps = 0;
  DECLS
  for (int r = 0; r < ROUNDS; r++) {
    for (int n = 0; n < NOBJ; n++) {
      long *obj = (long *)ak_pool_alloc(p);
      STEP(steps++);
      if (!obj) fail(what, "ak_pool_alloc returned NULL");
      obj[0] = n + r;
      objs[n] = obj;
    }
    for (int n = 0; n < NOBJ; n++) {
      if (objs[n][0] != n + r)
        printf("%s: object %d holds %ld, expected %d\n", what, n, objs[n][0], n + r), failures++;
      ak_pool_free(p, objs[n]);
      STEP(steps++);
    }
  }
  for (int n = 0; n < WINDOW; n++) {
    objs[n] = (long *)ak_pool_alloc(p);
    if (!objs[n]) fail(what, "ak_pool_alloc returned NULL");
    objs[n][0] = n;
  }
  for (long j = 0; j < STEADY; j++) {
    int n = (int)(j % WINDOW);
    if (objs[n][0] != n) printf("%s: object %d holds %ld, expected %d\n", what, n, objs[n][0], n), failures++;
    ak_pool_free(p, objs[n]);
    STEP(steps++);
    objs[n] = (long *)ak_pool_alloc(p);
    STEP(steps++);
    if (!objs[n]) fail(what, "ak_pool_alloc returned NULL");
    objs[n][0] = n;
  }
  for (int n = 0; n < WINDOW; n++) ak_pool_free(p, objs[n]);
  state s;
  SAVE(&s);
  check(what, steps, &s);
  ak_pool_destroy(p);
}

/* The arena scenario: small blocks that keep filling chunks (the slow path
 * maps the next one), a mark restored each round, and a clear. */
static void arena_scenario(int seed) {
  const char *what = "arena";
  ak_arena a;
  if (ak_arena_init(&a, NULL) != 0) fail(what, "ak_arena_init failed");
  long steps = 0;
  DECLS
  for (int r = 0; r < ROUNDS; r++) {
    ak_arena_mark m = ak_arena_save(&a);
    long *first = NULL;
    for (int n = 0; n < NOBJ * 4; n++) {
      long *b = (long *)ak_arena_alloc(&a, 24 + 8 * (size_t)(n & 3), 8);
      STEP(steps++);
      if (!b) fail(what, "ak_arena_alloc returned NULL");
      b[0] = n;
      if (!first) first = b;
    }
    if (first[0] != 0) printf("%s: the first block holds %ld\n", what, first[0]), failures++;
    ak_arena_restore(&a, m);
    STEP(steps++);
  }
  ak_arena_clear(&a);
  state s;
  SAVE(&s);
  check(what, steps, &s);
  ak_arena_destroy(&a);
}

#ifdef __cplusplus
/* The C++ layer over the same paths: an object pool, a container on a pool
 * allocator and one on an arena. */
static void cpp_scenario() {
  ak::object_pool<long> pool;
  std::vector<long *> v;
  for (int i = 0; i < NOBJ; i++) v.push_back(pool.create(i));
  for (int i = 0; i < NOBJ; i++) {
    if (*v[i] != i) printf("c++: object_pool object %d holds %ld\n", i, *v[i]), failures++;
    pool.destroy(v[i]);
  }
  ak::arena ar;
  std::vector<int, ak::arena_allocator<int>> w(ar);
  for (int i = 0; i < 10000; i++) w.push_back(i);
  for (int i = 0; i < 10000; i++)
    if (w[i] != i) printf("c++: arena vector element %d holds %d\n", i, w[i]), failures++;
}
#endif

#ifdef AK_MATRIX_README
#define README_DECL(f) int f(void);
AK_MATRIX_README(README_DECL)
#endif

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s <int> <none|default|arena>\n", argv[0]);
    return 2;
  }
  int seed = atoi(argv[1]);
  g_seed = seed;
  const char *first = argv[2];
  int order[3] = {0, 1, 2}; /* none, default, arena */
  if (strcmp(first, "default") == 0) order[0] = 1, order[1] = 0;
  if (strcmp(first, "arena") == 0) order[0] = 2, order[2] = 0;
  for (int i = 0; i < 3; i++) {
    if (order[i] == 0) pool_scenario("pool AK_SYNC_NONE", AK_SYNC_NONE, seed);
    if (order[i] == 1) pool_scenario("pool default sync", (ak_sync)0, seed);
    if (order[i] == 2) arena_scenario(seed);
  }
#ifdef __cplusplus
  cpp_scenario();
#endif
#ifdef AK_MATRIX_README
#define README_RUN(f) \
  if (f() != 0) printf("README example %s failed\n", #f), failures++;
  AK_MATRIX_README(README_RUN)
#endif
  if (failures) {
    printf("FAILED: %d check(s)\n", failures);
    return 1;
  }
  printf("ok\n");
  return 0;
}
