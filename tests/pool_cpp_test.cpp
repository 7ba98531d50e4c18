/* SPDX-License-Identifier: MIT */
// pool_cpp_test.cpp - behaviour of the C++ layer over the fixed-size pool:
// ak::object_pool<T> (create/destroy, make_unique, sync modes, threads),
// ak::pool_set and ak::pool_allocator<T> (node-based containers), and
// ak::pool_resource (std::pmr over size classes).
#include <gtest/gtest.h>
#include <arenakit/arenakit.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <forward_list>
#include <limits>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace {

bool aligned(const void *p, std::size_t align) {
  return (reinterpret_cast<std::uintptr_t>(p) & (align - 1)) == 0;
}

const char *sync_name(ak_sync s) {
  switch (s) {
    case AK_SYNC_THREADS: return "THREADS";
    case AK_SYNC_NONE: return "NONE";
    case AK_SYNC_SPINLOCK: return "SPINLOCK";
    case AK_SYNC_LOCKFREE: return "LOCKFREE";
  }
  return "?";
}

// Options whose sync field holds 42, as a C caller could pass (a C++
// static_cast of 42 to ak_sync would be undefined).
ak_pool_options bad_sync_opts() {
  ak_pool_options o{};
  const int bad = 42;
  static_assert(sizeof(o.sync) == sizeof bad);
  std::memcpy(&o.sync, &bad, sizeof bad);
  return o;
}

std::string sync_param_name(const ::testing::TestParamInfo<ak_sync> &info) { return sync_name(info.param); }

// Counts constructions and destructions (single-threaded tests only).
struct Counted {
  static int ctors;
  static int dtors;
  int v;
  std::string s;
  Counted(int x, std::string str) : v(x), s(std::move(str)) { ++ctors; }
  Counted(const Counted &) = delete;
  Counted &operator=(const Counted &) = delete;
  ~Counted() { ++dtors; }
};
int Counted::ctors = 0;
int Counted::dtors = 0;

struct CountReset {
  CountReset() { Counted::ctors = Counted::dtors = 0; }
};

struct MayThrow {
  int v;
  explicit MayThrow(int x) : v(x) {
    if (x < 0) throw std::runtime_error("MayThrow: planned failure");
  }
};

struct alignas(64) Aligned64 {
  int v;
  explicit Aligned64(int x) : v(x) {}
};

struct alignas(256) Aligned256 {
  char bytes[300];  // sizeof == 512
  explicit Aligned256(char c) { std::memset(bytes, c, sizeof bytes); }
};

// 64 bytes whose every word depends on the id: if two live objects shared
// a byte, one of them would fail intact().
struct Payload {
  std::uint64_t id;
  std::uint64_t words[6];
  std::uintptr_t self;
  explicit Payload(std::uint64_t i) : id(i), self(reinterpret_cast<std::uintptr_t>(this)) {
    for (int k = 0; k < 6; k++) words[k] = (i + static_cast<std::uint64_t>(k)) * 0x9E3779B97F4A7C15ull;
  }
  ~Payload() {
    id = ~id;  // a destroyed object never looks intact again
  }
  bool intact(std::uint64_t i) const {
    if (id != i || self != reinterpret_cast<std::uintptr_t>(this)) return false;
    for (int k = 0; k < 6; k++) {
      if (words[k] != (i + static_cast<std::uint64_t>(k)) * 0x9E3779B97F4A7C15ull) return false;
    }
    return true;
  }
};
static_assert(sizeof(Payload) == 64);

// Starts threads whose exceptions are recorded instead of ending the
// program (std::terminate), so a failing allocation fails the test with
// its reason, ak_last_error() of that thread included.
class GuardedThreads {
 public:
  template <class F>
  void spawn(F f) {
    threads_.emplace_back([this, f]() mutable {
      try {
        f();
      } catch (const std::exception &e) {
        record(std::string(e.what()) + " (ak_last_error: '" + ak_last_error() + "')");
      } catch (...) {
        record("unknown exception");
      }
    });
  }
  // Joins every thread; returns the recorded errors ("" if none).
  std::string join() {
    for (auto &t : threads_) t.join();
    threads_.clear();
    std::string all;
    for (const auto &e : errors_) all += e + "; ";
    errors_.clear();
    return all;
  }

 private:
  void record(std::string e) {
    std::lock_guard<std::mutex> lock(mu_);
    errors_.push_back(std::move(e));
  }
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::vector<std::string> errors_;
};

// Live objects (given by address and size) must not overlap.
template <class T>
void expect_disjoint(std::vector<T *> ptrs) {
  std::sort(ptrs.begin(), ptrs.end(), std::less<T *>());
  for (std::size_t i = 1; i < ptrs.size(); i++) {
    ASSERT_LE(reinterpret_cast<std::uintptr_t>(ptrs[i - 1]) + sizeof(T),
              reinterpret_cast<std::uintptr_t>(ptrs[i]))
        << "objects " << i - 1 << " and " << i << " overlap";
  }
}

// ---------------------------------------------------------------------------
// ak::object_pool<T>: construction, destruction, unique_ptr

TEST(PoolCppObjectPool, CreateAndDestroyRunConstructorsAndDestructors) {
  CountReset reset;
  ak::object_pool<Counted> pool;
  std::vector<Counted *> objs;
  for (int i = 0; i < 1000; i++)
    objs.push_back(pool.create(i, std::string(30, static_cast<char>('a' + i % 26))));
  EXPECT_EQ(Counted::ctors, 1000);
  EXPECT_EQ(Counted::dtors, 0);
  EXPECT_EQ(pool.stats().live, 1000u);
  expect_disjoint(objs);
  for (int i = 0; i < 1000; i++) {
    ASSERT_EQ(objs[i]->v, i);
    ASSERT_EQ(objs[i]->s, std::string(30, static_cast<char>('a' + i % 26)));
    ASSERT_TRUE(pool.owns(objs[i]));
    ASSERT_TRUE(aligned(objs[i], alignof(Counted)));
  }
  for (int i = 0; i < 1000; i += 2) pool.destroy(objs[i]);
  EXPECT_EQ(Counted::dtors, 500);
  EXPECT_EQ(pool.stats().live, 500u);
  pool.destroy(nullptr);  // ignored
  EXPECT_EQ(Counted::dtors, 500);
  for (int i = 1; i < 1000; i += 2) ASSERT_EQ(objs[i]->v, i);
  for (int i = 1; i < 1000; i += 2) pool.destroy(objs[i]);
  EXPECT_EQ(Counted::dtors, 1000);
  EXPECT_EQ(pool.stats().live, 0u);
  EXPECT_FALSE(pool.owns(nullptr));
  int local = 0;
  EXPECT_FALSE(pool.owns(&local));
}

