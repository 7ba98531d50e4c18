/* SPDX-License-Identifier: MIT */
/* arenakit/arenakit.hpp - the header-only C++17 layer of arenakit.
 *
 * A thin layer over the C API of <arenakit/arenakit.h>: it wraps the C calls
 * and adds RAII, types and exceptions, nothing else (no allocation policy of
 * its own: each call here is one C call plus what C++ needs around it).
 * Everything lives in namespace `ak`; helpers in `ak::detail` are not part
 * of the API.
 *
 * Sections:
 *   - arena: ak::arena (RAII owner of an ak_arena, typed make<T>() with
 *     destructors run at clear/destroy/restore), ak::arena::scope,
 *     ak::arena_allocator<T> (STL allocator), ak::arena_resource
 *     (std::pmr::memory_resource).
 *   - pool: ak::object_pool<T> (RAII owner of an ak_pool, create/destroy,
 *     a unique_ptr deleter), ak::pool_set (pools keyed by size and
 *     alignment), ak::pool_allocator<T> (STL allocator for node-based
 *     containers), ak::pool_resource (std::pmr::memory_resource over pools
 *     of size classes). Thread-safety there follows each pool's sync mode.
 *
 * Errors: the C API reports failure with NULL and errno. Here, functions
 * that return raw memory (allocate) keep that convention; functions that
 * return typed objects or serve the standard library throw ak::bad_alloc (a
 * std::bad_alloc whose what() carries ak_last_error()'s reason) on
 * out-of-memory, and constructors throw std::invalid_argument on bad options.
 *
 * Thread-safety: as in C, an arena is not synchronised. Use one arena (and
 * everything bound to it: allocators, resources, scopes) per thread, or
 * guard it with your own lock. Different arenas may be used concurrently.
 */
#ifndef ARENAKIT_ARENAKIT_HPP
#define ARENAKIT_ARENAKIT_HPP

/* C++17 or later (MSVC reports its language level in _MSVC_LANG). An older
 * standard gets this one error and none of the header's declarations (whose
 * C++17 library names would bury it in errors of their own). */
#if defined(_MSVC_LANG)
#define AK_DETAIL_CPLUSPLUS _MSVC_LANG
#else
#define AK_DETAIL_CPLUSPLUS __cplusplus
#endif
#if AK_DETAIL_CPLUSPLUS < 201703L
#error "arenakit.hpp needs C++17 or later (compile with -std=c++17, or /std:c++17 with MSVC)"
#else

#include <arenakit/arenakit.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>

#if __has_include(<memory_resource>)
#include <memory_resource>
/** 1 when the standard library has <memory_resource> (ak::arena_resource). */
#define AK_HAS_PMR 1
#else
#define AK_HAS_PMR 0
#endif

/* The members that wrap an inline fast path of the C layer (object_pool's
 * create and destroy) are always inlined, as the C functions are: at -O2
 * GCC otherwise calls destroy() out of line (the inlined ak_pool_free
 * makes it too large for its heuristics). Internal. */
#if defined(__GNUC__) || defined(__clang__)
#define AK_CXX_FAST_PATH __attribute__((always_inline))
#else
#define AK_CXX_FAST_PATH
#endif

namespace ak {

/** What the C++ layer throws when arenakit cannot supply memory (a budget
 *  reached, the OS refused, a pool's max_objects): a std::bad_alloc, so
 *  `catch (const std::bad_alloc &)` still catches it, whose what() reads
 *  "<C++ call>: <ak_last_error()>", for example "ak::arena::make:
 *  ak_arena_alloc: 64 bytes exceed the budget of 4096". The text is copied
 *  into the object (cut at 319 bytes), so constructing it never allocates.
 *  Thread-safety: an immutable value. */
class bad_alloc : public std::bad_alloc {
 public:
  /** `who` names the C++ call; `reason` is the C library's message (an
   *  empty one reads "out of memory"). Never throws. */
  bad_alloc(const char *who, const char *reason) noexcept {
    if (!reason || !*reason) reason = "out of memory";
    std::size_t n = 0;
    for (const char *part : {who, ": ", reason})
      for (; part && *part && n + 1 < sizeof text_; part++) text_[n++] = *part;
    text_[n] = '\0';
  }
  /** The call and the reason. Never throws. */
  const char *what() const noexcept override { return text_; }

 private:
  char text_[320];
};

/** The options of an ak::arena (the C struct ak_arena_options: zero-initialise
 *  it, `ak::arena_options o{};`, and set the fields you need). */
using arena_options = ak_arena_options;

namespace detail {

/* Throws ak::bad_alloc naming `who`, with the thread's last arenakit error. */
[[noreturn]] inline void throw_bad_alloc(const char *who) { throw ak::bad_alloc(who, ak_last_error()); }

/* The base of this header's allocators: the memory source that an
 * allocator, its copies and its rebound copies draw on (an arena, a pool
 * set); whether a container's assignment and swap carry the source over
 * (`Travels`) or keep the container on the one it was built with; and the
 * equality the standard asks of allocators: equal when the source is the
 * same (then either may free what the other allocated), whatever their
 * element types. The operators are hidden friends of the base, which
 * argument-dependent lookup finds through each allocator. */
template <template <class> class Alloc, class Source, bool Travels>
class allocator_source {
 public:
  using propagate_on_container_copy_assignment = std::bool_constant<Travels>;
  using propagate_on_container_move_assignment = std::bool_constant<Travels>;
  using propagate_on_container_swap = std::bool_constant<Travels>;
  using is_always_equal = std::false_type;

  template <class T, class U>
  friend bool operator==(const Alloc<T> &x, const Alloc<U> &y) noexcept {
    return x.source_ == y.source_;
  }
  template <class T, class U>
  friend bool operator!=(const Alloc<T> &x, const Alloc<U> &y) noexcept {
    return x.source_ != y.source_;
  }

