/* SPDX-License-Identifier: MIT */
/* pool_count_ctest.c - the sequence count of a SPINLOCK or LOCKFREE
 * magazine across fork(): a thread caught inside a change of its counts
 * (`seq` odd) does not exist in the child, so the child's fork handler
 * closes the change; the child's stats then read the counts at once
 * (no reader waits out a writer that is gone) and count what the parent
 * held. The odd count is set by hand, as a thread preempted inside the
 * change at the fork would leave it. Exit 0: passed. */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "arenakit/pool.h"
#include "pool/modes/magazine/magazine.h"
#include "pool/pool.h"

static int check(ak_sync sync, const char *name) {
  ak_pool_options o = {0};
  o.object_size = 32;
  o.sync = sync;
  ak_pool *pool = ak_pool_create(&o);
  if (!pool) {
    fprintf(stderr, "pool_count (%s): ak_pool_create: %s\n", name, ak_last_error());
    return 1;
  }
  void *held[100];
  for (int i = 0; i < 100; i++) held[i] = ak_pool_alloc(pool);
  _ak_pool_mag *m = _ak_mag_first(_ak_impl(pool)); /* the calling thread's */
  unsigned seq = atomic_load(&m->seq);
  atomic_store(&m->seq, seq | 1); /* a change under way */
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    if (atomic_load(&m->seq) & 1) {
      fprintf(stderr, "pool_count (%s): the child's count is still odd after fork\n", name);
      _exit(1);
    }
    ak_pool_stats st = {.version = AK_POOL_STATS_VERSION};
    ak_pool_stats_get(pool, &st);
    if (st.live != 100) {
      fprintf(stderr, "pool_count (%s): the child counts %zu live objects, not 100\n", name, st.live);
      _exit(1);
    }
    _exit(0);
  }
  atomic_store(&m->seq, seq); /* the parent's change never began */
  int status = 0,
      bad = pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  for (int i = 0; i < 100; i++) ak_pool_free(pool, held[i]);
  ak_pool_destroy(pool);
  return bad;
}

int main(void) {
  int bad = check(AK_SYNC_SPINLOCK, "spinlock") + check(AK_SYNC_LOCKFREE, "lockfree");
  if (!bad) printf("pool_count: passed\n");
  return bad ? 1 : 0;
}