TEST(PoolCppObjectPool, MakeUniqueDestroysThroughTheDeleter) {
  CountReset reset;
  ak::object_pool<Counted> pool;
  {
    ak::object_pool<Counted>::unique_ptr a = pool.make_unique(1, "one");
    auto b = pool.make_unique(2, "two");
    static_assert(std::is_same_v<decltype(b), std::unique_ptr<Counted, ak::object_pool<Counted>::deleter>>);
    EXPECT_EQ(a->v, 1);
    EXPECT_EQ(b->s, "two");
    EXPECT_TRUE(pool.owns(a.get()));
    EXPECT_EQ(a.get_deleter().pool(), pool.get());
    EXPECT_EQ(Counted::ctors, 2);
    EXPECT_EQ(pool.stats().live, 2u);
    b.reset();
    EXPECT_EQ(Counted::dtors, 1);
    EXPECT_EQ(pool.stats().live, 1u);
    // release() hands the object back to manual management.
    Counted *raw = a.release();
    EXPECT_EQ(Counted::dtors, 1);
    pool.destroy(raw);
    EXPECT_EQ(Counted::dtors, 2);
    // A unique_ptr built by hand around create().
    ak::object_pool<Counted>::unique_ptr c(pool.create(3, "three"), pool.get_deleter());
    std::vector<ak::object_pool<Counted>::unique_ptr> v;
    for (int i = 0; i < 100; i++) v.push_back(pool.make_unique(i, "v"));
    EXPECT_EQ(pool.stats().live, 101u);
  }
  EXPECT_EQ(Counted::ctors, 103);
  EXPECT_EQ(Counted::dtors, 103);
  EXPECT_EQ(pool.stats().live, 0u);
  // A default deleter holds no pool; an empty unique_ptr never calls it.
  ak::object_pool<Counted>::unique_ptr empty;
  EXPECT_EQ(empty.get_deleter().pool(), nullptr);
}

TEST(PoolCppObjectPool, ThrowingConstructorGivesTheSlotBack) {
  for (ak_sync mode : {AK_SYNC_THREADS, AK_SYNC_NONE, AK_SYNC_SPINLOCK, AK_SYNC_LOCKFREE}) {
    SCOPED_TRACE(sync_name(mode));
    ak::object_pool<MayThrow> pool(mode);
    std::vector<MayThrow *> keep;
    for (int i = 0; i < 10; i++) keep.push_back(pool.create(i));
    const ak_pool_stats before = pool.stats();
    ASSERT_EQ(before.live, 10u);
    for (int i = 0; i < 1000; i++) EXPECT_THROW(pool.create(-1), std::runtime_error);
    EXPECT_EQ(pool.stats().live, before.live);
    EXPECT_THROW(pool.make_unique(-5), std::runtime_error);
    EXPECT_EQ(pool.stats().live, before.live);
    // 1000 failed constructions took no new slabs: every slot came back.
    EXPECT_EQ(pool.stats().slabs, before.slabs);
    for (int i = 0; i < 10; i++) EXPECT_EQ(keep[i]->v, i);
    for (MayThrow *p : keep) pool.destroy(p);
    EXPECT_EQ(pool.stats().live, 0u);
  }
}

TEST(PoolCppObjectPool, OverAlignedTypesAreAligned) {
  ak::object_pool<Aligned64> p64;
  ak::object_pool<Aligned256> p256;
  EXPECT_EQ(p64.stats().object_size, sizeof(Aligned64));
  EXPECT_EQ(p256.stats().object_size, sizeof(Aligned256));
  std::vector<Aligned64 *> a;
  std::vector<Aligned256 *> b;
  for (int i = 0; i < 2000; i++) {
    a.push_back(p64.create(i));
    ASSERT_TRUE(aligned(a.back(), 64)) << a.back();
    b.push_back(p256.create(static_cast<char>(i)));
    ASSERT_TRUE(aligned(b.back(), 256)) << b.back();
  }
  expect_disjoint(a);
  expect_disjoint(b);
  for (int i = 0; i < 2000; i++) {
    ASSERT_EQ(a[i]->v, i);
    for (char c : b[i]->bytes) ASSERT_EQ(c, static_cast<char>(i));
  }
  for (auto *p : a) p64.destroy(p);
  for (auto *p : b) p256.destroy(p);
  // A larger alignment in the options wins over alignof(T).
  ak_pool_options o{};
  o.align = 128;
  ak::object_pool<int> wide(o);
  for (int i = 0; i < 100; i++) {
    int *p = wide.create(i);
    ASSERT_TRUE(aligned(p, 128)) << p;
    wide.destroy(p);
  }
}

TEST(PoolCppObjectPool, OptionsComeFromTheTypeAndTheCaller) {
  ak_pool_options o{};
  o.object_size = 1;  // replaced by sizeof(T)
  o.max_objects = 3;
  o.name = "cpp-capped";
  ak::object_pool<Payload> pool(o);
  EXPECT_EQ(pool.stats().object_size, sizeof(Payload));
  EXPECT_GE(pool.stats().slot_size, sizeof(Payload));
  EXPECT_STREQ(ak_pool_name(pool.get()), "cpp-capped");
  Payload *x = pool.create(1u), *y = pool.create(2u), *z = pool.create(3u);
  EXPECT_THROW(pool.create(4u), std::bad_alloc);
  EXPECT_THROW(pool.make_unique(4u), std::bad_alloc);
  EXPECT_EQ(pool.stats().live, 3u);
  pool.destroy(y);
  Payload *w = pool.create(5u);
  EXPECT_TRUE(w->intact(5u));
  EXPECT_TRUE(x->intact(1u));
  EXPECT_TRUE(z->intact(3u));
  pool.destroy(x);
  pool.destroy(z);
  pool.destroy(w);
  EXPECT_EQ(pool.stats().peak_live, 3u);
}

