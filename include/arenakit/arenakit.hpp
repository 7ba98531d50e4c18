/* arenakit/arenakit.hpp - the header-only C++17 layer of arenakit.
 *
 * A thin layer over the C API of <arenakit/arenakit.h>: it wraps the C calls
 * and adds RAII and types, nothing else (STYLE.md, habit 9). Everything lives
 * in namespace `ak`; helpers in `ak::detail` are not part of the API.
 *
 * Sections:
 *   - arena: ak::arena (RAII owner of an ak_arena, typed make<T>() with
 *     destructors run at clear/destroy/restore), ak::arena::scope,
 *     ak::arena_allocator<T> (STL allocator), ak::arena_resource
 *     (std::pmr::memory_resource).
 *
 * Errors: the C API reports failure with NULL and errno. Here, functions
 * that return raw memory (allocate) keep that convention; functions that
 * return typed objects or serve the standard library throw std::bad_alloc on
 * out-of-memory, and constructors throw std::invalid_argument on bad options.
 *
 * Thread-safety: as in C, an arena is not synchronised. Use one arena (and
 * everything bound to it: allocators, resources, scopes) per thread, or
 * guard it with your own lock. Different arenas may be used concurrently.
 */
#ifndef ARENAKIT_ARENAKIT_HPP
#define ARENAKIT_ARENAKIT_HPP

#include <arenakit/arenakit.h>

#include <cstddef>
#include <cstring>
#include <limits>
#include <new>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#if __has_include(<memory_resource>)
#include <memory_resource>
/** 1 when the standard library has <memory_resource> (ak::arena_resource). */
#define AK_HAS_PMR 1
#else
#define AK_HAS_PMR 0
#endif

namespace ak {

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
   *  Errors: throws std::bad_alloc if the memory or the cleanup record
   *  cannot be allocated (then nothing stays constructed). If T's
   *  constructor throws, the exception propagates, nothing is registered
   *  and the bytes are abandoned until the next clear. */
  template <class T, class... Args>
  T *make(Args &&...args) {
    static_assert(std::is_object_v<T> && !std::is_array_v<T>,
                  "make<T>: T must be a complete non-array object type");
    void *mem = allocate(sizeof(T), alignof(T));
    if (!mem) throw std::bad_alloc();
    T *obj = ::new (mem) T(std::forward<Args>(args)...);
    if constexpr (!std::is_trivially_destructible_v<T>) {
      if (ak_arena_defer(&a_, &detail::destroy_one<T>, obj) != 0) {
        obj->~T();
        throw std::bad_alloc();
      }
    }
    return obj;
  }

  /** As make<T>(), but returns nullptr instead of throwing std::bad_alloc
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
   *  Errors: throws std::bad_alloc if n * sizeof(T) overflows or memory
   *  runs out. If an element's constructor throws, the elements already
   *  built are destroyed in reverse order, nothing is registered and the
   *  exception propagates. */
  template <class T>
  T *make_array(std::size_t n) {
    static_assert(std::is_object_v<T> && !std::is_array_v<T>,
                  "make_array<T>: T must be a complete non-array object type");
    if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) throw std::bad_array_new_length();
    void *mem = allocate(n * sizeof(T), alignof(T));
    if (!mem) throw std::bad_alloc();
    T *first = static_cast<T *>(mem);
    if constexpr (std::is_trivially_destructible_v<T>) {
      for (std::size_t i = 0; i < n; ++i) ::new (static_cast<void *>(first + i)) T();
    } else {
      if (n == 0) return first;
      /* The record is taken before any element exists, so its failure
       * needs no unwinding. */
      void *rmem = allocate(sizeof(detail::array_record), alignof(detail::array_record));
      if (!rmem) throw std::bad_alloc();
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
        throw std::bad_alloc();
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
 *  allocate(n) returns arena memory aligned to alignof(T); deallocate() is a
 *  no-op (the memory comes back at clear, destruction or restore). A
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
class arena_allocator {
 public:
  using value_type = T;
  using propagate_on_container_copy_assignment = std::false_type;
  using propagate_on_container_move_assignment = std::false_type;
  using propagate_on_container_swap = std::false_type;
  using is_always_equal = std::false_type;

  /** An allocator over `a` (which must outlive it). Implicit, so that a
   *  container can be built straight from an arena. Never throws. */
  arena_allocator(arena &a) noexcept : a_(a.get()) {}  // NOLINT(google-explicit-constructor)
  /** An allocator over the C arena `a` (must be initialised and outlive
   *  the allocator). Never throws. */
  explicit arena_allocator(ak_arena *a) noexcept : a_(a) {}
  /** Rebinding copy: same arena, another value type. Never throws. */
  template <class U>
  arena_allocator(const arena_allocator<U> &other) noexcept : a_(other.get()) {}

  /** Memory for `n` T aligned to alignof(T), owned by the arena.
   *  Throws std::bad_array_new_length (a std::bad_alloc) if n * sizeof(T)
   *  overflows, std::bad_alloc if the arena is out of memory. */
  T *allocate(std::size_t n) {
    if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) throw std::bad_array_new_length();
    void *p = ak_arena_alloc(a_, n * sizeof(T), alignof(T));
    if (!p) throw std::bad_alloc();
    return static_cast<T *>(p);
  }

  /** No-op: arena memory is freed all at once. Never throws. */
  void deallocate(T *, std::size_t) noexcept {}

  /** The C arena this allocator uses. Never throws. */
  ak_arena *get() const noexcept { return a_; }

 private:
  ak_arena *a_;
};

/** True when both allocators use the same arena. */
template <class T, class U>
bool operator==(const arena_allocator<T> &x, const arena_allocator<U> &y) noexcept {
  return x.get() == y.get();
}
/** True when the allocators use different arenas. */
template <class T, class U>
bool operator!=(const arena_allocator<T> &x, const arena_allocator<U> &y) noexcept {
  return x.get() != y.get();
}

#if AK_HAS_PMR
/** A std::pmr::memory_resource over an arena, for the std::pmr containers:
 *  `ak::arena_resource r(arena); std::pmr::vector<int> v(&r);`.
 *
 *  do_allocate returns arena memory at the requested alignment (any power
 *  of two) and throws std::bad_alloc when the arena cannot supply it (or
 *  the alignment is not a power of two); do_deallocate is a no-op.
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
    if (!p) throw std::bad_alloc();
    return p;
  }
  void do_deallocate(void *, std::size_t, std::size_t) override {}
  bool do_is_equal(const std::pmr::memory_resource &other) const noexcept override { return this == &other; }

 private:
  ak_arena *a_;
};
#endif /* AK_HAS_PMR */

}  // namespace ak

#endif /* ARENAKIT_ARENAKIT_HPP */
