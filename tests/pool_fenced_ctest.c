/* SPDX-License-Identifier: MIT */
/* pool_fenced_ctest.c - the magazines of AK_SYNC_SPINLOCK and
 * AK_SYNC_LOCKFREE pools in a process without membarrier(2) (an old
 * kernel, a seccomp filter): a filter makes it fail with ENOSYS before
 * the first pool exists, so the owners fence their marks themselves and
 * the inline paths stay off. Two owner threads allocate stamped objects,
 * check them and free them while the main thread trims (takes every
 * magazine) over and over: no object may be held by two owners at once,
 * and every object is back at the end. Exit 0: passed; 77: skipped (no
 * seccomp filters here, as under qemu-user). */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "arenakit/pool.h"

static ak_pool *g_pool;
static atomic_bool g_stop;
static atomic_long g_bad, g_rounds;

static void *owner(void *arg) {
  uint64_t id = (uint64_t)(uintptr_t)arg;
  uint64_t *held[150];
  for (uint64_t seq = 1; !atomic_load(&g_stop); atomic_fetch_add(&g_rounds, 1)) {
    size_t k = 1 + seq % 150, n = 0;
    for (; n < k; n++, seq++) {
      uint64_t *o = ak_pool_alloc(g_pool);
      if (!o) {
        atomic_fetch_add(&g_bad, 1);
        break;
      }
      for (int w = 0; w < 8; w++) o[w] = id << 56 | seq;
      held[n] = o;
    }
    for (size_t i = 0; i < n; i++)
      for (int w = 0; w < 8; w++)
        if (held[i][w] >> 56 != id || held[i][w] != held[i][0]) atomic_fetch_add(&g_bad, 1);
    for (size_t i = 0; i < n; i++) ak_pool_free(g_pool, held[i]);
  }
  return NULL;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(void) {
  alarm(120); /* a lost or doubled chain can loop forever: fail instead */
#ifndef SYS_membarrier
  puts("pool_fenced: skipped (no membarrier system call on this platform)");
  return 77;
#else
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_membarrier, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {.len = sizeof f / sizeof f[0], .filter = f};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0 ||
      syscall(SYS_membarrier, 0, 0) != -1) {
    puts("pool_fenced: skipped (no seccomp filter here)");
    return 77;
  }
  const ak_sync modes[] = {AK_SYNC_SPINLOCK, AK_SYNC_LOCKFREE};
  for (size_t m = 0; m < 2; m++) {
    ak_pool_options o = {.object_size = 64, .sync = modes[m]};
    g_pool = ak_pool_create(&o);
    if (!g_pool) {
      fprintf(stderr, "pool_fenced: ak_pool_create: %s\n", ak_last_error());
      return 1;
    }
    if (g_pool->mkey != 0) {
      fprintf(stderr, "pool_fenced: the inline magazine paths are on without membarrier(2)\n");
      return 1;
    }
    atomic_store(&g_stop, false);
    atomic_store(&g_rounds, 0);
    pthread_t a, b;
    pthread_create(&a, NULL, owner, (void *)1);
    pthread_create(&b, NULL, owner, (void *)2);
    long trims = 0;
    for (double until = now_s() + 0.3; now_s() < until || trims < 50 || atomic_load(&g_rounds) < 50; trims++)
      ak_pool_trim(g_pool);
    atomic_store(&g_stop, true);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    ak_pool_stats st;
    ak_pool_stats_get(g_pool, &st);
    printf("pool_fenced: %s: %ld trims, %ld rounds, %ld objects held twice, %zu live\n",
           m ? "lockfree" : "spinlock", trims, atomic_load(&g_rounds), atomic_load(&g_bad), st.live);
    if (atomic_load(&g_bad) != 0 || st.live != 0) return 1;
    ak_pool_destroy(g_pool);
  }
  return 0;
#endif
}
