/* SPDX-License-Identifier: MIT */
/* unload_ctest.c - dlopen, use, dlclose, many times over, with threads that
 * exit after the close (docs/design.md, "Lifecycle").
 *
 *   unload_ctest lib LIBARENAKIT.so CYCLES   the library itself, through dlsym
 *   unload_ctest plugin PLUGIN.so CYCLES     a plugin linked with the library
 *
 * Each cycle loads the object, creates a pool of every sync mode, an arena
 * and a malloc block; a thread of this program allocates and frees in every
 * pool and through ak_malloc (so the library's thread-exit destructors are
 * armed for it), then waits while the main thread destroys everything and
 * closes the object; then the thread exits. Run with AK_BACKGROUND=1 too
 * (the background thread runs on after the close). A library that were
 * unmapped by the close would crash at the thread's exit or in its
 * background thread: the program exits 0 only when every cycle ended. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unload_api.h"

#define NMODES 4

static const ak_sync g_modes[NMODES] = {AK_SYNC_THREADS, AK_SYNC_NONE, AK_SYNC_SPINLOCK, AK_SYNC_LOCKFREE};

typedef struct cycle {
  const unload_api *api;
  ak_pool *pools[NMODES];
  pthread_barrier_t used, closed;
} cycle;

static void die(const char *what, const char *detail) {
  fprintf(stderr, "unload_ctest: %s: %s\n", what, detail ? detail : "");
  exit(1);
}

/* Resolves one symbol of the library, or ends the test. */
static void *sym(void *h, const char *name) {
  void *f = dlsym(h, name);
  if (!f) die("dlsym", dlerror());
  return f;
}

static unload_api g_from_lib;

/* POSIX's way to a function from dlsym (ISO C has no object-to-function
 * pointer conversion): copy the pointer's bytes. */
#define RESOLVE(h, field, name)                \
  do {                                         \
    void *f_ = sym(h, name);                   \
    memcpy(&g_from_lib.field, &f_, sizeof f_); \
  } while (0)

static const unload_api *api_of(void *h, int plugin) {
  if (plugin) {
    unload_plugin_fn get;
    void *f = sym(h, UNLOAD_PLUGIN_SYMBOL);
    memcpy(&get, &f, sizeof f);
    return get();
  }
  /* The inline paths are the program's own code: through the library, the
   * slow paths serve every call. */
  RESOLVE(h, pool_create, "ak_pool_create_inline");
  RESOLVE(h, pool_destroy, "ak_pool_destroy");
  RESOLVE(h, pool_alloc, "ak_pool_alloc_slow");
  RESOLVE(h, pool_free, "ak_pool_free_slow");
  RESOLVE(h, arena_init, "ak_arena_init");
  RESOLVE(h, arena_alloc, "ak_arena_alloc_slow");
  RESOLVE(h, arena_destroy, "ak_arena_destroy");
  RESOLVE(h, malloc_fn, "ak_malloc");
  RESOLVE(h, free_fn, "ak_free");
  return &g_from_lib;
}

/* The thread: uses every pool and the malloc, then outlives the close. */
static void *user(void *arg) {
  cycle *c = arg;
  for (int m = 0; m < NMODES; m++) {
    void *held[64];
    for (int i = 0; i < 64; i++) held[i] = c->api->pool_alloc(c->pools[m]);
    for (int i = 0; i < 64; i++) {
      if (!held[i]) die("pool_alloc", "NULL");
      c->api->pool_free(c->pools[m], held[i]);
    }
  }
  void *b = c->api->malloc_fn(100);
  if (!b) die("ak_malloc", "NULL");
  c->api->free_fn(b);
  pthread_barrier_wait(&c->used);
  pthread_barrier_wait(&c->closed); /* the object is closed now */
  return NULL;                      /* thread exit: the library's destructors run */
}

int main(int argc, char **argv) {
  if (argc != 4) die("usage", "unload_ctest lib|plugin OBJECT.so CYCLES");
  int plugin = strcmp(argv[1], "plugin") == 0;
  int cycles = atoi(argv[3]);
  for (int n = 0; n < cycles; n++) {
    void *h = dlopen(argv[2], RTLD_LAZY | RTLD_LOCAL);
    if (!h) die("dlopen", dlerror());
    cycle c;
    memset(&c, 0, sizeof c);
    c.api = api_of(h, plugin);
    for (int m = 0; m < NMODES; m++) {
      ak_pool_options o;
      memset(&o, 0, sizeof o);
      o.object_size = 48;
      o.sync = g_modes[m];
      o.name = "unload";
      c.pools[m] = c.api->pool_create(&o, AK_POOL_INLINE_ABI);
      if (!c.pools[m]) die("ak_pool_create", strerror(errno));
    }
    ak_arena a;
    if (c.api->arena_init(&a, NULL) != 0 || !c.api->arena_alloc(&a, 1000, 16)) die("arena", "");
    pthread_barrier_init(&c.used, NULL, 2);
    pthread_barrier_init(&c.closed, NULL, 2);
    pthread_t t;
    if (pthread_create(&t, NULL, user, &c) != 0) die("pthread_create", "");
    pthread_barrier_wait(&c.used);
    for (int m = 0; m < NMODES; m++) c.api->pool_destroy(c.pools[m]);
    c.api->arena_destroy(&a);
    if (dlclose(h) != 0) die("dlclose", dlerror());
    pthread_barrier_wait(&c.closed);
    pthread_join(t, NULL);
    pthread_barrier_destroy(&c.used);
    pthread_barrier_destroy(&c.closed);
  }
  printf("unload_ctest: %d cycles of dlopen, use, dlclose, thread exit\n", cycles);
  return 0;
}
