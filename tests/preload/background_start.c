/* SPDX-License-Identifier: MIT */
/* background_start.c - four threads grow buffers with realloc and free
 * them, so that the first memory to wait for a purge starts the
 * background thread (lazily, from a slow path) while the other threads
 * keep waking it. Under the preload, pthread_create takes the new
 * thread's TLS from arenakit's malloc while the starter holds the start
 * lock: the start must not wait for itself (background_start.sh runs this
 * program many times and fails on the first run that hangs). Prints "ok". */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kThreads = 4, kRounds = 400 };

static void *work(void *arg) {
  uint32_t seed = (uint32_t)(uintptr_t)arg;
  for (int round = 0; round < kRounds; round++) {
    seed ^= seed << 13; /* xorshift32 */
    seed ^= seed >> 17;
    seed ^= seed << 5;
    size_t cap = 4, n = 0, want = 8 + seed % 500;
    long *v = malloc(cap * sizeof *v), *box = malloc(24);
    if (!v || !box) abort();
    while (n < want) {
      if (n == cap) {
        cap *= 2;
        long *w = realloc(v, cap * sizeof *v);
        if (!w) abort();
        v = w;
      }
      v[n] = (long)n;
      n++;
    }
    long *copy = malloc(cap * sizeof *copy);
    if (!copy) abort();
    memcpy(copy, v, n * sizeof *v);
    free(v);
    free(box);
    free(copy);
  }
  return NULL;
}

int main(void) {
  pthread_t t[kThreads];
  for (int i = 0; i < kThreads; i++)
    if (pthread_create(&t[i], NULL, work, (void *)(uintptr_t)(i + 1)) != 0) return 2;
  for (int i = 0; i < kThreads; i++) pthread_join(t[i], NULL);
  puts("ok");
  return 0;
}