 protected:
  explicit allocator_source(Source s) noexcept : source_(std::move(s)) {}
  Source source_;
};

}  // namespace detail

/* ===========================================================================
 * arena
 * ======================================================================== */

namespace detail {

/* Cleanup trampolines handed to ak_arena_defer(). They are noexcept: an
 * exception must never unwind through the C code that runs cleanups, so a
 * throwing destructor ends the program (std::terminate), as it would when
 * thrown from any destructor. */
template <class T>
void destroy_one(void *p) noexcept {
  static_cast<T *>(p)->~T();
}

/* The record of one make_array(): first element and count. */
struct array_record {
  void *first;
  std::size_t count;
};

template <class T>
void destroy_n_reverse(T *first, std::size_t n) noexcept {
  while (n > 0) first[--n].~T();
}

template <class T>
void destroy_array(void *rec) noexcept {
  auto *r = static_cast<array_record *>(rec);
  destroy_n_reverse(static_cast<T *>(r->first), r->count);
}

}  // namespace detail

/** RAII owner of one region arena (`ak_arena`).
 *
 *  Memory handed out stays valid until clear(), the destruction of the
 *  arena, or restore() of a mark taken before it; it must never be passed
 *  to free() or delete. Objects made with make<T>() and make_array<T>() that
 *  are not trivially destructible have their destructors run at those same
 *  points, newest first.
 *
 *  Non-copyable. Movable: a move copies the C struct bit for bit and
 *  re-initialises the source as an empty arena with default options. This
 *  is sound because the struct owns its chunks and cleanups by pointer and
 *  nothing points back into it (the Valgrind pool handle is a detached id).
 *  A move transfers the memory, not the identity: allocators, resources,
 *  scopes and marks bound to the source keep referring to the source object
 *  (now empty). Move an arena before binding anything to it, for example to
 *  return it from a factory function.
 *
 *  Thread-safety, for every member below: not synchronised; use an arena
 *  from one thread at a time (one arena per thread). */
class arena {
 public:
  /** A saved position (see save() and restore()). */
  using mark = ak_arena_mark;

  /** An arena with default options. Takes no memory from the OS yet.
   *  Never throws. */
  arena() noexcept { (void)ak_arena_init(&a_, nullptr); }

  /** An arena with `opts` (see ak_arena_options; a buffer in it is used
   *  as with the buffer constructor). Takes no memory from the OS yet.
   *  Throws std::invalid_argument, with ak_last_error() as the message, when
   *  the options are inconsistent. */
  explicit arena(const ak_arena_options &opts) { init(opts); }

  /** An arena that first uses the caller's `buffer` of `size` bytes (stack
   *  or static storage), then chunks from the OS as `opts` says (its buffer
   *  fields are overridden). The arena never frees the buffer; it must stay
   *  valid until the arena is destroyed, and it stays owned by the arena a
   *  move transfers it to. Throws std::invalid_argument when `size` is below
   *  AK_ARENA_MIN_BUFFER, `buffer` is null with a nonzero size, or the
   *  options are bad ((nullptr, 0) means no buffer). */
  arena(void *buffer, std::size_t size, ak_arena_options opts = {}) {
    opts.buffer = buffer;
    opts.buffer_size = size;
    init(opts);
  }

  /** As the buffer constructor, over a std::byte array; the size check
   *  happens at compile time. */
  template <std::size_t N>
  explicit arena(std::byte (&buffer)[N], ak_arena_options opts = {}) : arena(buffer, N, opts) {
    static_assert(N >= AK_ARENA_MIN_BUFFER, "an arena buffer must hold at least AK_ARENA_MIN_BUFFER bytes");
  }

  arena(const arena &) = delete;
  arena &operator=(const arena &) = delete;

  /** Takes over everything `other` owns (chunks, cleanups, caller buffer,
   *  options); `other` becomes an empty arena with default options. See the
   *  class comment about what does not follow the move. Never throws. */
  arena(arena &&other) noexcept {
    std::memcpy(static_cast<void *>(&a_), static_cast<const void *>(&other.a_), sizeof a_);
    (void)ak_arena_init(&other.a_, nullptr);
  }

  /** Destroys this arena's contents (running its cleanups), then takes
   *  over `other` as the move constructor does. Self-move does nothing.
   *  Never throws (destructors run by the cleanups are noexcept). */
  arena &operator=(arena &&other) noexcept {
    if (this != &other) {
      ak_arena_destroy(&a_);
      std::memcpy(static_cast<void *>(&a_), static_cast<const void *>(&other.a_), sizeof a_);
      (void)ak_arena_init(&other.a_, nullptr);
    }
    return *this;
  }

  /** Runs the registered cleanups (destructors, newest first) and returns
   *  every chunk to the OS (ak_arena_destroy). */
  ~arena() { ak_arena_destroy(&a_); }

  /** Allocates `size` bytes aligned to `align` (a power of two, any size).
   *  Owned by the arena; contents unspecified; size 0 gives a unique
   *  pointer. Returns nullptr with errno EINVAL (bad align) or ENOMEM
   *  (budget or OS refused), like ak_arena_alloc(); never throws. */
  void *allocate(std::size_t size, std::size_t align = alignof(std::max_align_t)) noexcept {
    return ak_arena_alloc(&a_, size, align);
  }

  /** Frees every allocation at once, after running the cleanups (newest
   *  first); keeps chunks as the retain option says. Marks taken before
   *  become invalid. Never throws. */
  void clear() noexcept { ak_arena_clear(&a_); }

  /** Saves the current position. O(1); never throws. */
  mark save() const noexcept { return ak_arena_save(&a_); }

  /** Frees everything allocated after `m` was saved and runs the cleanups
   *  registered after it (newest first): objects made since `m` are
   *  destroyed. `m` must come from this arena, after its last clear, and
   *  not be older than a mark already restored past. Never throws. */
  void restore(const mark &m) noexcept { ak_arena_restore(&a_, m); }

  /** True if `p` points into memory handed out by this arena.
   *  O(number of chunks); never throws. */
  bool owns(const void *p) const noexcept { return ak_arena_owns(&a_, p); }

  /** The arena's statistics (see ak_arena_stats). Never throws. */
  ak_arena_stats stats() const noexcept {
    ak_arena_stats s;
    ak_arena_stats_get(&a_, &s);
    return s;
  }

  /** The underlying C arena, for the C API. Still owned by this object:
   *  never ak_arena_destroy() it yourself. Its address changes with a move
   *  of this object (it is a member). */
  ak_arena *get() noexcept { return &a_; }
  /** As get(), read-only. */
  const ak_arena *get() const noexcept { return &a_; }

  /** Constructs a T from `args` in arena memory aligned to alignof(T)
   *  (over-aligned types included) and returns it. Ownership stays with
   *  the arena: never delete the result. Unless T is trivially
   *  destructible, ~T() is registered to run at clear(), destruction, or
   *  restore of an earlier mark, in reverse order of creation.
   *  Errors: throws ak::bad_alloc if the memory or the cleanup record
   *  cannot be allocated (then nothing stays constructed). If T's
   *  constructor throws, the exception propagates, nothing is registered
   *  and the bytes are abandoned until the next clear. */
  template <class T, class... Args>
  T *make(Args &&...args) {
    static_assert(std::is_object_v<T> && !std::is_array_v<T>,
                  "make<T>: T must be a complete non-array object type");
    void *mem = allocate(sizeof(T), alignof(T));
    if (!mem) detail::throw_bad_alloc("ak::arena::make");
    T *obj = ::new (mem) T(std::forward<Args>(args)...);
    if constexpr (!std::is_trivially_destructible_v<T>) {
      if (ak_arena_defer(&a_, &detail::destroy_one<T>, obj) != 0) {
        obj->~T();
        detail::throw_bad_alloc("ak::arena::make");
      }
    }
    return obj;
  }

