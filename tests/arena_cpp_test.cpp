/* SPDX-License-Identifier: MIT */
// arena_cpp_test.cpp - behaviour of the C++ layer over the region arena:
// ak::arena, make<T>/make_array<T>, ak::arena::scope, ak::arena_allocator<T>
// and ak::arena_resource.
#include <errno.h>
#include <gtest/gtest.h>
#include <arenakit/arenakit.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <list>
#include <map>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace {

bool aligned(const void *p, std::size_t align) {
  return (reinterpret_cast<std::uintptr_t>(p) & (align - 1)) == 0;
}

// Appends its id to a log when destroyed, so tests can see which
// destructors ran and in which order.
struct Tracer {
  std::vector<int> *log;
  int id;
  Tracer(std::vector<int> *l, int i) : log(l), id(i) {}
  Tracer(const Tracer &) = delete;
  Tracer &operator=(const Tracer &) = delete;
  ~Tracer() { log->push_back(id); }
};

// Default-constructible tracer for make_array: ids count up from `next`;
// construction throws when the id reaches `throw_at`.
struct ArrayTracer {
  static std::vector<int> *log;
  static int next;
  static int throw_at;
  int id;
  ArrayTracer() : id(next++) {
    if (id == throw_at) throw std::runtime_error("ArrayTracer: planned failure");
  }
  ~ArrayTracer() { log->push_back(id); }
};
std::vector<int> *ArrayTracer::log = nullptr;
int ArrayTracer::next = 0;
int ArrayTracer::throw_at = -1;

struct ArrayTracerReset {
  explicit ArrayTracerReset(std::vector<int> *l) {
    ArrayTracer::log = l;
    ArrayTracer::next = 0;
    ArrayTracer::throw_at = -1;
  }
  ~ArrayTracerReset() { ArrayTracer::log = nullptr; }
};

struct Throwing {
  std::vector<int> *log;
  explicit Throwing(std::vector<int> *l) : log(l) { throw std::runtime_error("Throwing: constructor fails"); }
  ~Throwing() { log->push_back(-1); }
};

struct Trivial {
  double d[4];
};
static_assert(std::is_trivially_destructible_v<Trivial>);

struct alignas(64) Aligned64 {
  int v;
  explicit Aligned64(int x) : v(x) {}
};
struct alignas(4096) Aligned4096 {
  int v;
  std::string s;  // not trivially destructible: a cleanup is registered too
  Aligned4096(int x, std::string str) : v(x), s(std::move(str)) {}
};

struct alignas(64) Traced64 {
  std::vector<int> *log;
  explicit Traced64(std::vector<int> *l) : log(l) {}
  ~Traced64() { log->push_back(64); }
};

struct Big {
  char bytes[8192];
};

ak_arena_options budget(std::size_t max_bytes) {
  ak_arena_options o{};
  o.max_bytes = max_bytes;
  return o;
}

// ---------------------------------------------------------------------------
// make<T>: construction, destructor registration and order

TEST(ArenaCppMake, ConstructsWithArgumentsInArenaMemory) {
  ak::arena a;
  std::string *s = a.make<std::string>(100, 'x');
  int *i = a.make<int>(42);
  ASSERT_NE(s, nullptr);
  ASSERT_NE(i, nullptr);
  EXPECT_EQ(*s, std::string(100, 'x'));
  EXPECT_EQ(*i, 42);
  EXPECT_TRUE(a.owns(s));
  EXPECT_TRUE(a.owns(i));
  EXPECT_TRUE(aligned(s, alignof(std::string)));
}

TEST(ArenaCppMake, DestructorsRunInReverseOrderAtClear) {
  std::vector<int> log;
  ak::arena a;
  for (int i = 0; i < 5; i++) a.make<Tracer>(&log, i);
  EXPECT_TRUE(log.empty());
  a.clear();
  EXPECT_EQ(log, (std::vector<int>{4, 3, 2, 1, 0}));
  // The records were consumed: a second clear runs nothing again.
  a.clear();
  EXPECT_EQ(log.size(), 5u);
  // The arena is reusable after a clear and the order holds again.
  a.make<Tracer>(&log, 10);
  a.make<Tracer>(&log, 11);
  a.clear();
  EXPECT_EQ(log, (std::vector<int>{4, 3, 2, 1, 0, 11, 10}));
}

