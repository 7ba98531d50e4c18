/* SPDX-License-Identifier: MIT */
/* atfork_ctest.c - fork handlers of the program allocate (docs/design.md,
 * "Lifecycle"). The program registers its handlers first thing in main,
 * before it creates any pool or calls malloc; each handler (prepare,
 * parent, child) allocates and frees from a pool of every sync mode and
 * through malloc. Then two threads churn the pools and malloc while the
 * main thread forks 100 times; each child allocates again and exits.
 *
 * The library registers its own handlers at load, so the program's prepare
 * runs before the library takes its locks and its parent and child
 * handlers after it released them. A library that registered at its first
 * pool would take its locks first and the program's prepare would wait on
 * them for good: an alarm ends a run that hangs (exit by SIGALRM fails the
 * test). Run plainly and under LD_PRELOAD=libarenakit-malloc.so. */
#define _GNU_SOURCE
#include <arenakit/arenakit.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define NMODES 4
#define FORKS 100

static const ak_sync g_modes[NMODES] = {AK_SYNC_THREADS, AK_SYNC_NONE, AK_SYNC_SPINLOCK, AK_SYNC_LOCKFREE};
static ak_pool *_Atomic g_pools[NMODES]; /* NULL until created */
static atomic_int g_handler_calls;
static atomic_bool g_stop;

/* One allocation and free from every pool that exists and from malloc.
 * The NONE pool is used by the forking thread only (handlers run there). */
static void use_everything(void) {
  for (int m = 0; m < NMODES; m++) {
    ak_pool *p = atomic_load(&g_pools[m]);
    if (!p) continue;
    void *o = ak_pool_alloc(p);
    if (!o) abort();
    ak_pool_free(p, o);
  }
  void *b = malloc(200);
  if (!b) abort();
  free(b);
  atomic_fetch_add(&g_handler_calls, 1);
}

static void on_prepare(void) { use_everything(); }
static void on_parent(void) { use_everything(); }
static void on_child(void) { use_everything(); }

static void *churn(void *arg) {
  unsigned r = (unsigned)(uintptr_t)arg;
  void *held[NMODES][32] = {{0}};
  while (!atomic_load(&g_stop)) {
    for (int m = 0; m < NMODES; m++) {
      if (g_modes[m] == AK_SYNC_NONE) continue; /* not thread-safe */
      ak_pool *p = atomic_load(&g_pools[m]);
      r = r * 1103515245u + 12345u;
      void **slot = &held[m][(r >> 8) % 32];
      if (*slot) {
        ak_pool_free(p, *slot);
        *slot = NULL;
      } else {
        *slot = ak_pool_alloc(p);
      }
      free(malloc(16 + (r >> 16) % 5000));
    }
  }
  for (int m = 0; m < NMODES; m++)
    for (int i = 0; i < 32; i++)
      if (held[m][i]) ak_pool_free(atomic_load(&g_pools[m]), held[m][i]);
  return NULL;
}

int main(void) {
  alarm(120); /* a hang ends the test with SIGALRM */
  if (pthread_atfork(on_prepare, on_parent, on_child) != 0) return 1;
  for (int m = 0; m < NMODES; m++) {
    ak_pool_options o = {0};
    o.object_size = 64;
    o.sync = g_modes[m];
    o.name = "atfork";
    ak_pool *p = ak_pool_create(&o);
    if (!p) {
      perror("ak_pool_create");
      return 1;
    }
    atomic_store(&g_pools[m], p);
  }
  pthread_t t[2];
  for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, churn, (void *)(uintptr_t)(i + 1));
  int failed = 0;
  for (int i = 0; i < FORKS; i++) {
    pid_t pid = fork();
    if (pid < 0) {
      perror("fork");
      return 1;
    }
    if (pid == 0) {
      use_everything();
      _exit(0);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) failed++;
  }
  atomic_store(&g_stop, true);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  for (int m = 0; m < NMODES; m++) ak_pool_destroy(atomic_load(&g_pools[m]));
  /* prepare and parent in the parent each fork (children's calls are theirs) */
  int calls = atomic_load(&g_handler_calls);
  printf("atfork_ctest: %d forks, %d failed children, %d handler calls in the parent\n", FORKS, failed,
         calls);
  return failed == 0 && calls == 2 * FORKS ? 0 : 1;
}