  /** As make<T>(), but returns nullptr instead of throwing ak::bad_alloc
   *  (errno is ENOMEM). Exceptions from T's constructor still propagate, as
   *  with `new (std::nothrow) T`. */
  template <class T, class... Args>
  T *make_nothrow(Args &&...args) {
    static_assert(std::is_object_v<T> && !std::is_array_v<T>,
                  "make_nothrow<T>: T must be a complete non-array object type");
    void *mem = allocate(sizeof(T), alignof(T));
    if (!mem) return nullptr;
    T *obj = ::new (mem) T(std::forward<Args>(args)...);
    if constexpr (!std::is_trivially_destructible_v<T>) {
      if (ak_arena_defer(&a_, &detail::destroy_one<T>, obj) != 0) {
        obj->~T();
        return nullptr;
      }
    }
    return obj;
  }

  /** Constructs `n` value-initialised T (zero for scalars) contiguously,
   *  aligned to alignof(T), and returns the first; n == 0 gives a unique
   *  pointer to no element. Owned by the arena. Unless T is trivially
   *  destructible, one cleanup is registered that destroys the elements in
   *  reverse order (last element first).
   *  Errors: throws std::bad_array_new_length if n * sizeof(T) overflows, ak::bad_alloc if memory
   *  runs out. If an element's constructor throws, the elements already
   *  built are destroyed in reverse order, nothing is registered and the
   *  exception propagates. */
  template <class T>
  T *make_array(std::size_t n) {
    static_assert(std::is_object_v<T> && !std::is_array_v<T>,
                  "make_array<T>: T must be a complete non-array object type");
    if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) throw std::bad_array_new_length();
    void *mem = allocate(n * sizeof(T), alignof(T));
    if (!mem) detail::throw_bad_alloc("ak::arena::make_array");
    T *first = static_cast<T *>(mem);
    if constexpr (std::is_trivially_destructible_v<T>) {
      for (std::size_t i = 0; i < n; ++i) ::new (static_cast<void *>(first + i)) T();
    } else {
      if (n == 0) return first;
      /* The record is taken before any element exists, so its failure
       * needs no unwinding. */
      void *rmem = allocate(sizeof(detail::array_record), alignof(detail::array_record));
      if (!rmem) detail::throw_bad_alloc("ak::arena::make_array");
      std::size_t built = 0;
      try {
        for (; built < n; ++built) ::new (static_cast<void *>(first + built)) T();
      } catch (...) {
        detail::destroy_n_reverse(first, built);
        throw;
      }
      auto *rec = ::new (rmem) detail::array_record{first, n};
      if (ak_arena_defer(&a_, &detail::destroy_array<T>, rec) != 0) {
        detail::destroy_n_reverse(first, n);
        detail::throw_bad_alloc("ak::arena::make_array");
      }
    }
    return first;
  }

  /** RAII guard: saves the arena's position on construction and restores
   *  it on destruction, so everything allocated (and every object made) in
   *  the guard's lifetime is freed (destroyed) when it ends. Guards nest
   *  (inner ones must end first, as scopes do). Do not clear() or move the
   *  arena while a guard on it is alive. Not copyable or movable. */
  class scope {
   public:
    /** Saves `a`'s position; `a` must outlive the guard. Never throws. */
    explicit scope(arena &a) noexcept : arena_(a), mark_(a.save()) {}
    scope(const scope &) = delete;
    scope &operator=(const scope &) = delete;
    /** Restores the saved position (runs the cleanups registered since). */
    ~scope() { arena_.restore(mark_); }

   private:
    arena &arena_;
    mark mark_;
  };

 private:
  void init(const ak_arena_options &opts) {
    if (ak_arena_init(&a_, &opts) != 0) {
      throw std::invalid_argument(std::string("ak::arena: ") + ak_last_error());
    }
  }

  ak_arena a_;
};

/** A standard allocator (std::allocator_traits-conforming) that takes
 *  memory from an arena, for STL containers:
 *  `std::vector<int, ak::arena_allocator<int>> v(arena);`.
 *
 *  allocate(n) returns arena memory aligned to alignof(T); deallocate() frees
 *  nothing (the memory comes back at clear, destruction or restore; the
 *  checked and hardened builds abort on a pointer the arena did not hand out). A
 *  container using it must not outlive the arena (or a restore past its
 *  allocations), and the elements' destructors run only when the container
 *  destroys them - the arena does not register them.
 *
 *  Two allocators are equal when they use the same arena. The allocator is
 *  sticky, like std::pmr::polymorphic_allocator: propagate_on_container_
 *  copy_assignment, _move_assignment and _swap are all false, so a container
 *  keeps the arena it was constructed with for its whole life, and "does the
 *  container outlive its arena?" is decided once, at construction; an
 *  assignment can never re-tie it to another, perhaps shorter-lived, arena.
 *  Consequences: assigning between containers on different arenas copies
 *  or moves the elements one by one (moving within one arena stays O(1)),
 *  and swapping containers on different arenas is undefined behaviour (as
 *  for std::pmr) - swap only containers of the same arena.
 *
 *  Thread-safety: that of the arena (one thread). Copying is O(1). */
template <class T>
class arena_allocator : public detail::allocator_source<arena_allocator, ak_arena *, false> {
 public:
  using value_type = T;

  /** An allocator over `a` (which must outlive it). Implicit, so that a
   *  container can be built straight from an arena. Never throws. */
  arena_allocator(arena &a) noexcept : allocator_source(a.get()) {}  // NOLINT(google-explicit-constructor)
  /** An allocator over the C arena `a` (must be initialised and outlive
   *  the allocator). Never throws. */
  explicit arena_allocator(ak_arena *a) noexcept : allocator_source(a) {}
  /** Rebinding copy: same arena, another value type. Never throws. */
  template <class U>
  arena_allocator(const arena_allocator<U> &other) noexcept : allocator_source(other.get()) {}

