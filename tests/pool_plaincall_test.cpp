// pool_plaincall_test.cpp - code built with AK_PLAIN_SLOW_CALLS (plain
// calls to the pool's slow paths) and code built with the default
// (register-preserving stubs on x86-64, arenakit/slowcall.h) in one
// program, on the same pools: objects allocated through one are freed
// through the other, in every sync mode.
#define AK_PLAIN_SLOW_CALLS 1
#include <arenakit/arenakit.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

static_assert(AK_SLOWCALL_PRESERVING == 0, "AK_PLAIN_SLOW_CALLS must select plain calls");

extern "C" {
void *ak_test_default_alloc(ak_pool *p);  // tests/plaincall_helper.c
void ak_test_default_free(ak_pool *p, void *obj);
int ak_test_default_preserving(void);
}

namespace {

const ak_sync kModes[] = {AK_SYNC_NONE, AK_SYNC_SPINLOCK, AK_SYNC_LOCKFREE, AK_SYNC_THREADS};

TEST(PoolPlainCalls, TheDefaultPreservesOnX86_64) {
#if defined(__x86_64__) && !defined(__ILP32__) && defined(__ELF__)
  EXPECT_EQ(ak_test_default_preserving(), 1);
#else
  EXPECT_EQ(ak_test_default_preserving(), 0);
#endif
}

// Enough objects for several slabs, so both kinds of call create, fill,
// empty and release slabs; each object carries its index.
TEST(PoolPlainCalls, MixWithTheDefaultCallsOnOnePool) {
  for (ak_sync mode : kModes) {
    SCOPED_TRACE(mode);
    ak_pool_options o{};
    o.object_size = 48;
    o.sync = mode;
    ak_pool *p = ak_pool_create(&o);
    ASSERT_NE(p, nullptr) << ak_last_error();
    for (int round = 0; round < 3; round++) {
      std::vector<void *> v;
      for (std::size_t i = 0; i < 20000; i++) {
        void *x = i % 2 ? ak_pool_alloc(p) : ak_test_default_alloc(p);
        ASSERT_NE(x, nullptr);
        std::memcpy(x, &i, sizeof i);
        v.push_back(x);
      }
      EXPECT_EQ(std::set<void *>(v.begin(), v.end()).size(), v.size()) << "an object was handed out twice";
      for (std::size_t i = 0; i < v.size(); i++) {
        std::size_t got;
        std::memcpy(&got, v[i], sizeof got);
        ASSERT_EQ(got, i) << "object " << i << " was overwritten";
        if (i % 3)
          ak_pool_free(p, v[i]);
        else
          ak_test_default_free(p, v[i]);
      }
      ak_pool_stats st;
      ak_pool_stats_get(p, &st);
      EXPECT_EQ(st.live, 0u);
    }
    ak_pool_destroy(p);
  }
}

}  // namespace
