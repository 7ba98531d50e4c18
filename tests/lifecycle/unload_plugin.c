/* SPDX-License-Identifier: MIT */
/* unload_plugin.c - a plugin linked against arenakit (the shared library or
 * the static one): it hands unload_ctest its calls, which go through the
 * inline paths compiled here and the library's slow paths. */
#include "unload_api.h"

static void *plugin_pool_alloc(ak_pool *p) { return ak_pool_alloc(p); }
static void plugin_pool_free(ak_pool *p, void *obj) { ak_pool_free(p, obj); }
static void *plugin_arena_alloc(ak_arena *a, size_t size, size_t align) {
  return ak_arena_alloc(a, size, align);
}

static const unload_api g_api = {
    ak_pool_create_inline, ak_pool_destroy,  plugin_pool_alloc, plugin_pool_free, ak_arena_init,
    plugin_arena_alloc,    ak_arena_destroy, ak_malloc,         ak_free,
};

__attribute__((visibility("default"))) const unload_api *unload_plugin_api(void) { return &g_api; }