  /** Memory for `n` T aligned to alignof(T), owned by the arena.
   *  Throws std::bad_array_new_length (a std::bad_alloc) if n * sizeof(T)
   *  overflows, ak::bad_alloc if the arena is out of memory. */
  T *allocate(std::size_t n) {
    if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) throw std::bad_array_new_length();
    void *p = ak_arena_alloc(source_, n * sizeof(T), alignof(T));
    if (!p) detail::throw_bad_alloc("ak::arena_allocator::allocate");
    return static_cast<T *>(p);
  }

  /** Frees nothing: arena memory is freed all at once. The checked and
   *  hardened builds end the process with a message (ak_arena_check_block)
   *  when `p` is not a block of this allocator's arena; a normal build
   *  ignores `p`. Never throws. */
  void deallocate(T *p, std::size_t n) noexcept {
    ak_arena_check_block(source_, p, n * sizeof(T), "ak::arena_allocator::deallocate");
  }

  /** The C arena this allocator uses. Never throws. */
  ak_arena *get() const noexcept { return source_; }
};

#if AK_HAS_PMR
/** A std::pmr::memory_resource over an arena, for the std::pmr containers:
 *  `ak::arena_resource r(arena); std::pmr::vector<int> v(&r);`.
 *
 *  do_allocate returns arena memory at the requested alignment (any power
 *  of two) and throws ak::bad_alloc when the arena cannot supply it (or
 *  the alignment is not a power of two); do_deallocate frees nothing (the
 *  checked and hardened builds abort on a pointer the arena did not hand out).
 *  Resources are equal only to themselves (pointer identity, as for
 *  std::pmr::monotonic_buffer_resource): use one resource per arena when
 *  containers are to move memory between each other in O(1).
 *
 *  Neither the resource nor the containers using it may outlive the
 *  arena. Not copyable. Thread-safety: that of the arena (one thread). */
class arena_resource : public std::pmr::memory_resource {
 public:
  /** A resource over `a` (which must outlive it). Never throws. */
  explicit arena_resource(arena &a) noexcept : a_(a.get()) {}
  /** A resource over the C arena `a` (initialised; must outlive it). */
  explicit arena_resource(ak_arena *a) noexcept : a_(a) {}
  arena_resource(const arena_resource &) = delete;
  arena_resource &operator=(const arena_resource &) = delete;

  /** The C arena this resource uses. Never throws. */
  ak_arena *get() const noexcept { return a_; }

 protected:
  void *do_allocate(std::size_t bytes, std::size_t alignment) override {
    void *p = ak_arena_alloc(a_, bytes, alignment);
    if (!p) detail::throw_bad_alloc("ak::arena_resource::allocate");
    return p;
  }
  void do_deallocate(void *p, std::size_t bytes, std::size_t) override {
    ak_arena_check_block(a_, p, bytes, "ak::arena_resource::deallocate");
  }
  bool do_is_equal(const std::pmr::memory_resource &other) const noexcept override { return this == &other; }

 private:
  ak_arena *a_;
};
#endif /* AK_HAS_PMR */

/* ===========================================================================
 * pool
 *
 * ak::object_pool<T> (RAII owner of one ak_pool of T-sized slots, with
 * create/destroy and a unique_ptr deleter), ak::pool_set (pools keyed by
 * object size and alignment, made on first use), ak::pool_allocator<T>
 * (STL allocator for node-based containers, over a shared pool_set) and
 * ak::pool_resource (std::pmr::memory_resource over pools of size classes).
 *
 * Thread-safety in this section follows the sync mode of the pools (ak_sync;
 * AK_SYNC_THREADS by default, as in C): in every mode but AK_SYNC_NONE,
 * objects may be allocated and freed from any thread, including freeing on
 * another thread than the one that allocated. AK_SYNC_NONE pools must be
 * used from one thread at a time. Constructing, moving, assigning and
 * destroying the owners below is never thread-safe (as for any object).
 * ======================================================================== */

namespace detail {

/* Throws the exception that matches the errno of a failed pool call:
 * EINVAL -> std::invalid_argument, ENOMEM -> ak::bad_alloc, anything else
 * (a failing file operation) -> std::system_error; the message is `who`
 * followed by ak_last_error(). */
[[noreturn]] inline void throw_pool_error(const char *who, int err) {
  if (err == ENOMEM) throw ak::bad_alloc(who, ak_last_error());
  std::string msg = std::string(who) + ": " + ak_last_error();
  if (err == EINVAL) throw std::invalid_argument(msg);
  throw std::system_error(err, std::generic_category(), msg);
}

/* ak_pool_create(), throwing instead of returning NULL. */
inline ak_pool *create_pool(const ak_pool_options &opts, const char *who) {
  ak_pool *p = ak_pool_create(&opts);
  if (!p) throw_pool_error(who, errno);
  return p;
}

inline bool is_pow2(std::size_t x) noexcept { return x != 0 && (x & (x - 1)) == 0; }

/* Options for one pool of a pool_set or pool_resource: `base` with the
 * object size and alignment filled in, named "<base name>/<size>". The name
 * is copied by ak_pool_create(), so `name_buf` only has to live that long. */
inline ak_pool_options member_options(const ak_pool_options &base, std::size_t size, std::size_t align,
                                      std::string &name_buf) {
  ak_pool_options o = base;
  o.object_size = size;
  o.align = align;
  name_buf = std::string(base.name ? base.name : "pool") + "/" + std::to_string(size);
  if (align != 0) name_buf += "@" + std::to_string(align);
  o.name = name_buf.c_str();
  return o;
}

/* One file cannot back several pools: every pool would truncate it. */
inline void check_multi_pool_options(const ak_pool_options &base, const char *who) {
  if (base.backing == AK_BACKING_FILE) {
    throw std::invalid_argument(std::string(who) + ": AK_BACKING_FILE cannot back several pools");
  }
}

}  // namespace detail

/** RAII owner of one fixed-size pool (`ak_pool`) whose slots hold one T
 *  each: `ak::object_pool<Node> pool; Node *n = pool.create(1, 2);
 *  ... pool.destroy(n);`.
 *
 *  Objects come from create() or make_unique() and go back with destroy()
 *  or the unique_ptr's deleter; every object is aligned to alignof(T)
 *  (over-aligned types included). The pool does not track constructed
 *  objects: destroy every object before the pool ends. The pool's
 *  destruction gives all memory back to the OS but runs no destructors, so
 *  objects still live then are abandoned (their destructors never run; the
 *  checked build reports how many).
 *
 *  Non-copyable. Movable: a move hands over the ak_pool pointer, so objects,
 *  deleters and get() pointers stay valid and keep working with the
 *  destination; the source is left empty (get() == nullptr) and may only be
 *  destroyed or assigned to.
 *
 *  Thread-safety: that of the sync mode (see the section comment);
 *  AK_SYNC_THREADS by default. */
template <class T>
class object_pool {
  static_assert(std::is_object_v<T> && !std::is_array_v<T> && !std::is_const_v<T> && !std::is_volatile_v<T>,
                "object_pool<T>: T must be a complete, non-array, non-cv object type");

 public:
  using value_type = T;