TEST(ArenaCppMake, DestructorsRunInReverseOrderAtDestruction) {
  std::vector<int> log;
  {
    ak::arena a;
    for (int i = 0; i < 100; i++) a.make<Tracer>(&log, i);
    EXPECT_TRUE(log.empty());
  }
  ASSERT_EQ(log.size(), 100u);
  for (int i = 0; i < 100; i++) EXPECT_EQ(log[i], 99 - i);
}

TEST(ArenaCppMake, RestoreDestroysOnlyObjectsMadeAfterTheMark) {
  std::vector<int> log;
  ak::arena a;
  a.make<Tracer>(&log, 0);
  a.make<Tracer>(&log, 1);
  ak::arena::mark m = a.save();
  a.make<Tracer>(&log, 2);
  a.make<Tracer>(&log, 3);
  a.make<Tracer>(&log, 4);
  a.restore(m);
  EXPECT_EQ(log, (std::vector<int>{4, 3, 2}));
  a.make<Tracer>(&log, 5);
  a.clear();
  EXPECT_EQ(log, (std::vector<int>{4, 3, 2, 5, 1, 0}));
}

TEST(ArenaCppMake, TriviallyDestructibleTypesRegisterNothing) {
  std::vector<int> log;
  ak::arena a;
  // `requested` counts requested bytes exactly (no padding): a trivial
  // type costs its size only, a non-trivial one a cleanup record too.
  std::size_t before = a.stats().requested;
  Trivial *t = a.make<Trivial>();
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(a.stats().requested - before, sizeof(Trivial));
  before = a.stats().requested;
  a.make<int>(7);
  EXPECT_EQ(a.stats().requested - before, sizeof(int));
  before = a.stats().requested;
  a.make<Tracer>(&log, 1);
  EXPECT_GT(a.stats().requested - before, sizeof(Tracer));
  // make_array of a trivial type: the elements only.
  before = a.stats().requested;
  a.make_array<Trivial>(10);
  EXPECT_EQ(a.stats().requested - before, 10 * sizeof(Trivial));
}

TEST(ArenaCppMake, OverAlignedTypesAreAligned) {
  std::vector<int> log;
  ak::arena a;
  for (int i = 0; i < 20; i++) {
    a.allocate(1, 1);  // misalign the bump pointer
    Aligned64 *p = a.make<Aligned64>(i);
    EXPECT_TRUE(aligned(p, 64)) << p;
    EXPECT_EQ(p->v, i);
  }
  for (int i = 0; i < 4; i++) {
    a.allocate(3, 1);
    Aligned4096 *p = a.make<Aligned4096>(i, std::string(50, 'q'));
    EXPECT_TRUE(aligned(p, 4096)) << p;
    EXPECT_TRUE(a.owns(p));
    EXPECT_EQ(p->v, i);
    EXPECT_EQ(p->s, std::string(50, 'q'));
  }
  a.allocate(5, 1);
  Traced64 *t = a.make<Traced64>(&log);
  EXPECT_TRUE(aligned(t, 64));
  struct alignas(256) Cell {
    int x;
  };
  a.allocate(7, 1);
  Cell *cells = a.make_array<Cell>(3);
  EXPECT_TRUE(aligned(cells, 256));
  EXPECT_EQ(cells[2].x, 0);
  a.clear();
  EXPECT_EQ(log, (std::vector<int>{64}));
}

TEST(ArenaCppMake, ThrowingConstructorRegistersNothingAndArenaStaysUsable) {
  std::vector<int> log;
  ak::arena a;
  a.make<Tracer>(&log, 1);
  EXPECT_THROW(a.make<Throwing>(&log), std::runtime_error);
  EXPECT_TRUE(log.empty()) << "no destructor may run for an object whose constructor threw";
  int *i = a.make<int>(5);
  EXPECT_TRUE(a.owns(i));
  EXPECT_EQ(*i, 5);
  a.make<Tracer>(&log, 2);
  a.clear();
  EXPECT_EQ(log, (std::vector<int>{2, 1})) << "the throwing object must not be destroyed at clear";
}