TEST(PoolCppObjectPool, BadOptionsThrowWithTheReason) {
  ak_pool_options o{};
  o.slab_size = 3000;  // not a power of two
  try {
    ak::object_pool<int> p(o);
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument &e) {
    EXPECT_NE(std::string(e.what()).find("ak::object_pool: "), std::string::npos) << e.what();
    EXPECT_GT(std::strlen(e.what()), std::strlen("ak::object_pool: ")) << "ak_last_error() text missing";
  }
  EXPECT_THROW(ak::object_pool<int>{bad_sync_opts()}, std::invalid_argument);
  ak_pool_options odd{};
  odd.align = 96;  // larger than alignof(int) but not a power of two: not "fixed"
  EXPECT_THROW(ak::object_pool<int>{odd}, std::invalid_argument);
  ak_pool_options file{};
  file.backing = AK_BACKING_FILE;
  file.path = "/nonexistent-arenakit-dir/pool.bin";
  try {
    ak::object_pool<int> p(file);
    ADD_FAILURE() << "no exception";
  } catch (const std::system_error &e) {
    EXPECT_EQ(e.code(), std::errc::no_such_file_or_directory) << e.what();
    EXPECT_NE(std::string(e.what()).find("ak::object_pool"), std::string::npos) << e.what();
  }
}

TEST(PoolCppObjectPool, MoveHandsOverThePool) {
  static_assert(!std::is_copy_constructible_v<ak::object_pool<int>>);
  static_assert(!std::is_copy_assignable_v<ak::object_pool<int>>);
  static_assert(std::is_nothrow_move_constructible_v<ak::object_pool<int>>);
  static_assert(std::is_nothrow_move_assignable_v<ak::object_pool<int>>);
  CountReset reset;
  ak::object_pool<Counted> a;
  ak_pool *raw = a.get();
  Counted *c = a.create(7, "seven");
  auto u = a.make_unique(8, "eight");
  ak::object_pool<Counted> b(std::move(a));
  EXPECT_EQ(a.get(), nullptr);  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(b.get(), raw);
  EXPECT_TRUE(b.owns(c));
  EXPECT_EQ(c->s, "seven");
  EXPECT_EQ(b.stats().live, 2u);
  b.destroy(c);
  u.reset();  // the deleter holds the ak_pool, which moved along
  EXPECT_EQ(Counted::dtors, 2);
  EXPECT_EQ(b.stats().live, 0u);

  // Move assignment destroys the destination's pool and takes the source's.
  ak::object_pool<Counted> d(AK_SYNC_NONE);
  Counted *e = b.create(9, "nine");
  d = std::move(b);
  EXPECT_EQ(b.get(), nullptr);  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(d.get(), raw);
  EXPECT_EQ(e->v, 9);
  ak::object_pool<Counted> &alias = d;
  d = std::move(alias);  // self-move: nothing happens
  EXPECT_EQ(d.get(), raw);
  d.destroy(e);
  // A moved-from pool can be assigned to and used again.
  a = ak::object_pool<Counted>(AK_SYNC_SPINLOCK);
  ASSERT_NE(a.get(), nullptr);
  a.destroy(a.create(1, "x"));
  EXPECT_EQ(Counted::ctors, Counted::dtors);
}

TEST(PoolCppObjectPool, ReserveTrimAndStats) {
  ak::object_pool<Payload> pool(AK_SYNC_NONE);
  const std::size_t slabs0 = pool.stats().slabs;
  pool.reserve(5000);
  const ak_pool_stats r = pool.stats();
  EXPECT_GT(r.slabs, slabs0);
  EXPECT_EQ(r.live, 0u);
  std::vector<Payload *> v;
  for (std::uint64_t i = 0; i < 5000; i++) v.push_back(pool.create(i));
  EXPECT_EQ(pool.stats().slab_allocs, r.slab_allocs) << "reserve() did not make room for 5000";
  EXPECT_EQ(pool.stats().live, 5000u);
  for (std::uint64_t i = 0; i < 5000; i++) ASSERT_TRUE(v[i]->intact(i));
  for (Payload *p : v) pool.destroy(p);
  pool.trim();
  EXPECT_EQ(pool.stats().live, 0u);
  EXPECT_EQ(pool.stats().slabs, 0u);
}

// ---------------------------------------------------------------------------
// ak::object_pool<T>: every sync mode, one thread and four

class PoolCppSync : public ::testing::TestWithParam<ak_sync> {};

TEST_P(PoolCppSync, CreateDestroyKeepsObjectsDisjointAndIntact) {
  ak::object_pool<Payload> pool(GetParam());
  std::mt19937 rng(12345);
  std::vector<std::pair<Payload *, std::uint64_t>> live;
  std::uint64_t next = 0;
  for (int round = 0; round < 4; round++) {
    for (int i = 0; i < 5000; i++) {
      live.emplace_back(pool.create(next), next);
      ASSERT_TRUE(pool.owns(live.back().first));
      ASSERT_TRUE(aligned(live.back().first, alignof(Payload)));
      next++;
    }
    std::vector<Payload *> ptrs;
    for (auto &e : live) ptrs.push_back(e.first);
    expect_disjoint(ptrs);
    for (auto &e : live) ASSERT_TRUE(e.first->intact(e.second)) << e.second;
    std::shuffle(live.begin(), live.end(), rng);
    for (std::size_t i = 0; i < live.size() / 2; i++) pool.destroy(live[i].first);
    live.erase(live.begin(), live.begin() + static_cast<std::ptrdiff_t>(live.size() / 2));
    ASSERT_EQ(pool.stats().live, live.size());
  }
  for (auto &e : live) ASSERT_TRUE(e.first->intact(e.second));
  for (auto &e : live) pool.destroy(e.first);
  EXPECT_EQ(pool.stats().live, 0u);
  const std::size_t before = pool.stats().slabs;
  pool.trim();
  EXPECT_LE(pool.stats().slabs, before);
  // Usable after trim.
  auto u = pool.make_unique(77u);
  EXPECT_TRUE(u->intact(77u));
}

// destroy() of a trivially destructible type leaves the nullptr test to
// ak_pool_free (no branch of its own): nullptr is still ignored in every mode.
TEST_P(PoolCppSync, DestroyNullOfATrivialTypeIsIgnored) {
  ak::object_pool<std::uint64_t> pool(GetParam());
  std::vector<std::uint64_t *> v;
  for (std::uint64_t i = 0; i < 100; i++) v.push_back(pool.create(i));
  pool.destroy(nullptr);
  EXPECT_EQ(pool.stats().live, 100u);
  for (std::uint64_t i = 0; i < 100; i++) {
    ASSERT_EQ(*v[i], i);
    pool.destroy(v[i]);
  }
  pool.destroy(nullptr);
  EXPECT_EQ(pool.stats().live, 0u);
}