  /** The deleter of the unique_ptr that make_unique() returns: runs ~T()
   *  and gives the slot back to the pool it holds. It holds the ak_pool
   *  pointer, not the object_pool, so it keeps working after the
   *  object_pool is moved; it must not be called after the pool is
   *  destroyed. A default-constructed deleter holds no pool and can only
   *  "delete" nullptr (which std::unique_ptr never passes to it). */
  class deleter {
   public:
    /** A deleter with no pool. Never throws. */
    deleter() noexcept = default;
    /** A deleter that returns objects to `pool`. Never throws. */
    explicit deleter(ak_pool *pool) noexcept : pool_(pool) {}
    /** Destroys `*obj` and frees its slot; nullptr is ignored. `obj` must
     *  come from this deleter's pool. Never throws (~T must not throw). */
    void operator()(T *obj) const noexcept {
      if (obj) {
        obj->~T();
        ak_pool_free(pool_, obj);
      }
    }
    /** The pool objects are returned to. Never throws. */
    ak_pool *pool() const noexcept { return pool_; }

   private:
    ak_pool *pool_ = nullptr;
  };

  /** What make_unique() returns. */
  using unique_ptr = std::unique_ptr<T, deleter>;

  /** A pool with default options (AK_SYNC_THREADS, 64 KiB slabs, no cap).
   *  Throws ak::bad_alloc if the pool's bookkeeping cannot be allocated. */
  object_pool() : object_pool(ak_pool_options{}) {}

  /** A pool with default options and the sync mode `sync`. Throws
   *  std::invalid_argument when `sync` is out of range, ak::bad_alloc
   *  when memory runs out. */
  explicit object_pool(ak_sync sync) : object_pool(sync_options(sync)) {}

  /** A pool with `opts` (see ak_pool_options): object_size is set to
   *  sizeof(T) (a value given is replaced); align becomes alignof(T), or
   *  opts.align if that is a larger power of two. Errors, with
   *  "ak::object_pool: " and ak_last_error() as the message:
   *  std::invalid_argument for bad options (EINVAL), ak::bad_alloc when
   *  memory runs out, std::system_error when the file of AK_BACKING_FILE
   *  cannot be created. */
  explicit object_pool(ak_pool_options opts) {
    opts.object_size = sizeof(T);
    if (opts.align == 0 || (detail::is_pow2(opts.align) && opts.align < alignof(T))) opts.align = alignof(T);
    p_ = detail::create_pool(opts, "ak::object_pool");
  }

  object_pool(const object_pool &) = delete;
  object_pool &operator=(const object_pool &) = delete;

  /** Takes over `other`'s pool; `other` becomes empty. Never throws. */
  object_pool(object_pool &&other) noexcept : p_(std::exchange(other.p_, nullptr)) {}

  /** Destroys this object's pool (as the destructor does), then takes over
   *  `other`'s; `other` becomes empty. Self-move does nothing. Never
   *  throws. */
  object_pool &operator=(object_pool &&other) noexcept {
    if (this != &other) {
      ak_pool_destroy(p_);
      p_ = std::exchange(other.p_, nullptr);
    }
    return *this;
  }

  /** Gives every slab back (ak_pool_destroy); runs no destructors. */
  ~object_pool() { ak_pool_destroy(p_); }

  /** Constructs a T from `args` in a slot of the pool and returns it. The
   *  caller owns the object until destroy() (or a deleter) gives it back.
   *  Errors: throws ak::bad_alloc when the pool is at max_objects or
   *  memory runs out (errno ENOMEM). If T's constructor throws, the slot is
   *  freed and the exception propagates (stats().live is unchanged).
   *  Thread-safety: that of the sync mode. Requires a non-empty pool. */
  template <class... Args>
  AK_CXX_FAST_PATH T *create(Args &&...args) {
    void *mem = ak_pool_alloc(p_);
    if (!mem) detail::throw_bad_alloc("ak::object_pool::create");
    if constexpr (std::is_nothrow_constructible_v<T, Args &&...>) {
      return ::new (mem) T(std::forward<Args>(args)...);
    } else {
      try {
        return ::new (mem) T(std::forward<Args>(args)...);
      } catch (...) {
        ak_pool_free(p_, mem);
        throw;
      }
    }
  }

  /** Runs ~T() on `obj` and frees its slot; nullptr is ignored. `obj` must
   *  come from create() of this pool (or the pool it was moved from) and
   *  not be destroyed twice: anything else is undefined (aborts with a
   *  message in the checked build). From any thread in the concurrent
   *  modes. Never throws (~T must not throw). */
  AK_CXX_FAST_PATH void destroy(T *obj) noexcept {
    /* ak_pool_free ignores nullptr itself: no test of our own when there
     * is no destructor to skip, so destroy() costs what ak_pool_free does. */
    if constexpr (!std::is_trivially_destructible_v<T>) {
      if (!obj) return;
      obj->~T();
    }
    ak_pool_free(p_, obj);
  }

  /** As create(), but returns the object in a unique_ptr whose deleter
   *  destroys it and gives the slot back. The unique_ptr must not outlive
   *  the pool. Errors as create(). */
  template <class... Args>
  unique_ptr make_unique(Args &&...args) {
    return unique_ptr(create(std::forward<Args>(args)...), deleter(p_));
  }

  /** A deleter for objects of this pool (for unique_ptrs built by hand or
   *  taking over a create() result). Never throws. */
  deleter get_deleter() const noexcept { return deleter(p_); }

  /** Makes sure `n` more objects can be created without the pool asking
   *  its backing for memory (ak_pool_reserve; in AK_SYNC_THREADS the room
   *  goes to the calling thread). Throws ak::bad_alloc when memory runs
   *  out (ENOMEM), std::system_error for another error of the backing;
   *  slabs obtained before the failure stay. */
  void reserve(std::size_t n) {
    int err = ak_pool_reserve(p_, n);
    if (err != 0) detail::throw_pool_error("ak::object_pool::reserve", err);
  }

  /** Gives empty slabs and cached memory back to the OS now (ak_pool_trim).
   *  Live objects stay. Thread-safe; never throws. */
  void trim() noexcept { ak_pool_trim(p_); }

  /** True if `p` points to the start of a slot of this pool (live or not);
   *  false for any other pointer, nullptr included. O(1), thread-safe,
   *  never throws. */
  bool owns(const void *p) const noexcept { return p != nullptr && ak_pool_owns(p_, p); }

  /** The pool's statistics (see ak_pool_stats; `live` counts objects
   *  created and not yet destroyed). Exact when no other thread uses the
   *  pool. Never throws. */
  ak_pool_stats stats() const noexcept {
    ak_pool_stats s;
    ak_pool_stats_get(p_, &s);
    return s;
  }

