/* SPDX-License-Identifier: MIT */
/* unload_api.h - the calls unload_ctest makes into arenakit, as a table of
 * function pointers: filled by dlsym from libarenakit.so itself, or handed
 * out by a plugin that links the library (unload_plugin.c). */
#ifndef AK_TEST_UNLOAD_API_H
#define AK_TEST_UNLOAD_API_H

#include <arenakit/arenakit.h>

typedef struct unload_api {
  ak_pool *(*pool_create)(const ak_pool_options *opts, int inline_abi);
  void (*pool_destroy)(ak_pool *p);
  void *(*pool_alloc)(ak_pool *p);
  void (*pool_free)(ak_pool *p, void *obj);
  int (*arena_init)(ak_arena *a, const ak_arena_options *opts);
  void *(*arena_alloc)(ak_arena *a, size_t size, size_t align);
  void (*arena_destroy)(ak_arena *a);
  void *(*malloc_fn)(size_t n);
  void (*free_fn)(void *p);
} unload_api;

/* The plugin's one export: the table of its calls. */
typedef const unload_api *(*unload_plugin_fn)(void);
#define UNLOAD_PLUGIN_SYMBOL "unload_plugin_api"

#endif /* AK_TEST_UNLOAD_API_H */