INSTANTIATE_TEST_SUITE_P(AllModes, PoolCppSync,
                         ::testing::Values(AK_SYNC_THREADS, AK_SYNC_NONE, AK_SYNC_SPINLOCK, AK_SYNC_LOCKFREE),
                         sync_param_name);

class PoolCppThreads : public ::testing::TestWithParam<ak_sync> {};

// Four threads create and destroy 100k objects each; every fourth object is
// handed to the next thread, which checks and destroys it (cross-thread
// free). Objects are checked when destroyed: an overlap of two live objects
// or a slot handed out twice would break a pattern.
TEST_P(PoolCppThreads, FourThreadsCreateAndDestroyAcrossThreads) {
  constexpr int kThreads = 4;
  constexpr std::uint64_t kPerThread = 100000;
  constexpr std::size_t kWindow = 64;
  ak::object_pool<Payload> pool(GetParam());

  struct Inbox {
    std::mutex mu;
    std::vector<std::pair<Payload *, std::uint64_t>> items;
  };
  Inbox inbox[kThreads];
  std::atomic<std::uint64_t> created{0}, destroyed{0}, bad{0}, foreign{0};
  std::atomic<int> ready{0};

  auto check_and_destroy = [&](Payload *p, std::uint64_t id) {
    if (!p->intact(id)) bad.fetch_add(1, std::memory_order_relaxed);
    pool.destroy(p);
    destroyed.fetch_add(1, std::memory_order_relaxed);
  };

  auto worker = [&](int t) {
    ready.fetch_add(1);
    while (ready.load() < kThreads) std::this_thread::yield();
    std::vector<std::pair<Payload *, std::uint64_t>> window;
    std::vector<std::pair<Payload *, std::uint64_t>> mail;
    window.reserve(kWindow);
    for (std::uint64_t i = 0; i < kPerThread; i++) {
      const std::uint64_t id = (static_cast<std::uint64_t>(t) << 32) | i;
      Payload *p = pool.create(id);
      if (!pool.owns(p) || !aligned(p, alignof(Payload))) foreign.fetch_add(1, std::memory_order_relaxed);
      created.fetch_add(1, std::memory_order_relaxed);
      if (window.size() < kWindow) {
        window.emplace_back(p, id);
      } else {
        const std::size_t slot = static_cast<std::size_t>(i * 7919u % kWindow);
        std::pair<Payload *, std::uint64_t> victim = window[slot];
        window[slot] = {p, id};
        if (i % 4 == 0) {
          Inbox &next = inbox[(t + 1) % kThreads];
          std::lock_guard<std::mutex> lock(next.mu);
          next.items.push_back(victim);
        } else {
          check_and_destroy(victim.first, victim.second);
        }
      }
      if (i % 32 == 0) {
        {
          std::lock_guard<std::mutex> lock(inbox[t].mu);
          mail.swap(inbox[t].items);
        }
        for (auto &m : mail) check_and_destroy(m.first, m.second);
        mail.clear();
      }
    }
    for (auto &w : window) check_and_destroy(w.first, w.second);
  };

  GuardedThreads threads;
  for (int t = 0; t < kThreads; t++) threads.spawn([&worker, t] { worker(t); });
  const std::string errors = threads.join();
  for (auto &box : inbox) {
    for (auto &m : box.items) check_and_destroy(m.first, m.second);
  }
  ASSERT_EQ(errors, "") << "a thread failed";
  EXPECT_EQ(bad.load(), 0u) << "an object was overwritten while live";
  EXPECT_EQ(foreign.load(), 0u) << "an object was misaligned or not owned by the pool";
  EXPECT_EQ(created.load(), kThreads * kPerThread);
  EXPECT_EQ(destroyed.load(), created.load());
  EXPECT_EQ(pool.stats().live, 0u);
  pool.trim();
  EXPECT_EQ(pool.stats().live, 0u);
}

INSTANTIATE_TEST_SUITE_P(ConcurrentModes, PoolCppThreads,
                         ::testing::Values(AK_SYNC_THREADS, AK_SYNC_LOCKFREE, AK_SYNC_SPINLOCK),
                         sync_param_name);

// ---------------------------------------------------------------------------
// ak::pool_set and ak::pool_allocator<T>

// Records the pointers that single-object allocate() calls return, so a test
// can check that container nodes come from the pools (ak_pool_owns needs the
// start of a slot, which a node's element address is not).
struct Record {
  std::vector<void *> nodes;   // allocate(1)
  std::vector<void *> arrays;  // allocate(n != 1)
};
Record *g_record = nullptr;

template <class T>
struct recording_allocator : ak::pool_allocator<T> {
  template <class U>
  struct rebind {
    using other = recording_allocator<U>;
  };
  recording_allocator(std::shared_ptr<ak::pool_set> set) : ak::pool_allocator<T>(std::move(set)) {}
  template <class U>
  recording_allocator(const recording_allocator<U> &other) : ak::pool_allocator<T>(other) {}
  T *allocate(std::size_t n) {
    T *p = ak::pool_allocator<T>::allocate(n);
    if (g_record) (n == 1 ? g_record->nodes : g_record->arrays).push_back(p);
    return p;
  }
};

struct RecordScope {
  Record rec;
  RecordScope() { g_record = &rec; }
  ~RecordScope() { g_record = nullptr; }
};

std::size_t set_live(const ak::pool_set &set) {
  std::size_t live = 0;
  set.for_each([&](ak_pool *p) {
    ak_pool_stats s;
    ak_pool_stats_get(p, &s);
    live += s.live;
  });
  return live;
}

std::size_t set_pools(const ak::pool_set &set) {
  std::size_t n = 0;
  set.for_each([&](ak_pool *) { n++; });
  return n;
}

bool owned_by_some_pool(const ak::pool_set &set, const void *p) {
  bool owned = false;
  set.for_each([&](ak_pool *pool) { owned = owned || ak_pool_owns(pool, p); });
  return owned;
}

TEST(PoolCppAllocator, ListNodesComeFromThePools) {
  auto set = std::make_shared<ak::pool_set>();
  RecordScope rs;
  {
    std::list<int, recording_allocator<int>> l(set);
    for (int i = 0; i < 5000; i++) l.push_back(i * 3);
    int i = 0;
    for (int x : l) ASSERT_EQ(x, 3 * i++);
    EXPECT_EQ(i, 5000);
    ASSERT_EQ(rs.rec.nodes.size(), 5000u);
    EXPECT_TRUE(rs.rec.arrays.empty());
    for (void *p : rs.rec.nodes) {
      ASSERT_TRUE(owned_by_some_pool(*set, p)) << p;
      ASSERT_TRUE(set->owns(p)) << p;
    }
    EXPECT_EQ(set_pools(*set), 1u) << "one node type, one pool";
    EXPECT_EQ(set_live(*set), 5000u);
    l.remove_if([](int x) { return x % 2 == 0; });
    EXPECT_EQ(set_live(*set), 2500u);
  }
  EXPECT_EQ(set_live(*set), 0u);
}