  /** The underlying C pool (nullptr after a move), for the C API. Still
   *  owned by this object: never ak_pool_destroy() it yourself. Unlike
   *  ak::arena::get(), it stays the same when this object is moved. */
  ak_pool *get() const noexcept { return p_; }

 private:
  static ak_pool_options sync_options(ak_sync sync) noexcept {
    ak_pool_options o{};
    o.sync = sync;
    return o;
  }

  ak_pool *p_;
};

/** A set of pools, one per (object size, alignment), each made on first
 *  use: the shared state behind ak::pool_allocator, where rebinding makes
 *  one allocator serve several node types. Own it with a std::shared_ptr
 *  (`auto set = std::make_shared<ak::pool_set>();`); the allocators hold
 *  copies of that pointer, so the set lives as long as any container on it.
 *
 *  Every pool is created with the same base options (sync mode, slab size,
 *  spare slabs, ...); object_size, align and name are filled in per pool.
 *  Destroying the set destroys its pools (runs no destructors).
 *
 *  Thread-safety: get(), find(), owns() and trim() may be called from any
 *  thread at once; finding an existing pool takes no lock (a short list
 *  walk with acquire loads), creating one takes a mutex. The pools
 *  themselves synchronise as their sync mode says. Not copyable or
 *  movable (allocators point to it). */
class pool_set {
 public:
  /** A set whose pools use default options (AK_SYNC_THREADS). Never
   *  allocates until the first get(). */
  pool_set() noexcept = default;

  /** A set whose pools use default options and the sync mode `sync`. An
   *  out-of-range `sync` makes get() throw std::invalid_argument. */
  explicit pool_set(ak_sync sync) noexcept { base_.sync = sync; }

  /** A set whose pools use `base` (object_size and align are ignored; the
   *  name, default "pool", gets "/<size>@<align>" appended). The strings in
   *  `base` (name) must stay valid while the set lives. Throws
   *  std::invalid_argument for AK_BACKING_FILE (one file cannot back
   *  several pools); other bad options make get() throw. */
  explicit pool_set(const ak_pool_options &base) : base_(base) {
    detail::check_multi_pool_options(base_, "ak::pool_set");
  }

  pool_set(const pool_set &) = delete;
  pool_set &operator=(const pool_set &) = delete;

  /** Destroys every pool of the set (ak_pool_destroy). */
  ~pool_set() {
    const entry *e = head_.load(std::memory_order_acquire);
    while (e) {
      const entry *next = e->next;
      ak_pool_destroy(e->pool);
      delete e;
      e = next;
    }
  }

  /** The pool for objects of `size` bytes aligned to `align` (a power of
   *  two), created on first use. The pool belongs to the set: never destroy
   *  it. Thread-safe. Errors: throws std::invalid_argument (bad size,
   *  alignment or base options), ak::bad_alloc (out of memory) or
   *  std::system_error, with ak_last_error() in the message. */
  ak_pool *get(std::size_t size, std::size_t align) {
    ak_pool *p = find(size, align);
    return p ? p : create(size, align);
  }

  /** The pool for (`size`, `align`) if it exists, else nullptr. Lock-free
   *  and thread-safe; never throws. */
  ak_pool *find(std::size_t size, std::size_t align) const noexcept {
    for (const entry *e = head_.load(std::memory_order_acquire); e; e = e->next) {
      if (e->size == size && e->align == align) return e->pool;
    }
    return nullptr;
  }

  /** Calls `f(ak_pool *)` for every pool of the set, newest first (for
   *  statistics). Pools created meanwhile by other threads may be missed. */
  template <class F>
  void for_each(F &&f) const {
    for (const entry *e = head_.load(std::memory_order_acquire); e; e = e->next) f(e->pool);
  }

  /** True if `p` is the start of a slot of one of the set's pools
   *  (ak_pool_owns; O(number of pools)). Thread-safe; never throws. */
  bool owns(const void *p) const noexcept {
    if (!p) return false;
    for (const entry *e = head_.load(std::memory_order_acquire); e; e = e->next) {
      if (ak_pool_owns(e->pool, p)) return true;
    }
    return false;
  }

  /** ak_pool_trim() on every pool: empty memory goes back to the OS now.
   *  Thread-safe; never throws. */
  void trim() noexcept {
    for (const entry *e = head_.load(std::memory_order_acquire); e; e = e->next) ak_pool_trim(e->pool);
  }

  /** The set that default-constructed pool_allocators share: default
   *  options (AK_SYNC_THREADS), created on first call (thread-safe) and
   *  never destroyed, so containers with static storage duration may use
   *  it until the program ends. Throws ak::bad_alloc on the first call if
   *  memory runs out. */
  static const std::shared_ptr<pool_set> &default_set() {
    static const auto *set = new std::shared_ptr<pool_set>(std::make_shared<pool_set>());
    return *set;
  }

 private:
  /* Entries are immutable once published and freed only by ~pool_set, so a
   * reader that saw `head_` may walk the list without a lock. */
  struct entry {
    std::size_t size;
    std::size_t align;
    ak_pool *pool;
    const entry *next;
  };

  ak_pool *create(std::size_t size, std::size_t align) {
    std::lock_guard<std::mutex> lock(mu_);
    if (ak_pool *p = find(size, align)) return p;  // another thread won
    std::string name;
    ak_pool *p = detail::create_pool(detail::member_options(base_, size, align, name), "ak::pool_set");
    entry *e = new (std::nothrow) entry{size, align, p, head_.load(std::memory_order_relaxed)};
    if (!e) {
      ak_pool_destroy(p);
      throw ak::bad_alloc("ak::pool_set", "out of memory for the set's entry");
    }
    head_.store(e, std::memory_order_release);
    return p;
  }

  ak_pool_options base_{};
  std::atomic<const entry *> head_{nullptr};
  std::mutex mu_;
};

/** A standard allocator (std::allocator_traits-conforming) for node-based
 *  containers - std::list, std::forward_list, std::map, std::set,
 *  std::unordered_map and their multi variants:
 *  `auto set = std::make_shared<ak::pool_set>();
 *   std::map<int, int, std::less<int>, ak::pool_allocator<std::pair<const int, int>>> m(set);`
 *  (or default-construct it to use pool_set::default_set()).
 *
 *  allocate(1) - one node - comes from the set's pool for
 *  (sizeof(T), alignof(T)) of the rebound node type, made on first use.
 *  allocate(n) for n != 1 (bucket arrays of unordered containers, vectors)
 *  goes to ::operator new with T's alignment (the aligned form when T is
 *  over-aligned): arrays are not fixed-size objects, and the global heap
 *  already serves them well. deallocate(p, n) must get the n given to
 *  allocate, as the standard requires, and picks the same route.
 *
 *  The allocator holds a std::shared_ptr to its pool_set, so a container
 *  keeps its pools alive. Two allocators are equal when they share one
 *  set. Because ownership is shared, propagating is safe:
 *  propagate_on_container_copy_assignment, _move_assignment and _swap are
 *  true (the allocator travels with the memory, move assignment and swap
 *  are O(1), as with std::allocator). A moved-from allocator keeps its set
 *  (moving copies the pointer), so a moved-from container stays usable.
 *
 *  Thread-safety: that of the set's sync mode for allocate/deallocate
 *  (AK_SYNC_THREADS by default: any thread, cross-thread deallocation
 *  included); copying is an atomic reference-count increment. */
