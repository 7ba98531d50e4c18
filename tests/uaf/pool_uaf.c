/* SPDX-License-Identifier: MIT */
/* pool_uaf.c - one deliberate use after free inside a pool, for Valgrind
 * memcheck (tests/uaf/memcheck.sh): an object is written and read after
 * ak_pool_free() took it back. memcheck must report the invalid write and
 * the invalid read at the lines marked UAF-WRITE and UAF-READ.
 *
 * Usage: pool_uaf none|spinlock|lockfree|threads [control]
 * "control" runs the same steps without the two bad accesses, and must be
 * clean. The accesses avoid the object's first word, which the pool keeps
 * readable for its free-list link. */
#include <arenakit/arenakit.h>
#include <stdio.h>
#include <string.h>

/* The value read after free goes here: a load whose value is never used
 * can be dropped (by the compiler or by Valgrind's JIT). */
static volatile long sink;

int main(int argc, char **argv) {
  static const struct {
    const char *name;
    ak_sync sync;
  } modes[] = {{"none", AK_SYNC_NONE},
               {"spinlock", AK_SYNC_SPINLOCK},
               {"lockfree", AK_SYNC_LOCKFREE},
               {"threads", AK_SYNC_THREADS}};
  if (argc < 2) {
    fprintf(stderr, "usage: pool_uaf none|spinlock|lockfree|threads [control]\n");
    return 2;
  }
  ak_pool_options o;
  memset(&o, 0, sizeof o);
  o.object_size = 8 * sizeof(long);
  o.sync = (ak_sync)-1;
  for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
    if (strcmp(argv[1], modes[i].name) == 0) o.sync = modes[i].sync;
  if ((int)o.sync < 0) {
    fprintf(stderr, "pool_uaf: unknown sync mode '%s'\n", argv[1]);
    return 2;
  }
  int control = argc > 2 && strcmp(argv[2], "control") == 0;
  o.name = "uaf";
  ak_pool *pool = ak_pool_create(&o);
  if (!pool) return 2;
  volatile long *keep = ak_pool_alloc(pool); /* the slab stays in use */
  volatile long *p = ak_pool_alloc(pool);
  if (!keep || !p) return 2;
  for (int i = 0; i < 8; i++) p[i] = keep[i] = i;
  long sum = p[3] + p[5];
  ak_pool_free(pool, (void *)p); /* the object is free now */
  if (!control) {
    p[5] = 42;   /* UAF-WRITE */
    sink = p[6]; /* UAF-READ */
  }
  keep[7] = sum;
  printf("pool_uaf %s: %s, sum %ld\n", argv[1], control ? "control" : "use after free done", keep[7]);
  ak_pool_free(pool, (void *)keep);
  ak_pool_destroy(pool);
  return 0;
}
