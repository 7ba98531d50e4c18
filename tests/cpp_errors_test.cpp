/* SPDX-License-Identifier: MIT */
// cpp_errors_test.cpp - the C++ layer's error reporting and option types:
// out-of-memory throws ak::bad_alloc (a std::bad_alloc) whose what() names
// the C++ call and carries ak_last_error()'s reason; ak::arena_options is
// the arena's options type.
#include <gtest/gtest.h>

#include <arenakit/arenakit.hpp>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

namespace {

struct Big {
  char bytes[8192];
};

struct Small {
  int v;
  explicit Small(int x) : v(x) {}
};

// The message of the exception `f` throws, which must be an ak::bad_alloc.
template <class F>
std::string bad_alloc_text(F &&f) {
  try {
    f();
  } catch (const ak::bad_alloc &e) {
    return e.what();
  } catch (const std::exception &e) {
    return std::string("a different exception: ") + e.what();
  }
  return "nothing thrown";
}

}  // namespace

TEST(CppErrors, BadAllocIsAStdBadAlloc) {
  static_assert(std::is_base_of_v<std::bad_alloc, ak::bad_alloc>);
  ak::arena_options o{};
  o.max_bytes = 4096;
  ak::arena a(o);
  EXPECT_THROW(a.make<Big>(), std::bad_alloc);
  EXPECT_THROW(a.make<Big>(), ak::bad_alloc);
}

TEST(CppErrors, ArenaMakeCarriesTheBudgetReason) {
  ak::arena_options o{};
  o.max_bytes = 4096;
  ak::arena a(o);
  std::string what = bad_alloc_text([&] { a.make<Big>(); });
  EXPECT_EQ(what.rfind("ak::arena::make: ak_arena_alloc: ", 0), 0u) << what;
  EXPECT_NE(what.find("exceed the budget"), std::string::npos) << what;
  what = bad_alloc_text([&] { a.make_array<Big>(2); });
  EXPECT_EQ(what.rfind("ak::arena::make_array: ak_arena_alloc: ", 0), 0u) << what;
}

TEST(CppErrors, AllocatorAndResourceCarryTheReason) {
  ak::arena_options o{};
  o.max_bytes = 4096;
  ak::arena a(o);
  ak::arena_allocator<Big> alloc(a);
  std::string what = bad_alloc_text([&] { (void)alloc.allocate(1); });
  EXPECT_EQ(what.rfind("ak::arena_allocator::allocate: ak_arena_alloc: ", 0), 0u) << what;
#if AK_HAS_PMR
  ak::arena_resource res(a);
  what = bad_alloc_text([&] { (void)res.allocate(1 << 20, 8); });
  EXPECT_EQ(what.rfind("ak::arena_resource::allocate: ak_arena_alloc: ", 0), 0u) << what;
#endif
}

TEST(CppErrors, PoolAtItsCapCarriesTheReason) {
  ak_pool_options po{};
  po.max_objects = 2;
  ak::object_pool<Small> pool(po);
  Small *x = pool.create(1), *y = pool.create(2);
  std::string what = bad_alloc_text([&] { pool.create(3); });
  EXPECT_EQ(what.rfind("ak::object_pool::create: ", 0), 0u) << what;
  EXPECT_NE(what.find("ak_pool_alloc"), std::string::npos) << what;
  pool.destroy(x);
  pool.destroy(y);
}

TEST(CppErrors, BadAllocTextIsCutToItsBufferAndDefaultsWithoutAReason) {
  std::string long_reason(1000, 'x');
  ak::bad_alloc e("who", long_reason.c_str());
  EXPECT_EQ(std::strlen(e.what()), 319u);
  EXPECT_EQ(std::string(e.what()).rfind("who: xxx", 0), 0u);
  EXPECT_STREQ(ak::bad_alloc("ak::x", "").what(), "ak::x: out of memory");
  EXPECT_STREQ(ak::bad_alloc("ak::x", nullptr).what(), "ak::x: out of memory");
}

TEST(CppErrors, ArenaOptionsIsTheArenaOptionsType) {
  static_assert(std::is_same_v<ak::arena_options, ak_arena_options>);
  std::byte buffer[4096];
  ak::arena_options o{};
  o.buffer = buffer;
  o.buffer_size = sizeof buffer;
  ak::arena a(o);
  void *p = a.allocate(64);
  ASSERT_NE(p, nullptr);
  EXPECT_GE(static_cast<std::byte *>(p), buffer);
  EXPECT_LT(static_cast<std::byte *>(p), buffer + sizeof buffer);
  std::vector<int, ak::arena_allocator<int>> v(ak::arena_allocator<int>{a});
  v.push_back(1);
  EXPECT_EQ(v.front(), 1);
}