TEST(PoolCppAllocator, MapAndSetNodesComeFromThePools) {
  auto set = std::make_shared<ak::pool_set>();
  RecordScope rs;
  using Alloc = recording_allocator<std::pair<const int, std::string>>;
  std::map<int, std::string, std::less<int>, Alloc> m(set);
  for (int i = 0; i < 3000; i++) m.emplace(i, std::to_string(i * 7));
  std::set<long, std::less<long>, recording_allocator<long>> s(set);
  for (long i = 0; i < 3000; i++) s.insert(-i);
  ASSERT_EQ(m.size(), 3000u);
  for (const auto &kv : m) ASSERT_EQ(kv.second, std::to_string(kv.first * 7));
  ASSERT_EQ(s.size(), 3000u);
  EXPECT_EQ(*s.begin(), -2999);
  ASSERT_EQ(rs.rec.nodes.size(), 6000u);
  for (void *p : rs.rec.nodes) ASSERT_TRUE(owned_by_some_pool(*set, p)) << p;
  EXPECT_EQ(set_pools(*set), 2u) << "map and set nodes differ in size";
  EXPECT_EQ(set_live(*set), 6000u);
  for (int i = 0; i < 3000; i += 3) m.erase(i);
  EXPECT_EQ(set_live(*set), 5000u);
  m.clear();
  s.clear();
  EXPECT_EQ(set_live(*set), 0u);
}

TEST(PoolCppAllocator, UnorderedMapNodesFromPoolsBucketsFromOperatorNew) {
  auto set = std::make_shared<ak::pool_set>();
  RecordScope rs;
  using Alloc = recording_allocator<std::pair<const std::uint64_t, double>>;
  std::unordered_map<std::uint64_t, double, std::hash<std::uint64_t>, std::equal_to<std::uint64_t>, Alloc> m(
      set);
  for (std::uint64_t i = 0; i < 4000; i++) m[i * 1000003u] = static_cast<double>(i) / 2;
  ASSERT_EQ(m.size(), 4000u);
  for (std::uint64_t i = 0; i < 4000; i++) ASSERT_EQ(m.at(i * 1000003u), static_cast<double>(i) / 2);
  ASSERT_EQ(rs.rec.nodes.size(), 4000u);
  for (void *p : rs.rec.nodes) ASSERT_TRUE(set->owns(p)) << p;
  ASSERT_FALSE(rs.rec.arrays.empty()) << "bucket arrays were expected";
  EXPECT_EQ(set_live(*set), 4000u);
  m.clear();
  EXPECT_EQ(set_live(*set), 0u);
}

TEST(PoolCppAllocator, RebindEqualityAndTraits) {
  auto s1 = std::make_shared<ak::pool_set>();
  auto s2 = std::make_shared<ak::pool_set>();
  ak::pool_allocator<int> x(s1), y(s1), z(s2);
  ak::pool_allocator<double> w(x);
  EXPECT_TRUE(x == y);
  EXPECT_FALSE(x != y);
  EXPECT_TRUE(x != z);
  EXPECT_TRUE(w == x);
  EXPECT_EQ(w.set(), s1);
  ak::pool_allocator<int> moved(std::move(y));
  EXPECT_EQ(y.set(), s1) << "a moved-from allocator keeps its set";  // NOLINT(bugprone-use-after-move)
  EXPECT_TRUE(moved == x);
  using traits = std::allocator_traits<ak::pool_allocator<int>>;
  static_assert(std::is_same_v<traits::rebind_alloc<long>, ak::pool_allocator<long>>);
  static_assert(!traits::is_always_equal::value);
  static_assert(traits::propagate_on_container_copy_assignment::value);
  static_assert(traits::propagate_on_container_move_assignment::value);
  static_assert(traits::propagate_on_container_swap::value);
  static_assert(std::is_nothrow_copy_constructible_v<ak::pool_allocator<int>>);
  EXPECT_EQ(s1.use_count(), 5);  // s1, x, w, moved, y
}

TEST(PoolCppAllocator, ContainersCarryTheirSetOnAssignmentAndSwap) {
  auto s1 = std::make_shared<ak::pool_set>();
  auto s2 = std::make_shared<ak::pool_set>();
  using L = std::list<std::string, ak::pool_allocator<std::string>>;
  L a(s1), b(s2);
  for (int i = 0; i < 100; i++) a.push_back(std::string(20, static_cast<char>('a' + i % 26)));
  const std::string *first = &a.front();
  b = std::move(a);  // propagates: b steals a's nodes and takes s1
  EXPECT_EQ(b.get_allocator().set(), s1);
  EXPECT_EQ(&b.front(), first);
  ASSERT_EQ(b.size(), 100u);
  a.push_back("moved-from still works");  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(a.back(), "moved-from still works");
  L c(s2);
  c.push_back("c");
  c.swap(b);
  EXPECT_EQ(c.get_allocator().set(), s1);
  EXPECT_EQ(b.get_allocator().set(), s2);
  EXPECT_EQ(c.size(), 100u);
  EXPECT_EQ(b.front(), "c");
  L d(s2);
  d = c;  // copy assignment propagates too
  EXPECT_EQ(d.get_allocator().set(), s1);
  EXPECT_EQ(d.size(), 100u);
  EXPECT_EQ(d.back(), c.back());
  // The containers keep their sets alive after the last outside reference.
  s1.reset();
  c.push_back("still here");
  EXPECT_EQ(c.back(), "still here");
}

