/* plaincall_helper.c - ak_pool_alloc and ak_pool_free compiled with the
 * default slow calls (the register-preserving stubs on x86-64), linked
 * into pool_plaincall_test, whose own calls are plain. */
#include <arenakit/arenakit.h>

void *ak_test_default_alloc(ak_pool *p);
void ak_test_default_free(ak_pool *p, void *obj);
int ak_test_default_preserving(void);

void *ak_test_default_alloc(ak_pool *p) { return ak_pool_alloc(p); }
void ak_test_default_free(ak_pool *p, void *obj) { ak_pool_free(p, obj); }
int ak_test_default_preserving(void) { return AK_SLOWCALL_PRESERVING; }