TEST(ArenaCppMake, OutOfMemoryThrowsBadAllocAndNothrowReturnsNull) {
  ak::arena a(budget(4096));
  EXPECT_THROW(a.make<Big>(), std::bad_alloc);
  errno = 0;
  EXPECT_EQ(a.make_nothrow<Big>(), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  int *p = a.make_nothrow<int>(3);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(*p, 3);
}

TEST(ArenaCppMake, CleanupRegistrationFailureDestroysTheObject) {
  // The budget holds the object exactly, not its cleanup record: make must
  // destroy the object it built and throw, and clear must not destroy it
  // a second time.
  std::vector<int> log;
  ak::arena a(budget(sizeof(Traced64)));
  EXPECT_THROW(a.make<Traced64>(&log), std::bad_alloc);
  EXPECT_EQ(log, (std::vector<int>{64}));
  a.clear();
  EXPECT_EQ(log, (std::vector<int>{64}));

  std::vector<int> log2;
  ak::arena b(budget(sizeof(Traced64)));
  EXPECT_EQ(b.make_nothrow<Traced64>(&log2), nullptr);
  EXPECT_EQ(log2, (std::vector<int>{64}));
}

TEST(ArenaCppMake, ArrayIsValueInitialisedAndDestroyedInReverse) {
  std::vector<int> log;
  ArrayTracerReset reset(&log);
  ak::arena a;
  // Dirty the memory first so value-initialisation is visible.
  ak::arena::mark m = a.save();
  std::memset(a.allocate(4096, 64), 0xAB, 4096);
  a.restore(m);
  int *ints = a.make_array<int>(1000);
  for (int i = 0; i < 1000; i++) ASSERT_EQ(ints[i], 0) << i;

  a.make<Tracer>(&log, 100);
  ArrayTracer *arr = a.make_array<ArrayTracer>(5);
  for (int i = 0; i < 5; i++) EXPECT_EQ(arr[i].id, i);
  a.make<Tracer>(&log, 200);
  EXPECT_NE(a.make_array<ArrayTracer>(0), nullptr);
  a.clear();
  EXPECT_EQ(log, (std::vector<int>{200, 4, 3, 2, 1, 0, 100}));
}

TEST(ArenaCppMake, ArrayThrowingElementUnwindsBuiltElements) {
  std::vector<int> log;
  ArrayTracerReset reset(&log);
  ak::arena a;
  ArrayTracer::throw_at = 3;
  EXPECT_THROW(a.make_array<ArrayTracer>(6), std::runtime_error);
  EXPECT_EQ(log, (std::vector<int>{2, 1, 0}));
  a.clear();
  EXPECT_EQ(log, (std::vector<int>{2, 1, 0})) << "nothing may be registered for a failed array";
}

TEST(ArenaCppMake, ArraySizeOverflowThrowsBadAlloc) {
  ak::arena a;
  EXPECT_THROW(a.make_array<Trivial>(std::numeric_limits<std::size_t>::max()), std::bad_alloc);
  EXPECT_THROW(a.make_array<std::string>(std::numeric_limits<std::size_t>::max() / 2), std::bad_alloc);
  // n * sizeof(T) wraps around to a small size (2^64 + 8 -> 8): must not
  // be mistaken for an 8-byte request.
  EXPECT_THROW(a.make_array<double>(std::numeric_limits<std::size_t>::max() / 8 + 2), std::bad_alloc);
  EXPECT_EQ(a.stats().requested, 0u);
}

// ---------------------------------------------------------------------------
// ak::arena: construction, raw allocation, move, scope

TEST(ArenaCppArena, BadOptionsThrowInvalidArgument) {
  ak_arena_options o{};
  o.first_chunk = 1 << 20;
  o.max_chunk = 1 << 16;
  try {
    ak::arena a(o);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument &e) {
    EXPECT_NE(std::string(e.what()).find("ak_arena_init"), std::string::npos) << e.what();
  }
  alignas(16) unsigned char small[64];
  EXPECT_THROW(ak::arena(small, sizeof small), std::invalid_argument);
  EXPECT_THROW(ak::arena(nullptr, 4096), std::invalid_argument);
}

TEST(ArenaCppArena, AllocateMirrorsTheCApi) {
  ak::arena a;
  void *p = a.allocate(24);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(aligned(p, alignof(std::max_align_t)));
  EXPECT_TRUE(a.owns(p));
  void *q = a.allocate(10, 256);
  EXPECT_TRUE(aligned(q, 256));
  errno = 0;
  EXPECT_EQ(a.allocate(8, 3), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(a.stats().requested, 34u);
  EXPECT_EQ(a.get()->requested, 34u);
  a.clear();
  EXPECT_EQ(a.stats().requested, 0u);
  EXPECT_FALSE(a.owns(p));
}

TEST(ArenaCppArena, CallerBufferIsUsedFirst) {
  alignas(64) std::byte buf[2048];
  ak::arena a(buf);
  void *p = a.allocate(100, 8);
  ASSERT_NE(p, nullptr);
  EXPECT_GE(static_cast<std::byte *>(p), buf);
  EXPECT_LT(static_cast<std::byte *>(p), buf + sizeof buf);
  EXPECT_EQ(a.stats().reserved, 0u) << "nothing may come from the OS while the buffer has room";
  void *big = a.allocate(8192);
  EXPECT_TRUE(a.owns(big));
  EXPECT_GT(a.stats().reserved, 0u);

  alignas(16) unsigned char raw[512];
  ak::arena b(raw, sizeof raw);
  void *r = b.allocate(16);
  EXPECT_GE(static_cast<unsigned char *>(r), raw);
  EXPECT_LT(static_cast<unsigned char *>(r), raw + sizeof raw);
}

TEST(ArenaCppArena, MoveConstructorTransfersOwnership) {
  std::vector<int> log;
  ak::arena a;
  a.make<Tracer>(&log, 1);
  a.make<Tracer>(&log, 2);
  void *p = a.allocate(64);
  void *big = a.allocate(1 << 24);  // a dedicated chunk too
  ASSERT_NE(big, nullptr);
  std::size_t reserved = a.stats().reserved;
  {
    ak::arena b(std::move(a));
    EXPECT_TRUE(b.owns(p));
    EXPECT_TRUE(b.owns(big));
    EXPECT_EQ(b.stats().reserved, reserved);
    EXPECT_FALSE(a.owns(p));  // NOLINT(bugprone-use-after-move): the moved-from state is specified
    EXPECT_FALSE(a.owns(big));
    EXPECT_EQ(a.stats().reserved, 0u);
    EXPECT_EQ(a.stats().chunks, 0u);
    EXPECT_EQ(a.stats().requested, 0u);
    // The moved-from arena is an empty, usable arena.
    void *q = a.allocate(32);
    EXPECT_TRUE(a.owns(q));
    EXPECT_FALSE(b.owns(q));
    a.clear();
    EXPECT_TRUE(log.empty()) << "clearing the moved-from arena must not run the moved cleanups";
  }
  EXPECT_EQ(log, (std::vector<int>{2, 1})) << "the moved-to arena runs the cleanups once, in order";
}

TEST(ArenaCppArena, MoveAssignmentDestroysOldContentsAndTakesOver) {
  std::vector<int> log;
  ak::arena a;
  ak::arena b;
  b.make<Tracer>(&log, 10);
  a.make<Tracer>(&log, 1);
  a.make<Tracer>(&log, 2);
  void *p = a.allocate(128);
  b = std::move(a);
  EXPECT_EQ(log, (std::vector<int>{10})) << "assignment destroys what the target held";
  EXPECT_TRUE(b.owns(p));
  EXPECT_FALSE(a.owns(p));  // NOLINT(bugprone-use-after-move)
  ak::arena &alias = b;
  b = std::move(alias);  // self-move: nothing happens
  EXPECT_TRUE(b.owns(p));
  EXPECT_EQ(log, (std::vector<int>{10}));
  b.clear();
  EXPECT_EQ(log, (std::vector<int>{10, 2, 1}));
}

TEST(ArenaCppArena, MoveKeepsTheCallerBuffer) {
  alignas(64) std::byte buf[1024];
  ak::arena a(buf);
  void *p = a.allocate(64);
  ak::arena b(std::move(a));
  EXPECT_TRUE(b.owns(p));
  void *q = b.allocate(64);
  EXPECT_GE(static_cast<std::byte *>(q), buf);
  EXPECT_LT(static_cast<std::byte *>(q), buf + sizeof buf);
  void *r = a.allocate(64);  // NOLINT(bugprone-use-after-move)
  EXPECT_FALSE(static_cast<std::byte *>(r) >= buf && static_cast<std::byte *>(r) < buf + sizeof buf)
      << "the moved-from arena must not use the buffer any more";
}

TEST(ArenaCppArena, ScopeGuardUnwinds) {
  std::vector<int> log;
  ak::arena a;
  a.make<Tracer>(&log, 0);
  void *before_p = a.allocate(16);
  ak_arena_stats before = a.stats();
  void *inner = nullptr;
  {
    ak::arena::scope s(a);
    a.make<Tracer>(&log, 1);
    {
      ak::arena::scope s2(a);
      a.make<Tracer>(&log, 2);
      a.make<Tracer>(&log, 3);
      inner = a.allocate(std::size_t{1} << 27);  // over max_chunk / 4: a dedicated chunk, returned at unwind
    }
    EXPECT_EQ(log, (std::vector<int>{3, 2}));
    EXPECT_FALSE(a.owns(inner));
    a.make<Tracer>(&log, 4);
  }
  EXPECT_EQ(log, (std::vector<int>{3, 2, 4, 1}));
  ak_arena_stats after = a.stats();
  EXPECT_EQ(after.requested, before.requested);
  EXPECT_EQ(after.used, before.used);
  EXPECT_EQ(after.reserved, before.reserved);
  EXPECT_TRUE(a.owns(before_p));
}

TEST(ArenaCppArena, ScopeGuardUnwindsOnException) {
  std::vector<int> log;
  ak::arena a;
  std::size_t used = a.stats().used;
  try {
    ak::arena::scope s(a);
    a.make<Tracer>(&log, 1);
    a.make<Tracer>(&log, 2);
    throw std::runtime_error("leave the scope");
  } catch (const std::runtime_error &) {
  }
  EXPECT_EQ(log, (std::vector<int>{2, 1}));
  EXPECT_EQ(a.stats().used, used);
}

// ---------------------------------------------------------------------------
// ak::arena_allocator<T>

template <class T>
using avec = std::vector<T, ak::arena_allocator<T>>;

TEST(ArenaCppAllocator, VectorContentsComeFromTheArena) {
  ak::arena a;
  avec<int> v(a);
  for (int i = 0; i < 10000; i++) v.push_back(i * 3);
  ASSERT_EQ(v.size(), 10000u);
  for (int i = 0; i < 10000; i++) ASSERT_EQ(v[i], i * 3);
  EXPECT_TRUE(a.owns(v.data()));
  EXPECT_TRUE(a.owns(&v.back()));
  EXPECT_GT(a.stats().requested, 10000 * sizeof(int));
  EXPECT_TRUE(v.get_allocator() == ak::arena_allocator<int>(a));
}

TEST(ArenaCppAllocator, AllocatorsAreEqualWhenTheyShareTheArena) {
  ak::arena a, b;
  ak::arena_allocator<int> ai(a);
  EXPECT_TRUE(ai == ak::arena_allocator<double>(a));
  EXPECT_FALSE(ai != ak::arena_allocator<double>(a));
  EXPECT_FALSE(ai == ak::arena_allocator<double>(b));
  EXPECT_TRUE(ai != ak::arena_allocator<double>(b));
  EXPECT_TRUE(ak::arena_allocator<char>(ai) == ai) << "a rebound copy uses the same arena";
}

TEST(ArenaCppAllocator, MapAndListNodesComeFromTheArena) {
  ak::arena a;
  using amap = std::map<int, int, std::less<int>, ak::arena_allocator<std::pair<const int, int>>>;
  amap m(a);
  for (int i = 0; i < 1000; i++) m.emplace(i, i * i);
  ASSERT_EQ(m.size(), 1000u);
  for (const auto &kv : m) {
    ASSERT_EQ(kv.second, kv.first * kv.first);
    ASSERT_TRUE(a.owns(&kv)) << kv.first;
  }
  std::list<double, ak::arena_allocator<double>> l(a);
  for (int i = 0; i < 1000; i++) l.push_front(i * 0.5);
  int i = 999;
  for (const double &d : l) {
    ASSERT_EQ(d, i * 0.5);
    ASSERT_TRUE(a.owns(&d));
    i--;
  }
  EXPECT_EQ(i, -1);
}

TEST(ArenaCppAllocator, OverAlignedValueType) {
  ak::arena a;
  avec<Aligned64> v(a);
  for (int i = 0; i < 100; i++) v.emplace_back(i);
  for (const Aligned64 &x : v) ASSERT_TRUE(aligned(&x, 64));
  ak::arena_allocator<Aligned4096> big(a);
  Aligned4096 *p = big.allocate(2);
  EXPECT_TRUE(aligned(p, 4096));
  EXPECT_TRUE(a.owns(p));
  big.deallocate(p, 2);
}

TEST(ArenaCppAllocator, SizeOverflowThrowsBadAlloc) {
  ak::arena a;
  ak::arena_allocator<int> ai(a);
  ak::arena_allocator<Big> ab(a);
  const std::size_t huge = std::numeric_limits<std::size_t>::max();
  EXPECT_THROW((void)ai.allocate(huge), std::bad_alloc);
  EXPECT_THROW((void)ab.allocate(huge / 2), std::bad_alloc);
  // A count whose byte size wraps to a small number (2^64 + 8 -> 8).
  ak::arena_allocator<double> ad(a);
  EXPECT_THROW((void)ad.allocate(huge / sizeof(double) + 2), std::bad_alloc);
  // No overflow, but no memory either: still std::bad_alloc.
  ak::arena small(budget(1 << 16));
  ak::arena_allocator<char> ac(small);
  EXPECT_THROW((void)ac.allocate(1 << 20), std::bad_alloc);
  EXPECT_EQ(a.stats().requested, 0u);
}

TEST(ArenaCppAllocator, EqualityFollowsTheArena) {
  ak::arena a, b;
  ak::arena_allocator<int> x(a), y(a), z(b);
  ak::arena_allocator<double> w(x);  // rebind keeps the arena
  EXPECT_TRUE(x == y);
  EXPECT_FALSE(x != y);
  EXPECT_TRUE(x != z);
  EXPECT_TRUE(w == x);
  EXPECT_EQ(w.get(), a.get());
  using traits = std::allocator_traits<ak::arena_allocator<int>>;
  static_assert(std::is_same_v<traits::rebind_alloc<long>, ak::arena_allocator<long>>);
  static_assert(!traits::is_always_equal::value);
  static_assert(!traits::propagate_on_container_copy_assignment::value);
  static_assert(!traits::propagate_on_container_move_assignment::value);
  static_assert(!traits::propagate_on_container_swap::value);
}

TEST(ArenaCppAllocator, ContainersKeepTheirArenaOnAssignment) {
  ak::arena a, b;
  avec<int> va(a), vb(b);
  for (int i = 0; i < 100; i++) vb.push_back(i);
  va = vb;  // copy: elements copied into a
  EXPECT_TRUE(va.get_allocator() == ak::arena_allocator<int>(a));
  EXPECT_TRUE(a.owns(va.data()));
  EXPECT_FALSE(b.owns(va.data()));
  avec<int> va2(a);
  va2 = std::move(vb);  // move across arenas: elements moved into a
  EXPECT_TRUE(a.owns(va2.data()));
  ASSERT_EQ(va2.size(), 100u);
  EXPECT_EQ(va2[99], 99);
  // Within one arena a move steals the buffer.
  const int *data = va.data();
  avec<int> va3(a);
  va3 = std::move(va);
  EXPECT_EQ(va3.data(), data);
}

#if AK_HAS_PMR
// ---------------------------------------------------------------------------
// ak::arena_resource

TEST(ArenaCppResource, PmrContainersComeFromTheArena) {
  ak::arena a;
  ak::arena_resource r(a);
  std::pmr::vector<int> v(&r);
  for (int i = 0; i < 5000; i++) v.push_back(-i);
  for (int i = 0; i < 5000; i++) ASSERT_EQ(v[i], -i);
  EXPECT_TRUE(a.owns(v.data()));

  std::pmr::string s(&r);
  for (int i = 0; i < 200; i++) s += static_cast<char>('a' + i % 26);
  ASSERT_EQ(s.size(), 200u);
  EXPECT_EQ(s[27], 'b');
  EXPECT_TRUE(a.owns(s.data()));

  std::pmr::unordered_map<int, std::pmr::string> m(&r);
  for (int i = 0; i < 500; i++) m.emplace(i, std::string(40, static_cast<char>('A' + i % 26)));
  ASSERT_EQ(m.size(), 500u);
  for (const auto &kv : m) {
    ASSERT_EQ(std::string_view(kv.second), std::string(40, static_cast<char>('A' + kv.first % 26)));
    ASSERT_TRUE(a.owns(&kv));
    ASSERT_TRUE(a.owns(kv.second.data())) << "uses-allocator construction must reach the strings";
  }
}

TEST(ArenaCppResource, AlignmentEqualityAndExhaustion) {
  ak::arena a;
  ak::arena_resource r(a), r2(a);
  void *p = r.allocate(100, 4096);
  EXPECT_TRUE(aligned(p, 4096));
  EXPECT_TRUE(a.owns(p));
  r.deallocate(p, 100, 4096);
  EXPECT_TRUE(r.is_equal(r));
  EXPECT_FALSE(r.is_equal(r2));
  EXPECT_FALSE(r.is_equal(*std::pmr::new_delete_resource()));

  ak::arena small(budget(1 << 16));
  ak::arena_resource rs(small);
  std::pmr::vector<char> v(&rs);
  EXPECT_THROW(v.reserve(1 << 20), std::bad_alloc);
}
#endif

}  // namespace