TEST(PoolCppAllocator, ArraysFromOperatorNewAndOverAlignedNodes) {
  auto set = std::make_shared<ak::pool_set>();
  ak::pool_allocator<Aligned64> a(set);
  Aligned64 *one = a.allocate(1);
  EXPECT_TRUE(aligned(one, 64));
  EXPECT_TRUE(set->owns(one));
  ASSERT_NE(set->find(sizeof(Aligned64), alignof(Aligned64)), nullptr);
  EXPECT_TRUE(ak_pool_owns(set->find(sizeof(Aligned64), alignof(Aligned64)), one));
  Aligned64 *three = a.allocate(3);
  EXPECT_TRUE(aligned(three, 64));
  EXPECT_FALSE(set->owns(three));
  three[2].v = 5;  // usable memory (ASan checks the bounds)
  a.deallocate(three, 3);
  a.deallocate(one, 1);
  ak::pool_allocator<Aligned256> big(set);
  Aligned256 *b = big.allocate(2);
  EXPECT_TRUE(aligned(b, 256));
  big.deallocate(b, 2);
  Aligned256 *b1 = big.allocate(1);
  EXPECT_TRUE(aligned(b1, 256));
  EXPECT_TRUE(set->owns(b1));
  big.deallocate(b1, 1);
  EXPECT_EQ(set_live(*set), 0u);
  ak::pool_allocator<double> d(set);
  const std::size_t huge = std::numeric_limits<std::size_t>::max();
  EXPECT_THROW((void)d.allocate(huge / sizeof(double) + 2), std::bad_array_new_length);
  // Nodes of an over-aligned value type.
  std::list<Aligned64, ak::pool_allocator<Aligned64>> l(set);
  for (int i = 0; i < 500; i++) l.emplace_back(i);
  int i = 0;
  for (const Aligned64 &x : l) {
    ASSERT_TRUE(aligned(&x, 64));
    ASSERT_EQ(x.v, i++);
  }
}

TEST(PoolCppAllocator, DefaultConstructedUsesTheSharedDefaultSet) {
  const std::shared_ptr<ak::pool_set> &def = ak::pool_set::default_set();
  ASSERT_NE(def, nullptr);
  EXPECT_EQ(&ak::pool_set::default_set(), &def);
  std::forward_list<int, ak::pool_allocator<int>> fl;
  for (int i = 0; i < 100; i++) fl.push_front(i);
  EXPECT_EQ(fl.get_allocator().set(), def);
  EXPECT_TRUE(ak::pool_allocator<int>() == ak::pool_allocator<long>());
  EXPECT_FALSE(ak::pool_allocator<int>() != ak::pool_allocator<long>());
  ak::pool_allocator<long> other(std::make_shared<ak::pool_set>(AK_SYNC_NONE));
  EXPECT_FALSE(ak::pool_allocator<int>() == other) << "another set: neither frees the other's blocks";
  EXPECT_TRUE(ak::pool_allocator<int>() != other);
  ak::pool_allocator<Payload> a;
  Payload *p = a.allocate(1);
  EXPECT_TRUE(def->owns(p));
  a.deallocate(p, 1);
  int expect = 99;
  for (int x : fl) ASSERT_EQ(x, expect--);
}

TEST(PoolCppAllocator, SetOptionsAndErrors) {
  // Single-threaded pools behind a map.
  auto none = std::make_shared<ak::pool_set>(AK_SYNC_NONE);
  std::map<int, int, std::less<int>, ak::pool_allocator<std::pair<const int, int>>> m(none);
  for (int i = 0; i < 1000; i++) m[i] = -i;
  EXPECT_EQ(m.at(999), -999);
  EXPECT_EQ(set_live(*none), 1000u);
  none->trim();
  EXPECT_EQ(set_live(*none), 1000u);
  // Pools are named after the base name, size and alignment.
  ak_pool_options base{};
  base.name = "nodes";
  base.sync = AK_SYNC_SPINLOCK;
  auto named = std::make_shared<ak::pool_set>(base);
  ak_pool *p = named->get(24, 8);
  EXPECT_EQ(named->get(24, 8), p) << "one pool per key";
  EXPECT_NE(named->get(24, 16), p);
  EXPECT_STREQ(ak_pool_name(p), "nodes/24@8");
  EXPECT_EQ(named->find(32, 8), nullptr);
  // One file cannot back several pools.
  ak_pool_options file{};
  file.backing = AK_BACKING_FILE;
  file.path = "/tmp/arenakit-pool-cpp-test.bin";
  EXPECT_THROW(ak::pool_set{file}, std::invalid_argument);
  // Bad options surface at the first pool.
  auto bad = std::make_shared<ak::pool_set>(bad_sync_opts());
  ak::pool_allocator<int> ba(bad);
  EXPECT_THROW((void)ba.allocate(1), std::invalid_argument);
  EXPECT_EQ(set_pools(*bad), 0u);
}

TEST(PoolCppAllocator, ContainersAcrossThreads) {
  auto set = std::make_shared<ak::pool_set>();  // AK_SYNC_THREADS
  using Map = std::map<int, int, std::less<int>, ak::pool_allocator<std::pair<const int, int>>>;
  std::vector<std::unique_ptr<Map>> maps(4);
  GuardedThreads threads;
  for (int t = 0; t < 4; t++) {
    maps[t] = std::make_unique<Map>(set);
    threads.spawn([&, t] {
      for (int i = 0; i < 20000; i++) (*maps[t])[i] = i + t;
    });
  }
  ASSERT_EQ(threads.join(), "") << "building the maps failed";
  EXPECT_EQ(set_live(*set), 80000u);
  // Each map is checked and destroyed by another thread than its builder.
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; t++) {
    threads.spawn([&, t] {
      Map &m = *maps[(t + 1) % 4];
      for (int i = 0; i < 20000; i++) {
        if (m.at(i) != i + (t + 1) % 4) bad++;
      }
      maps[(t + 1) % 4].reset();
    });
  }
  ASSERT_EQ(threads.join(), "") << "checking the maps failed";
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(set_live(*set), 0u);
}

#if AK_HAS_PMR
// ---------------------------------------------------------------------------
// ak::pool_resource

// An upstream that counts what reaches it (thread-safe).
class CountingResource : public std::pmr::memory_resource {
 public:
  std::atomic<std::size_t> allocs{0}, deallocs{0}, bytes{0};

 protected:
  void *do_allocate(std::size_t n, std::size_t align) override {
    allocs++;
    bytes += n;
    return std::pmr::new_delete_resource()->allocate(n, align);
  }
  void do_deallocate(void *p, std::size_t n, std::size_t align) override {
    deallocs++;
    std::pmr::new_delete_resource()->deallocate(p, n, align);
  }
  bool do_is_equal(const std::pmr::memory_resource &o) const noexcept override { return this == &o; }
};

// Forwards to another resource and records each (pointer, size, alignment).
class RecordingResource : public std::pmr::memory_resource {
 public:
  explicit RecordingResource(std::pmr::memory_resource *next) : next_(next) {}
  struct Block {
    void *p;
    std::size_t bytes, align;
  };
  std::vector<Block> blocks;