template <class T>
class pool_allocator : public detail::allocator_source<pool_allocator, std::shared_ptr<pool_set>, true> {
 public:
  using value_type = T;

  /** An allocator over pool_set::default_set() (AK_SYNC_THREADS). Throws
   *  ak::bad_alloc only if that set cannot be created. */
  pool_allocator() : allocator_source(pool_set::default_set()) {}
  /** An allocator over `set`, which must not be null. Implicit, so that a
   *  container can be built straight from a set. Never throws. */
  pool_allocator(std::shared_ptr<pool_set> set) noexcept  // NOLINT(google-explicit-constructor)
      : allocator_source(std::move(set)) {}
  /** Copies share the set. Declared so that a move copies too. */
  pool_allocator(const pool_allocator &) noexcept = default;
  /** Rebinding copy: same set, another value type. Never throws. */
  template <class U>
  pool_allocator(const pool_allocator<U> &other) noexcept : allocator_source(other.set()) {}
  /** Shares `other`'s set. Never throws. */
  pool_allocator &operator=(const pool_allocator &) noexcept = default;

  /** Memory for `n` T aligned to alignof(T): for n == 1 a slot of the
   *  set's pool for T (created on first use), otherwise from
   *  ::operator new. Contents unspecified. Errors: throws ak::bad_alloc
   *  when a pool slot cannot be had (memory runs out, or the pool's
   *  max_objects is reached), std::bad_alloc when ::operator new fails,
   *  std::bad_array_new_length if n * sizeof(T) overflows, and what
   *  pool_set::get() throws when the pool cannot be created. */
  T *allocate(std::size_t n) {
    if (n == 1) {
      void *p = ak_pool_alloc(source_->get(sizeof(T), alignof(T)));
      if (!p) detail::throw_bad_alloc("ak::pool_allocator::allocate");
      return static_cast<T *>(p);
    }
    if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) throw std::bad_array_new_length();
    if constexpr (alignof(T) > __STDCPP_DEFAULT_NEW_ALIGNMENT__) {
      return static_cast<T *>(::operator new(n * sizeof(T), std::align_val_t(alignof(T))));
    } else {
      return static_cast<T *>(::operator new(n * sizeof(T)));
    }
  }

  /** Frees `p`, which allocate(n) of an equal allocator returned, with the
   *  same `n`. Never throws. */
  void deallocate(T *p, std::size_t n) noexcept {
    if (n == 1) {
      ak_pool_free(source_->find(sizeof(T), alignof(T)), p);
    } else if constexpr (alignof(T) > __STDCPP_DEFAULT_NEW_ALIGNMENT__) {
#if defined(__cpp_sized_deallocation)
      ::operator delete(p, n * sizeof(T), std::align_val_t(alignof(T)));
#else
      ::operator delete(p, std::align_val_t(alignof(T)));
#endif
    } else {
#if defined(__cpp_sized_deallocation)
      ::operator delete(p, n * sizeof(T)); /* the size: checked by the hardened drop-in */
#else
      ::operator delete(p);
#endif
    }
  }

  /** The pool set this allocator uses. Never throws. */
  const std::shared_ptr<pool_set> &set() const noexcept { return source_; }
};

#if AK_HAS_PMR
namespace detail {

/* Size classes of ak::pool_resource: multiples of 8 up to 64, then four
 * classes per doubling (80, 96, 112, 128, 160, ..., 3584, 4096), so a
 * request above 32 bytes wastes less than 25% of its slot. */
constexpr std::size_t pool_class_count = 32;
constexpr std::size_t pool_class_max = 4096;

constexpr std::size_t pool_class_size(std::size_t index) noexcept {
  if (index < 8) return (index + 1) * 8;
  std::size_t m = index - 8;
  return (5 + m % 4) << (4 + m / 4);
}

/* The class of each 8-byte granule: entry (n - 1) / 8 is the smallest class
 * holding n bytes, for 1 <= n <= pool_class_max. */
struct pool_class_table {
  unsigned char index[pool_class_max / 8];
};

constexpr pool_class_table make_pool_class_table() noexcept {
  pool_class_table t{};
  std::size_t c = 0;
  for (std::size_t g = 0; g < pool_class_max / 8; ++g) {
    while (pool_class_size(c) < (g + 1) * 8) ++c;
    t.index[g] = static_cast<unsigned char>(c);
  }
  return t;
}

inline constexpr pool_class_table pool_classes = make_pool_class_table();

static_assert(pool_class_size(pool_class_count - 1) == pool_class_max, "the last class is the largest");

}  // namespace detail

/** A std::pmr::memory_resource over fixed-size pools, one per size class:
 *  `ak::pool_resource r; std::pmr::map<int, std::pmr::string> m(&r);`.
 *
 *  Classes: 8, 16, ..., 64 (steps of 8), then four per doubling (80, 96,
 *  112, 128, 160, ..., 3584, 4096): above 32 bytes a request wastes less
 *  than 25% of its slot. A class's slots are aligned to the largest power
 *  of two dividing its size (8 for 24, 16 for 48 and 80, 64 for 192, 4096
 *  for 4096). A request (bytes, alignment) is rounded up to a multiple of
 *  `alignment` and served by the smallest class that holds the result -
 *  whose alignment is then always at least `alignment`; a request whose
 *  rounded size exceeds max_pooled_size (4096) goes to the upstream
 *  resource, unchanged. Pools are made on first use of their class.
 *  do_deallocate uses the (bytes, alignment) given, as std::pmr requires,
 *  to find the same class (or upstream) again.
 *
 *  Resources are equal only to themselves (pointer identity). The
 *  resource must outlive the containers using it; its destruction
 *  destroys every pool (memory allocated from it becomes invalid; no
 *  destructors run). Not copyable or movable.
 *
 *  Thread-safety: allocate/deallocate follow the sync mode of the pools
 *  (AK_SYNC_THREADS by default: any thread, cross-thread deallocation
 *  included; a class's pool is created under a mutex, found lock-free);
 *  the upstream resource must be thread-safe too when used so (the
 *  default resource, new_delete_resource(), is). */