 protected:
  void *do_allocate(std::size_t n, std::size_t align) override {
    void *p = next_->allocate(n, align);
    blocks.push_back({p, n, align});
    return p;
  }
  void do_deallocate(void *p, std::size_t n, std::size_t align) override { next_->deallocate(p, n, align); }
  bool do_is_equal(const std::pmr::memory_resource &o) const noexcept override { return this == &o; }

 private:
  std::pmr::memory_resource *next_;
};

std::size_t round_up(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }

TEST(PoolCppResource, SizeClassesAlignAndBoundTheWaste) {
  std::set<std::size_t> classes;
  for (std::size_t a = 1; a <= 8192; a *= 2) {
    for (std::size_t b = 0; b <= 4200; b++) {
      const std::size_t c = ak::pool_resource::size_class(b, a);
      const std::size_t need = round_up(b == 0 ? 1 : b, a);
      if (need > ak::pool_resource::max_pooled_size) {
        ASSERT_EQ(c, 0u) << b << "@" << a;
        continue;
      }
      ASSERT_GE(c, need) << b << "@" << a;
      // The class's slot alignment (largest power of two dividing it)
      // covers the request.
      ASSERT_EQ(c % a, 0u) << b << "@" << a << " -> " << c;
      if (a <= 8 && b > 24) {
        ASSERT_LT((c - b) * 4, c) << "waste over 25% at " << b;
      }
      if (a == 1) classes.insert(c);
    }
  }
  EXPECT_EQ(classes.size(), 32u);
  EXPECT_EQ(*classes.begin(), 8u);
  EXPECT_EQ(*classes.rbegin(), 4096u);
  for (std::size_t c :
       {8,   16,  24,  32,  40,  48,  56,  64,   80,   96,   112,  128,  160,  192,  224,  256,
        320, 384, 448, 512, 640, 768, 896, 1024, 1280, 1536, 1792, 2048, 2560, 3072, 3584, 4096}) {
    EXPECT_EQ(classes.count(c), 1u) << c;
  }
}

TEST(PoolCppResource, SmallRequestsComeFromPoolsAtTheirAlignment) {
  CountingResource up;
  ak::pool_resource r(AK_SYNC_THREADS, &up);
  EXPECT_EQ(r.upstream_resource(), &up);
  struct Block {
    unsigned char *p;
    std::size_t n, a;
    unsigned char fill;
  };
  std::vector<Block> blocks;
  for (std::size_t a : {1, 8, 16, 64, 512, 4096}) {
    for (std::size_t n : {0, 1, 7, 8, 9, 24, 33, 64, 65, 100, 129, 1000, 2049, 4000, 4096}) {
      if (round_up(n == 0 ? 1 : n, a) > 4096) continue;
      for (int k = 0; k < 20; k++) {
        auto *p = static_cast<unsigned char *>(r.allocate(n, a));
        ASSERT_TRUE(aligned(p, a)) << n << "@" << a;
        ASSERT_TRUE(r.owns(p)) << n << "@" << a;
        const auto fill = static_cast<unsigned char>(n + static_cast<std::size_t>(k));
        std::memset(p, fill, n);
        blocks.push_back({p, n, a, fill});
      }
    }
  }
  EXPECT_EQ(up.allocs.load(), 0u) << "small requests reached upstream";
  for (const Block &b : blocks) {
    for (std::size_t i = 0; i < b.n; i++) ASSERT_EQ(b.p[i], b.fill) << b.n << "@" << b.a;
  }
  ak_pool *c40 = r.find(40, 8);
  ASSERT_NE(c40, nullptr);
  EXPECT_EQ(c40, r.find(33, 8)) << "33 bytes and 40 bytes share the class of 40";
  EXPECT_EQ(r.find(48, 16), r.find(33, 16)) << "33 bytes at 16 round to 48";
  EXPECT_NE(r.find(48, 16), c40);
  for (const Block &b : blocks) r.deallocate(b.p, b.n, b.a);
  EXPECT_EQ(up.deallocs.load(), 0u);
  ak_pool_stats s;
  ak_pool_stats_get(r.find(100, 1), &s);
  EXPECT_EQ(s.live, 0u);
  EXPECT_EQ(s.object_size, 112u);
  r.trim();
}

TEST(PoolCppResource, LargeAndOverAlignedRequestsGoUpstream) {
  CountingResource up;
  ak::pool_resource r(AK_SYNC_NONE, &up);
  void *big = r.allocate(5000, 8);
  EXPECT_EQ(up.allocs.load(), 1u);
  EXPECT_EQ(up.bytes.load(), 5000u);
  EXPECT_FALSE(r.owns(big));
  void *edge = r.allocate(4097, 1);
  EXPECT_EQ(up.allocs.load(), 2u);
  void *wide = r.allocate(16, 8192);  // alignment above every class
  EXPECT_EQ(up.allocs.load(), 3u);
  EXPECT_TRUE(aligned(wide, 8192));
  void *rounded = r.allocate(2049, 2048);  // rounds to 4096: still pooled
  EXPECT_EQ(up.allocs.load(), 3u);
  EXPECT_TRUE(aligned(rounded, 2048));
  EXPECT_TRUE(r.owns(rounded));
  void *over = r.allocate(3000, 2048);  // rounds to 4096 too
  EXPECT_TRUE(r.owns(over));
  void *past = r.allocate(4096 + 1, 4096);  // rounds past the largest class
  EXPECT_EQ(up.allocs.load(), 4u);
  EXPECT_EQ(r.find(5000, 8), nullptr);
  r.deallocate(big, 5000, 8);
  r.deallocate(edge, 4097, 1);
  r.deallocate(wide, 16, 8192);
  r.deallocate(past, 4097, 4096);
  EXPECT_EQ(up.deallocs.load(), 4u);
  r.deallocate(rounded, 2049, 2048);
  r.deallocate(over, 3000, 2048);
  EXPECT_EQ(up.deallocs.load(), 4u);
}

TEST(PoolCppResource, PmrContainersUseThePoolsAndUpstreamForLargeBlocks) {
  CountingResource up;
  ak::pool_resource r(AK_SYNC_THREADS, &up);
  RecordingResource rec(&r);
  {
    std::pmr::map<int, std::pmr::string> m(&rec);
    for (int i = 0; i < 2000; i++) m.emplace(i, std::pmr::string(40, static_cast<char>('A' + i % 26)));
    std::pmr::list<double> l(&rec);
    for (int i = 0; i < 2000; i++) l.push_back(i * 0.25);
    std::pmr::unordered_map<int, int> um(&rec);
    for (int i = 0; i < 2000; i++) um[i] = i * i;
    ASSERT_EQ(m.size(), 2000u);
    for (const auto &kv : m) {
      ASSERT_EQ(std::string_view(kv.second), std::string(40, static_cast<char>('A' + kv.first % 26)));
      ASSERT_TRUE(r.owns(kv.second.data())) << "uses-allocator construction must reach the strings";
    }
    int i = 0;
    for (double d : l) ASSERT_EQ(d, 0.25 * i++);
    for (int k = 0; k < 2000; k++) ASSERT_EQ(um.at(k), k * k);
    // Exactly the blocks above 4096 bytes (the larger bucket arrays of
    // the unordered_map) reached upstream.
    std::size_t pooled = 0, large = 0;
    for (const auto &b : rec.blocks) {
      if (ak::pool_resource::size_class(b.bytes, b.align) != 0) {
        ASSERT_TRUE(r.owns(b.p)) << b.bytes << "@" << b.align;
        ASSERT_TRUE(aligned(b.p, b.align));
        pooled++;
      } else {
        ASSERT_GT(b.bytes, ak::pool_resource::max_pooled_size);
        ASSERT_FALSE(r.owns(b.p));
        large++;
      }
    }
    EXPECT_GE(pooled, 8000u);  // map nodes, strings, list nodes, unordered nodes
    EXPECT_GT(large, 0u);
    EXPECT_EQ(up.allocs.load(), large);

    // A growing vector leaves the pools once its buffer passes 4096 bytes.
    std::pmr::vector<std::uint32_t> v(&rec);
    for (std::uint32_t k = 0; k < 100000; k++) v.push_back(k ^ 0x5a5a5a5au);
    for (std::uint32_t k = 0; k < 100000; k++) ASSERT_EQ(v[k], k ^ 0x5a5a5a5au);
    EXPECT_FALSE(r.owns(v.data()));
    EXPECT_GT(up.allocs.load(), 0u);
    EXPECT_GE(up.bytes.load(), 100000 * sizeof(std::uint32_t));
    std::pmr::vector<std::uint32_t> small(100, 1u, &rec);
    EXPECT_TRUE(r.owns(small.data()));
  }
  EXPECT_EQ(up.allocs.load(), up.deallocs.load()) << "every upstream block came back";
  for (const auto &b : rec.blocks) {
    if (ak::pool_resource::size_class(b.bytes, b.align) == 0) continue;
    ak_pool_stats s;
    ak_pool_stats_get(r.find(b.bytes, b.align), &s);
    ASSERT_EQ(s.live, 0u) << b.bytes;
  }
}

TEST(PoolCppResource, EqualityDefaultsAndErrors) {
  ak::pool_resource a, b;
  EXPECT_TRUE(a.is_equal(a));
  EXPECT_FALSE(a.is_equal(b));
  EXPECT_FALSE(a.is_equal(*std::pmr::new_delete_resource()));
  EXPECT_EQ(a.upstream_resource(), std::pmr::get_default_resource());
  std::pmr::polymorphic_allocator<int> pa(&a), pb(&b);
  EXPECT_TRUE(pa != pb);
  EXPECT_THROW(ak::pool_resource(AK_SYNC_THREADS, nullptr), std::invalid_argument);
  ak_pool_options file{};
  file.backing = AK_BACKING_FILE;
  file.path = "/tmp/arenakit-pool-cpp-test.bin";
  EXPECT_THROW(ak::pool_resource{file}, std::invalid_argument);
  // Bad base options surface at a class's first use; upstream still works.
  ak_pool_options bad{};
  bad.slab_size = 3000;
  CountingResource up;
  ak::pool_resource r(bad, &up);
  EXPECT_THROW((void)r.allocate(16, 8), std::invalid_argument);
  void *p = r.allocate(10000, 8);
  EXPECT_EQ(up.allocs.load(), 1u);
  r.deallocate(p, 10000, 8);
  // Classes are named after the base name.
  ak_pool_options named{};
  named.name = "pmr";
  ak::pool_resource rn(named);
  void *q = rn.allocate(48, 16);
  EXPECT_STREQ(ak_pool_name(rn.find(48, 16)), "pmr/48@16");
  rn.deallocate(q, 48, 16);
}

TEST(PoolCppResource, ThreadsShareOneResource) {
  CountingResource up;
  ak::pool_resource r(AK_SYNC_THREADS, &up);
  constexpr int kThreads = 4;
  struct Box {
    std::mutex mu;
    std::vector<std::pair<unsigned char *, std::size_t>> items;
  };
  Box boxes[kThreads];
  std::atomic<int> bad{0};
  auto check_free = [&](unsigned char *p, std::size_t n) {
    for (std::size_t i = 0; i < n; i++) {
      if (p[i] != static_cast<unsigned char>(n)) {
        bad++;
        break;
      }
    }
    r.deallocate(p, n, 8);
  };
  GuardedThreads threads;
  for (int t = 0; t < kThreads; t++) {
    threads.spawn([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      for (int i = 0; i < 20000; i++) {
        const std::size_t n = 1 + rng() % 600;
        auto *p = static_cast<unsigned char *>(r.allocate(n, 8));
        std::memset(p, static_cast<int>(n & 0xff), n);
        if (i % 2 == 0) {
          std::lock_guard<std::mutex> lock(boxes[(t + 1) % kThreads].mu);
          boxes[(t + 1) % kThreads].items.emplace_back(p, n);
        } else {
          check_free(p, n);
        }
        if (i % 64 == 0) {
          std::vector<std::pair<unsigned char *, std::size_t>> mail;
          {
            std::lock_guard<std::mutex> lock(boxes[t].mu);
            mail.swap(boxes[t].items);
          }
          for (auto &m : mail) check_free(m.first, m.second);
        }
      }
    });
  }
  const std::string errors = threads.join();
  for (auto &b : boxes) {
    for (auto &m : b.items) check_free(m.first, m.second);
  }
  ASSERT_EQ(errors, "") << "a thread failed";
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(up.allocs.load(), 0u);
  for (std::size_t n = 1; n <= 600; n += 8) {
    if (ak_pool *q = r.find(n, 8)) {
      ak_pool_stats s;
      ak_pool_stats_get(q, &s);
      ASSERT_EQ(s.live, 0u) << n;
    }
  }
}
#endif

}  // namespace