class pool_resource : public std::pmr::memory_resource {
 public:
  /** Requests up to this many bytes (after rounding to their alignment)
   *  are pooled. */
  static constexpr std::size_t max_pooled_size = detail::pool_class_max;

  /** A resource with default pool options (AK_SYNC_THREADS) over
   *  std::pmr::get_default_resource(). Never allocates until used. */
  pool_resource() noexcept : pool_resource(AK_SYNC_THREADS, std::pmr::get_default_resource()) {}

  /** A resource whose pools use the sync mode `sync`, over `upstream`
   *  (which must outlive it). Throws std::invalid_argument if `upstream`
   *  is null; an out-of-range `sync` makes allocations throw it. */
  explicit pool_resource(ak_sync sync, std::pmr::memory_resource *upstream = std::pmr::get_default_resource())
      : upstream_(upstream) {
    base_ = {};
    base_.sync = sync;
    check_upstream();
  }

  /** A resource whose pools use `base` (object_size and align are set per
   *  class; the name, default "pool", gets "/<size>@<align>" appended;
   *  the name string must stay valid while the resource lives), over
   *  `upstream`. Throws std::invalid_argument if `upstream` is null or
   *  `base` asks for AK_BACKING_FILE (one file cannot back several pools);
   *  other bad options make allocations throw std::invalid_argument. */
  explicit pool_resource(const ak_pool_options &base,
                         std::pmr::memory_resource *upstream = std::pmr::get_default_resource())
      : base_(base), upstream_(upstream) {
    detail::check_multi_pool_options(base_, "ak::pool_resource");
    check_upstream();
  }

  pool_resource(const pool_resource &) = delete;
  pool_resource &operator=(const pool_resource &) = delete;

  /** Destroys every class's pool (ak_pool_destroy). Memory still held by
   *  containers becomes invalid; upstream allocations are not released. */
  ~pool_resource() override {
    for (auto &p : pools_) ak_pool_destroy(p.load(std::memory_order_relaxed));
  }

  /** The size of the class that serves a request of `bytes` at
   *  `alignment` (a power of two), or 0 if it goes upstream. Never throws. */
  static constexpr std::size_t size_class(std::size_t bytes, std::size_t alignment) noexcept {
    std::size_t i = class_index(bytes, alignment);
    return i < detail::pool_class_count ? detail::pool_class_size(i) : 0;
  }

  /** The upstream resource (for requests above max_pooled_size). */
  std::pmr::memory_resource *upstream_resource() const noexcept { return upstream_; }

  /** The pool serving (`bytes`, `alignment`) if it has been created, else
   *  nullptr (not created yet, or the request goes upstream); for its
   *  statistics. Owned by the resource. Thread-safe; never throws. */
  ak_pool *find(std::size_t bytes, std::size_t alignment) const noexcept {
    std::size_t i = class_index(bytes, alignment);
    return i < detail::pool_class_count ? pools_[i].load(std::memory_order_acquire) : nullptr;
  }

  /** True if `p` is the start of a slot of one of the class pools
   *  (ak_pool_owns); false for upstream memory. Thread-safe; never
   *  throws. */
  bool owns(const void *p) const noexcept {
    if (!p) return false;
    for (const auto &pool : pools_) {
      ak_pool *q = pool.load(std::memory_order_acquire);
      if (q && ak_pool_owns(q, p)) return true;
    }
    return false;
  }

  /** ak_pool_trim() on every class pool: empty memory goes back to the OS
   *  now. Thread-safe; never throws. */
  void trim() noexcept {
    for (auto &pool : pools_) {
      if (ak_pool *q = pool.load(std::memory_order_acquire)) ak_pool_trim(q);
    }
  }

 protected:
  /** A slot of the class for (`bytes`, `alignment`), or upstream memory.
   *  Throws ak::bad_alloc when memory runs out (or a pool's max_objects
   *  is reached), what the upstream throws, and std::invalid_argument if
   *  the base options are bad (at a class's first use). */
  void *do_allocate(std::size_t bytes, std::size_t alignment) override {
    std::size_t i = class_index(bytes, alignment);
    if (i >= detail::pool_class_count) return upstream_->allocate(bytes, alignment);
    ak_pool *q = pools_[i].load(std::memory_order_acquire);
    if (!q) q = create(i);
    void *p = ak_pool_alloc(q);
    if (!p) detail::throw_bad_alloc("ak::pool_resource::allocate");
    return p;
  }

  /** Gives `p` back to its class's pool (or upstream); `bytes` and
   *  `alignment` must be those it was allocated with. */
  void do_deallocate(void *p, std::size_t bytes, std::size_t alignment) override {
    std::size_t i = class_index(bytes, alignment);
    if (i >= detail::pool_class_count) {
      upstream_->deallocate(p, bytes, alignment);
    } else {
      ak_pool_free(pools_[i].load(std::memory_order_acquire), p);
    }
  }

  /** Identity: a resource is equal only to itself. */
  bool do_is_equal(const std::pmr::memory_resource &other) const noexcept override { return this == &other; }

 private:
  /* The class index for a request, or pool_class_count for upstream. */
  static constexpr std::size_t class_index(std::size_t bytes, std::size_t alignment) noexcept {
    if (bytes > max_pooled_size || alignment > max_pooled_size) return detail::pool_class_count;
    std::size_t n = bytes == 0 ? 1 : bytes;
    if (alignment > 1) n = (n + alignment - 1) & ~(alignment - 1);
    if (n > max_pooled_size) return detail::pool_class_count;
    return detail::pool_classes.index[(n - 1) / 8];
  }

  void check_upstream() const {
    if (!upstream_) throw std::invalid_argument("ak::pool_resource: the upstream resource is null");
  }

  ak_pool *create(std::size_t i) {
    std::lock_guard<std::mutex> lock(mu_);
    ak_pool *q = pools_[i].load(std::memory_order_relaxed);
    if (q) return q;  // another thread won
    const std::size_t size = detail::pool_class_size(i);
    const std::size_t align = size & (~size + 1);  // the largest power of two dividing size
    std::string name;
    q = detail::create_pool(detail::member_options(base_, size, align, name), "ak::pool_resource");
    pools_[i].store(q, std::memory_order_release);
    return q;
  }

  ak_pool_options base_;
  std::pmr::memory_resource *upstream_;
  std::atomic<ak_pool *> pools_[detail::pool_class_count] = {};
  std::mutex mu_;
};
#endif /* AK_HAS_PMR */

}  // namespace ak

#endif /* C++17 or later */
#endif /* ARENAKIT_ARENAKIT_HPP */
