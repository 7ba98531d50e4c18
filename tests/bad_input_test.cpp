/* SPDX-License-Identifier: MIT */
// bad_input_test.cpp - the bad-input matrix: one table with, for every
// public function of arena.h, pool.h, malloc.h and common.h (and the C++
// layer where it has error behaviour of its own), the bad inputs a user can
// give and the documented result: the return value, errno and the
// ak_last_error() message (or the exception and its what()), or - for
// misuse that is undefined in release builds - the message the checked
// build (AK_CHECKED) dies with. Each row is one test case; rows that are
// undefined in release builds run only in the checked build, as death
// tests. The same table is the contract in docs/bad-input.md: the test
// DocsMatchTheTable renders the table as Markdown and compares it with that
// file (AK_UPDATE_DOCS=1 rewrites the file).
#include <arenakit/arenakit.h>
#include <errno.h>
#include <gtest/gtest.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <arenakit/arenakit.hpp>
#include <cctype>
#include <climits>
#include <cstdint>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <type_traits>
#include <vector>

#include "common/track.h"

namespace {

// ---- what a call did ---------------------------------------------------------
struct Got {
  std::string result;   // "NULL", "non-NULL", "0", "EINVAL", "true", "(no-op)", "throws std::bad_alloc", ...
  int err;              // errno after the call
  std::string message;  // ak_last_error() after the call, or the exception's what()
};

const char *errno_name(int e) {
  switch (e) {
    case 0: return "-";
    case EINVAL: return "EINVAL";
    case ENOMEM: return "ENOMEM";
    case ENOENT: return "ENOENT";
    case ENOTDIR: return "ENOTDIR";
    case EISDIR: return "EISDIR";
    case ENODEV: return "ENODEV";
    case EACCES: return "EACCES";
    case EROFS: return "EROFS";
    case EBADF: return "EBADF";
    case EDEADLK: return "EDEADLK";
    default: return "other";
  }
}

Got ptr(const void *p) { return {p ? "non-NULL" : "NULL", errno, ak_last_error()}; }

// The magazine's test seam (src/pool/modes.h): called where a slow path
// holds the thread's chain. A SIGUSR1 raised there runs a handler whose
// allocation is nested in the pool's code.
extern "C" void (*_ak_mag_test_point)(void);
ak_pool *g_nested_pool;
void *g_nested_obj;
int g_nested_errno;
char g_nested_message[256];
Got nested_spinlock_alloc() {
  ak_pool_options o = {};
  o.object_size = 32;
  o.name = "bad";
  o.sync = AK_SYNC_SPINLOCK;
  g_nested_pool = ak_pool_create(&o);
  struct sigaction sa = {}, old = {};
  sa.sa_handler = [](int) {  // no allocation in the handler: raw results only
    g_nested_obj = ak_pool_alloc(g_nested_pool);
    g_nested_errno = errno;
    strncpy(g_nested_message, ak_last_error(), sizeof g_nested_message - 1);
  };
  sigaction(SIGUSR1, &sa, &old);
  _ak_mag_test_point = [] { raise(SIGUSR1); };
  void *first = ak_pool_alloc(g_nested_pool);  // a refill: the slow path
  _ak_mag_test_point = nullptr;
  sigaction(SIGUSR1, &old, nullptr);
  ak_pool_free(g_nested_pool, first);
  ak_pool_destroy(g_nested_pool);
  return {g_nested_obj ? "non-NULL" : "NULL", g_nested_errno, g_nested_message};
}
Got code(int rc) { return {rc == 0 ? "0" : errno_name(rc), errno, ak_last_error()}; }
Got boolean(bool b) { return {b ? "true" : "false", errno, ak_last_error()}; }
Got nothing() { return {"(no-op)", errno, ak_last_error()}; }
Got value(const std::string &v) { return {v, errno, ak_last_error()}; }

// Runs `f` and turns an exception into a result naming its type.
Got catching(const std::function<Got()> &f) {
  try {
    return f();
  } catch (const std::bad_array_new_length &e) {
    return {"throws std::bad_array_new_length", errno, e.what()};
  } catch (const ak::bad_alloc &e) {
    return {"throws ak::bad_alloc", errno, e.what()};
  } catch (const std::bad_alloc &e) {
    return {"throws std::bad_alloc", errno, e.what()};
  } catch (const std::invalid_argument &e) {
    return {"throws std::invalid_argument", errno, e.what()};
  } catch (const std::system_error &e) {
    return {std::string("throws std::system_error(") + errno_name(e.code().value()) + ")", errno, e.what()};
  }
}

// ---- fixtures used by the rows -------------------------------------------------
struct Arena {
  ak_arena a;
  Arena() { EXPECT_EQ(ak_arena_init(&a, nullptr), 0); }
  ~Arena() { ak_arena_destroy(&a); }
};

ak_pool_options pool_opts(ak_sync sync = AK_SYNC_NONE) {
  ak_pool_options o{};
  o.object_size = 48;
  o.sync = sync;
  o.name = "bad";
  return o;
}

struct Pool {
  ak_pool *p;
  explicit Pool(ak_pool_options o = pool_opts()) : p(ak_pool_create(&o)) {
    EXPECT_NE(p, nullptr) << ak_last_error();
  }
  ~Pool() { ak_pool_destroy(p); }
};

// A directory for file-backed pools, removed with what the rows put in it
// when the test program ends.
struct ScratchDir {
  std::string path;
  ScratchDir() {
    std::string t = ::testing::TempDir() + "ak_bad_input_XXXXXX";
    std::vector<char> buf(t.begin(), t.end());
    buf.push_back('\0');
    if (!mkdtemp(buf.data())) std::abort();
    path = buf.data();
  }
  ~ScratchDir() {
    chmod((path + "/readonly").c_str(), 0700);
    rmdir((path + "/readonly").c_str());
    unlink((path + "/plain").c_str());
    unlink((path + "/fifo").c_str());
    unlink((path + "/zero-link").c_str());
    rmdir(path.c_str());
  }
};
const std::string &scratch_dir() {
  static const ScratchDir dir;
  return dir.path;
}

// A file path in a directory the process cannot write to. As an ordinary
// user: a directory made read-only (0555). As root, which ignores directory
// permissions, a path in /sys: sysfs refuses to create files even for root
// (EACCES; EROFS where /sys is mounted read-only).
std::string readonly_dir_path() {
  if (geteuid() == 0) return "/sys/ak_bad_input_pool.dat";
  std::string d = scratch_dir() + "/readonly";
  mkdir(d.c_str(), 0700);
  chmod(d.c_str(), 0555);
  return d + "/pool.dat";
}

// A path whose parent is a regular file (ENOTDIR for anyone, root included).
std::string file_parent_path() {
  std::string f = scratch_dir() + "/plain";
  FILE *fp = fopen(f.c_str(), "w");
  if (fp) fclose(fp);
  return f + "/pool.dat";
}

// A FIFO in the scratch directory (a file that is not a regular one).
std::string fifo_path() {
  std::string f = scratch_dir() + "/fifo";
  mkfifo(f.c_str(), 0600);
  return f;
}

// A symbolic link to a device (/dev/zero): followed, then refused.
std::string device_link_path() {
  std::string f = scratch_dir() + "/zero-link";
  (void)!symlink("/dev/zero", f.c_str());
  return f;
}

Got create_file_pool(const std::string &path) {
  ak_pool_options o = pool_opts();
  o.backing = AK_BACKING_FILE;
  o.path = path.c_str();
  ak_pool *p = ak_pool_create(&o);
  Got g = ptr(p);
  ak_pool_destroy(p);
  if (p) unlink(path.c_str());
  return g;
}

Got create_with(const std::function<void(ak_pool_options &)> &edit) {
  ak_pool_options o = pool_opts();
  edit(o);
  ak_pool *p = ak_pool_create(&o);
  Got g = ptr(p);
  ak_pool_destroy(p);
  return g;
}

Got init_with(const std::function<void(ak_arena_options &)> &edit) {
  ak_arena_options o{};
  edit(o);
  ak_arena a;
  int rc = ak_arena_init(&a, &o);
  Got g = code(rc);
  if (rc == 0) ak_arena_destroy(&a);
  return g;
}

// Values the compiler cannot see through: out-of-range enums and sizes the
// allocation attributes would reject at compile time are exactly the bad
// input under test.
size_t opaque(size_t v) {
  volatile size_t x = v;
  return x;
}
// An out-of-range value is an enum value only where the enum's type is
// fixed (AK_ENUM_INT, arenakit/common.h); otherwise the cast below is
// undefined behaviour in C++ (clang's UBSan reports its load) and the rows
// that pass one test nothing defined.
template <class E>
E bad_enum(int v) {
  static_assert(std::is_same<std::underlying_type_t<E>, int>::value, "a public enum without AK_ENUM_INT");
  volatile int x = v;
  return static_cast<E>(x);
}
template <class T>
T *null_handle() {
  T *volatile p = nullptr;
  return p;
}

constexpr size_t kBig = SIZE_MAX / 2 + 1;  // 2^63: no size or alignment this large can be served

struct Obj {
  double d[6];
};

// ---- the table --------------------------------------------------------------------
enum class Kind {
  Returns,              // any build: the call returns `result` with errno `err`
  DiesChecked,          // undefined in release builds; the checked build dies with `message`
  DiesCheckedAsan,      // undefined in release builds; detected by AddressSanitizer (checked + ASan build)
  DiesCheckedHardened,  // undefined in release builds; the checked and the hardened build die with `message`
  DiesAlways            // every build dies with `message` (as glibc's free does)
};

struct Row {
  const char *function;
  const char *input;
  const char *result;   // expected result ("checked build: dies" for death rows)
  const char *err;      // expected errno name ("-": unchanged; "n/a": not specified; "A or B")
  const char *message;  // regex searched in ak_last_error()/what()/the death message ("" = none)
  Kind kind;
  std::function<Got()> call;  // Returns rows: performs the call
  std::function<void()> die;  // death rows: performs the misuse
};

Row ret(const char *f, const char *in, const char *result, const char *err, const char *msg,
        std::function<Got()> call) {
  return {f, in, result, err, msg, Kind::Returns, std::move(call), nullptr};
}
Row dies(const char *f, const char *in, const char *msg, std::function<void()> die,
         Kind kind = Kind::DiesChecked) {
  return {f,
          in,
          kind == Kind::DiesChecked           ? "undefined; checked build: dies"
          : kind == Kind::DiesCheckedAsan     ? "undefined; checked+ASan build: dies"
          : kind == Kind::DiesCheckedHardened ? "undefined; checked and hardened builds: die"
                                              : "dies (every build)",
          "-",
          msg,
          kind,
          nullptr,
          std::move(die)};
}

// ---- the invalid-pointer matrix ----------------------------------------------------------
// Pointers no allocator call handed out, made the same way for every
// component: an address on the stack, one in static storage, one in a
// range that was mapped and is no longer.
void *stack_pointer() { return __builtin_frame_address(0); }
void *static_pointer() {
  static char buf[256];
  return buf + 64;
}
void *unmapped_pointer() {
  void *m = mmap(nullptr, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) std::abort();
  munmap(m, 1 << 16);
  return static_cast<char *>(m) + 4096;
}

// One call of the matrix: the row's function, the call as the message
// names it, and the call, which sets up what it needs (a pool, an arena)
// before it makes the pointer (so no mapping of its own lands on an
// address made unmapped).
using MakePointer = std::function<void *()>;
struct PointerCall {
  const char *function;
  const char *message;
  std::function<void(const MakePointer &)> call;
};
// One kind of pointer: the row's input, the reason the message gives (a
// regex), and how to make it.
struct BadPointer {
  const char *what;
  const char *reason;
  MakePointer make;
};

// Adds a row per call and pointer kind, each dying with "<message>(<the
// pointer>): <reason>", after the last row of `after` (so each stays in
// its component's section of docs/bad-input.md).
void add_pointer_rows(std::vector<Row> &rows, const char *after, const std::vector<PointerCall> &calls,
                      const std::vector<BadPointer> &kinds, Kind kind) {
  static std::deque<std::string> texts;  // the rows keep const char *; a deque never moves them
  std::vector<Row> add;
  for (const PointerCall &c : calls)
    for (const BadPointer &k : kinds) {
      texts.push_back(std::string(c.message) + "\\(0x[0-9a-f]+\\): " + k.reason);
      auto call = c.call;
      auto make = k.make;
      add.push_back(dies(
          c.function, k.what, texts.back().c_str(), [call, make] { call(make); }, kind));
    }
  auto last = std::find_if(rows.rbegin(), rows.rend(),
                           [after](const Row &r) { return std::strcmp(r.function, after) == 0; });
  rows.insert(last.base(), add.begin(), add.end());
}

// The malloc family: free, realloc and malloc_usable_size of a pointer
// arenakit did not hand out end in one message and abort in every build.
void malloc_matrix(std::vector<Row> &rows) {
  const char *foreign = "invalid pointer \\(not from arenakit\\)";
  add_pointer_rows(
      rows, "ak_free",
      {{"ak_free", "free", [](const MakePointer &make) { ak_free(make()); }},
       {"ak_realloc", "realloc", [](const MakePointer &make) { (void)!ak_realloc(make(), 64); }},
       {"ak_usable_size", "malloc_usable_size",
        [](const MakePointer &make) { (void)!ak_usable_size(make()); }}},
      {{"an address on the stack", foreign, stack_pointer},
       {"an address in static storage", foreign, static_pointer},
       {"an unmapped address", foreign, unmapped_pointer},
       {"a block of the C library's malloc", foreign, [] { return malloc(100); }},
       {"a pointer into the middle of a small block", "invalid pointer \\(not the start of a block\\)",
        [] { return static_cast<void *>(static_cast<char *>(ak_malloc(100)) + 16); }},
       {"a large block (8 MiB) already freed", "invalid pointer",
        [] {
          void *p = ak_malloc(8 << 20);
          ak_free(p);
          return p;
        }}},
      Kind::DiesAlways);
}

// The pool: ak_pool_free of a pointer the pool did not hand out, in the
// default sync mode and in AK_SYNC_NONE (whose free is inline), ends in one
// message and abort in the checked and the hardened build.
void pool_matrix(std::vector<Row> &rows) {
  const char *foreign = "pointer was not allocated by pool 'bad'";
  std::vector<PointerCall> calls;
  for (ak_sync sync : {AK_SYNC_THREADS, AK_SYNC_NONE})
    calls.push_back({"ak_pool_free", "ak_pool_free", [sync](const MakePointer &make) {
                       Pool t(pool_opts(sync));
                       void *keep = ak_pool_alloc(t.p);  // the pool has a slab
                       ak_pool_free(t.p, make());
                       ak_pool_free(t.p, keep);
                     }});
  add_pointer_rows(rows, "ak_pool_free", {calls[0]},
                   {{"an address on the stack (AK_SYNC_THREADS)", foreign, stack_pointer},
                    {"an address in static storage (AK_SYNC_THREADS)", foreign, static_pointer},
                    {"an unmapped address (AK_SYNC_THREADS)", foreign, unmapped_pointer}},
                   Kind::DiesCheckedHardened);
  add_pointer_rows(rows, "ak_pool_free", {calls[1]},
                   {{"an address on the stack (AK_SYNC_NONE)", foreign, stack_pointer},
                    {"an address in static storage (AK_SYNC_NONE)", foreign, static_pointer},
                    {"an unmapped address (AK_SYNC_NONE)", foreign, unmapped_pointer}},
                   Kind::DiesCheckedHardened);
}

// The arena: ak_arena_realloc of a block the arena did not hand out ends in
// one message and abort in the checked and the hardened build.
void arena_matrix(std::vector<Row> &rows) {
  const char *foreign = "pointer not allocated by this arena";
  add_pointer_rows(rows, "ak_arena_realloc",
                   {{"ak_arena_realloc", "ak_arena_realloc",
                     [](const MakePointer &make) {
                       Arena t;
                       (void)!ak_arena_alloc(&t.a, 64, 8);
                       (void)!ak_arena_realloc(&t.a, make(), 8, 4096, 8);
                     }}},
                   {{"p on the stack", foreign, stack_pointer},
                    {"p in static storage", foreign, static_pointer},
                    {"p unmapped", foreign, unmapped_pointer},
                    {"p from the C library's malloc", foreign, [] { return malloc(100); }},
                    {"p from another arena", foreign,
                     [] {
                       static Arena other;
                       return ak_arena_alloc(&other.a, 64, 8);
                     }}},
                   Kind::DiesCheckedHardened);
}

const std::vector<Row> &table() {
  static const std::vector<Row> rows = [] {
    std::vector<Row> v = {
      // ---- common.h ----------------------------------------------------------------
      ret("ak_version", "(no arguments)", "AK_VERSION", "-", "", [] {
        return value(ak_version() == AK_VERSION ? "AK_VERSION" : "other");
      }),
      ret("ak_hardening", "(no arguments)", "the build's mitigations, or \"none\"", "-", "", [] {
        std::string h = ak_hardening();
        return value((AK_HARDENED == 0) == (h == "none") ? "the build's mitigations, or \"none\"" : "other");
      }),
      ret("ak_last_error", "on a thread where no call failed yet", "\"\"", "-", "", [] {
        return value(std::string("\"") + ak_last_error() + "\"");
      }),

      // ---- arena.h: ak_arena_init -------------------------------------------------------
      ret("ak_arena_init", "a = NULL", "EINVAL", "EINVAL", "^ak_arena_init: arena is NULL",
          [] { return code(ak_arena_init(nullptr, nullptr)); }),
      ret("ak_arena_init", "max_chunk < first_chunk", "EINVAL", "EINVAL", "^ak_arena_init: chunk sizes", [] {
        return init_with([](ak_arena_options &o) {
          o.first_chunk = 1 << 20;
          o.max_chunk = 1 << 16;
        });
      }),
      ret("ak_arena_init", "first_chunk = SIZE_MAX (overflows when rounded to a page)", "EINVAL", "EINVAL",
          "^ak_arena_init: chunk sizes",
          [] { return init_with([](ak_arena_options &o) { o.first_chunk = SIZE_MAX; }); }),
      ret("ak_arena_init", "max_chunk = SIZE_MAX", "EINVAL", "EINVAL", "^ak_arena_init: chunk sizes",
          [] { return init_with([](ak_arena_options &o) { o.max_chunk = SIZE_MAX; }); }),
      ret("ak_arena_init", "buffer != NULL, buffer_size = 0", "EINVAL", "EINVAL", "^ak_arena_init: buffer", [] {
        static char buf[256];
        return init_with([](ak_arena_options &o) { o.buffer = buf; });
      }),
      ret("ak_arena_init", "buffer = NULL, buffer_size = 256", "EINVAL", "EINVAL", "^ak_arena_init: buffer",
          [] { return init_with([](ak_arena_options &o) { o.buffer_size = 256; }); }),
      ret("ak_arena_init", "buffer_size < AK_ARENA_MIN_BUFFER", "EINVAL", "EINVAL", "^ak_arena_init: buffer", [] {
        static char buf[64];
        return init_with([](ak_arena_options &o) {
          o.buffer = buf;
          o.buffer_size = sizeof buf;
        });
      }),
      ret("ak_arena_init", "retain = 7 (unknown mode)", "EINVAL", "EINVAL", "^ak_arena_init: unknown retain mode 7",
          [] { return init_with([](ak_arena_options &o) { o.retain = bad_enum<ak_arena_retain>(7); }); }),

      // ---- ak_arena_alloc and its slow path ------------------------------------------------
      dies("ak_arena_alloc", "a = NULL (the inline fast path reads the arena)", "",
           [] { (void)!ak_arena_alloc(null_handle<ak_arena>(), 8, 8); }),
      ret("ak_arena_alloc_slow", "a = NULL", "NULL", "EINVAL", "^ak_arena_alloc: arena is NULL",
          [] { return ptr(ak_arena_alloc_slow(nullptr, 8, 8)); }),
      ret("ak_arena_alloc", "align = 0", "NULL", "EINVAL", "^ak_arena_alloc: alignment 0 is not a power of two", [] {
        Arena t;
        return ptr(ak_arena_alloc(&t.a, 16, 0));
      }),
      ret("ak_arena_alloc", "align = 3", "NULL", "EINVAL", "^ak_arena_alloc: alignment 3 is not a power of two", [] {
        Arena t;
        return ptr(ak_arena_alloc(&t.a, 16, 3));
      }),
      ret("ak_arena_alloc", "align = 2 GiB (larger than any page, huge pages included)", "non-NULL, aligned", "-", "",
          [] {
            Arena t;
            const size_t align = size_t(1) << 31;
            void *p = ak_arena_alloc(&t.a, 16, align);
            Got g = ptr(p);
            if (p && reinterpret_cast<uintptr_t>(p) % align == 0) g.result = "non-NULL, aligned";
            return g;
          }),
      ret("ak_arena_alloc", "align = 2^63", "NULL", "ENOMEM", "^ak_arena_alloc: .* cannot be satisfied", [] {
        Arena t;
        return ptr(ak_arena_alloc(&t.a, 16, kBig));
      }),
      ret("ak_arena_alloc", "size = 0", "non-NULL, unique", "-", "", [] {
        Arena t;
        void *p = ak_arena_alloc(&t.a, 0, 8), *q = ak_arena_alloc(&t.a, 0, 8);
        Got g = ptr(p);
        if (p && q && p != q) g.result = "non-NULL, unique";
        return g;
      }),
      ret("ak_arena_alloc", "size = SIZE_MAX", "NULL", "ENOMEM", "^ak_arena_alloc: ", [] {
        Arena t;
        return ptr(ak_arena_alloc(&t.a, SIZE_MAX, 8));
      }),
      ret("ak_arena_alloc", "size = SIZE_MAX - 3 (overflows when rounded to the granule)", "NULL", "ENOMEM",
          "^ak_arena_alloc: ", [] {
            Arena t;
            return ptr(ak_arena_alloc(&t.a, SIZE_MAX - 3, 8));
          }),
      ret("ak_arena_alloc", "size = 2^62 (no overflow; the OS refuses)", "NULL",
          "ENOMEM (under Valgrind: EINVAL)", "^ak_arena_alloc: ", [] {
        Arena t;
        return ptr(ak_arena_alloc(&t.a, size_t(1) << 62, 8));
      }),
      ret("ak_arena_alloc", "size past max_bytes", "NULL", "ENOMEM", "^ak_arena_alloc: .*budget", [] {
        ak_arena_options o{};
        o.max_bytes = 1000;
        ak_arena a;
        EXPECT_EQ(ak_arena_init(&a, &o), 0);
        Got g = ptr(ak_arena_alloc(&a, 1001, 8));
        ak_arena_destroy(&a);
        return g;
      }),
      ret("ak_arena_alloc", "after ak_arena_destroy (a zeroed arena)", "non-NULL", "-", "", [] {
        ak_arena a;
        EXPECT_EQ(ak_arena_init(&a, nullptr), 0);
        ak_arena_destroy(&a);
        Got g = ptr(ak_arena_alloc(&a, 16, 8));
        ak_arena_destroy(&a);
        return g;
      }),

      // ---- the other arena functions ------------------------------------------------------
      ret("ak_arena_zalloc", "a = NULL", "NULL", "EINVAL", "^ak_arena_zalloc: arena is NULL",
          [] { return ptr(ak_arena_zalloc(nullptr, 8, 8)); }),
      ret("ak_arena_zalloc", "align = 3", "NULL", "EINVAL", "^ak_arena_alloc: alignment 3", [] {
        Arena t;
        return ptr(ak_arena_zalloc(&t.a, 8, 3));
      }),
      ret("ak_arena_zalloc", "size = SIZE_MAX", "NULL", "ENOMEM", "^ak_arena_alloc: ", [] {
        Arena t;
        return ptr(ak_arena_zalloc(&t.a, SIZE_MAX, 8));
      }),
      ret("ak_arena_alloc_array", "a = NULL", "NULL", "EINVAL", "^ak_arena_alloc_array: arena is NULL",
          [] { return ptr(ak_arena_alloc_array(nullptr, 2, 8, 8, 1)); }),
      ret("ak_arena_alloc_array", "count * size overflows", "NULL", "ENOMEM",
          "^ak_arena_alloc_array: .* overflows", [] {
            Arena t;
            return ptr(ak_arena_alloc_array(&t.a, SIZE_MAX / 2, 3, 8, 0));
          }),
      ret("ak_arena_alloc_array", "count = 0", "non-NULL", "-", "", [] {
        Arena t;
        return ptr(ak_arena_alloc_array(&t.a, 0, 8, 8, 1));
      }),
      ret("ak_arena_strdup", "a = NULL", "NULL", "EINVAL", "^ak_arena_strdup: arena is NULL",
          [] { return ptr(ak_arena_strdup(nullptr, "x")); }),
      ret("ak_arena_strdup", "s = NULL", "NULL", "EINVAL", "^ak_arena_strdup: string is NULL", [] {
        Arena t;
        return ptr(ak_arena_strdup(&t.a, nullptr));
      }),
      ret("ak_arena_strndup", "a = NULL", "NULL", "EINVAL", "^ak_arena_strndup: arena is NULL",
          [] { return ptr(ak_arena_strndup(nullptr, "x", 1)); }),
      ret("ak_arena_strndup", "s = NULL", "NULL", "EINVAL", "^ak_arena_strndup: string is NULL", [] {
        Arena t;
        return ptr(ak_arena_strndup(&t.a, nullptr, 4));
      }),
      ret("ak_arena_realloc", "a = NULL, p = NULL", "NULL", "EINVAL", "^ak_arena_realloc: arena is NULL",
          [] { return ptr(ak_arena_realloc(nullptr, nullptr, 0, 8, 8)); }),
      ret("ak_arena_realloc", "a = NULL, p != NULL", "NULL", "EINVAL", "^ak_arena_realloc: arena is NULL", [] {
        static long x;
        return ptr(ak_arena_realloc(nullptr, &x, 8, 16, 8));
      }),
      ret("ak_arena_realloc", "align = 3", "NULL", "EINVAL", "^ak_arena_realloc: alignment", [] {
        Arena t;
        void *p = ak_arena_alloc(&t.a, 8, 8);
        return ptr(ak_arena_realloc(&t.a, p, 8, 16, 3));
      }),
      ret("ak_arena_realloc", "new_size = SIZE_MAX (the block stays intact)", "NULL, block intact", "ENOMEM",
          "^ak_arena_alloc: ", [] {
            Arena t;
            auto *p = static_cast<char *>(ak_arena_alloc(&t.a, 8, 8));
            std::memcpy(p, "intact!", 8);
            Got g = ptr(ak_arena_realloc(&t.a, p, 8, SIZE_MAX, 8));
            if (g.result == "NULL" && std::strcmp(p, "intact!") == 0) g.result = "NULL, block intact";
            return g;
          }),
      ret("ak_arena_defer", "a = NULL", "EINVAL", "EINVAL", "^ak_arena_defer: arena is NULL",
          [] { return code(ak_arena_defer(nullptr, free, nullptr)); }),
      ret("ak_arena_defer", "fn = NULL", "EINVAL", "EINVAL", "^ak_arena_defer: function is NULL", [] {
        Arena t;
        return code(ak_arena_defer(&t.a, nullptr, nullptr));
      }),
      ret("ak_arena_owns", "a = NULL", "false", "-", "", [] {
        static long x;
        return boolean(ak_arena_owns(nullptr, &x));
      }),
      ret("ak_arena_owns", "p = NULL", "false", "-", "", [] {
        Arena t;
        (void)!ak_arena_alloc(&t.a, 8, 8);
        return boolean(ak_arena_owns(&t.a, nullptr));
      }),
      ret("ak_arena_owns", "p from malloc", "false", "-", "", [] {
        Arena t;
        (void)!ak_arena_alloc(&t.a, 8, 8);
        void *m = malloc(16);
        Got g = boolean(ak_arena_owns(&t.a, m));
        free(m);
        return g;
      }),
      ret("ak_arena_clear", "a = NULL", "(no-op)", "-", "", [] {
        ak_arena_clear(nullptr);
        return nothing();
      }),
      ret("ak_arena_destroy", "a = NULL", "(no-op)", "-", "", [] {
        ak_arena_destroy(nullptr);
        return nothing();
      }),
      ret("ak_arena_destroy", "twice", "(no-op)", "-", "", [] {
        ak_arena a;
        EXPECT_EQ(ak_arena_init(&a, nullptr), 0);
        (void)!ak_arena_alloc(&a, 100, 8);
        ak_arena_destroy(&a);
        ak_arena_destroy(&a);
        return nothing();
      }),
      ret("ak_arena_save", "a = NULL", "a null mark", "-", "", [] {
        ak_arena_mark m = ak_arena_save(nullptr);
        return value(m.chunk == nullptr && m.ptr == 0 ? "a null mark" : "other");
      }),
      ret("ak_arena_restore", "a = NULL", "(no-op)", "-", "", [] {
        ak_arena_restore(nullptr, ak_arena_mark{});
        return nothing();
      }),
      dies(
          "ak_arena_restore", "a mark from another arena",
          "ak_arena_restore\\(0x[0-9a-f]+\\): mark not taken from this arena",
          [] {
            Arena t, other;
            (void)!ak_arena_alloc(&t.a, 64, 8);
            (void)!ak_arena_alloc(&other.a, 64, 8);
            ak_arena_restore(&t.a, ak_arena_save(&other.a));
          },
          Kind::DiesCheckedHardened),
      dies(
          "ak_arena_restore", "a mark taken before ak_arena_clear",
          "ak_arena_restore\\(0x[0-9a-f]+\\): stale", [] {
            Arena t;
            (void)!ak_arena_alloc(&t.a, 64, 8);
            ak_arena_mark m = ak_arena_save(&t.a);
            (void)!ak_arena_alloc(&t.a, 64, 8);
            ak_arena_clear(&t.a);
            ak_arena_restore(&t.a, m);
          },
          Kind::DiesCheckedHardened),
      ret("ak_arena_stats_get", "a = NULL", "all zero", "-", "", [] {
        ak_arena_stats s;
        std::memset(&s, 0xff, sizeof s);
        ak_arena_stats_get(nullptr, &s);
        return value(s.reserved == 0 && s.used == 0 && s.chunks == 0 ? "all zero" : "other");
      }),
      ret("ak_arena_stats_get", "out = NULL", "(no-op)", "-", "", [] {
        Arena t;
        ak_arena_stats_get(&t.a, nullptr);
        return nothing();
      }),

      // ---- pool.h: ak_pool_create --------------------------------------------------------------
      ret("ak_pool_create", "opts = NULL", "NULL", "EINVAL", "^ak_pool_create: options are NULL",
          [] { return ptr(ak_pool_create(nullptr)); }),
      ret("ak_pool_create_inline", "opts = NULL", "NULL", "EINVAL", "^ak_pool_create: options are NULL",
          [] { return ptr(ak_pool_create_inline(nullptr, 1)); }),
      ret("ak_pool_create", "object_size = 0", "NULL", "EINVAL", "^ak_pool_create: pool 'bad': object_size is 0",
          [] { return create_with([](ak_pool_options &o) { o.object_size = 0; }); }),
      ret("ak_pool_create", "object_size = SIZE_MAX", "NULL", "EINVAL", "^ak_pool_create: .*object_size is too large",
          [] { return create_with([](ak_pool_options &o) { o.object_size = SIZE_MAX; }); }),
      ret("ak_pool_create", "align = 3", "NULL", "EINVAL", "^ak_pool_create: .*align is not a power of two",
          [] { return create_with([](ak_pool_options &o) { o.align = 3; }); }),
      ret("ak_pool_create", "align = 0 (natural alignment)", "non-NULL", "-", "",
          [] { return create_with([](ak_pool_options &o) { o.align = 0; }); }),
      ret("ak_pool_create", "align = 1 MiB with slab_size = 64 KiB", "NULL", "EINVAL",
          "^ak_pool_create: .*does not fit a 65536-byte slab", [] {
            return create_with([](ak_pool_options &o) {
              o.align = 1 << 20;
              o.slab_size = 1 << 16;
            });
          }),
      ret("ak_pool_create", "align = 2^62 (larger than any slab)", "NULL", "EINVAL",
          "^ak_pool_create: .*does not fit", [] {
            return create_with([](ak_pool_options &o) { o.align = size_t(1) << 62; });
          }),
      ret("ak_pool_create", "slab_size = 3000 (not a power of two)", "NULL", "EINVAL",
          "^ak_pool_create: .*slab_size is not a power of two",
          [] { return create_with([](ak_pool_options &o) { o.slab_size = 3000; }); }),
      ret("ak_pool_create", "slab_size = 1024 (below the page size)", "NULL", "EINVAL",
          "^ak_pool_create: .*slab_size is not a power of two >= the page size",
          [] { return create_with([](ak_pool_options &o) { o.slab_size = 1024; }); }),
      ret("ak_pool_create", "object_size larger than slab_size", "NULL", "EINVAL", "^ak_pool_create: .*does not fit",
          [] {
            return create_with([](ak_pool_options &o) {
              o.object_size = 8192;
              o.slab_size = 4096;
            });
          }),
      ret("ak_pool_create", "sync = 9 (unknown)", "NULL", "EINVAL", "^ak_pool_create: .*unknown sync mode",
          [] { return create_with([](ak_pool_options &o) { o.sync = bad_enum<ak_sync>(9); }); }),
      ret("ak_pool_create", "backing = 5 (unknown)", "NULL", "EINVAL", "^ak_pool_create: .*unknown backing",
          [] { return create_with([](ak_pool_options &o) { o.backing = bad_enum<ak_backing>(5); }); }),
      ret("ak_pool_create", "AK_BACKING_FILE without a path", "NULL", "EINVAL", "^ak_pool_create: .*a path is needed",
          [] { return create_with([](ak_pool_options &o) { o.backing = AK_BACKING_FILE; }); }),
      ret("ak_pool_create", "a path with AK_BACKING_MMAP", "NULL", "EINVAL", "^ak_pool_create: .*a path is needed",
          [] { return create_with([](ak_pool_options &o) { o.path = "/tmp/x"; }); }),
      ret("ak_pool_create", "AK_BACKING_FILE, directory missing", "NULL", "ENOENT",
          "^ak_pool_create: pool 'bad': cannot create file '.*/missing/pool.dat'",
          [] { return create_file_pool(scratch_dir() + "/missing/pool.dat"); }),
      ret("ak_pool_create", "AK_BACKING_FILE, read-only directory (as root: a path in /sys)", "NULL",
          "EACCES or EROFS", "^ak_pool_create: pool 'bad': cannot create file",
          [] { return create_file_pool(readonly_dir_path()); }),
      ret("ak_pool_create", "AK_BACKING_FILE, parent is a regular file", "NULL", "ENOTDIR",
          "^ak_pool_create: pool 'bad': cannot create file '.*/plain/pool.dat'",
          [] { return create_file_pool(file_parent_path()); }),
      ret("ak_pool_create", "AK_BACKING_FILE, path is a directory", "NULL", "EISDIR",
          "^ak_pool_create: pool 'bad': cannot create file", [] { return create_file_pool(scratch_dir()); }),
      ret("ak_pool_create", "AK_BACKING_FILE, path is a FIFO", "NULL", "EINVAL",
          "^ak_pool_create: pool 'bad': file '.*/fifo' is not a regular file",
          [] { return create_file_pool(fifo_path()); }),
      ret("ak_pool_create", "AK_BACKING_FILE, path is a device (/dev/null)", "NULL", "EINVAL",
          "^ak_pool_create: pool 'bad': file '/dev/null' is not a regular file",
          [] { return create_file_pool("/dev/null"); }),
      ret("ak_pool_create", "AK_BACKING_FILE, path is a link to a device (/dev/zero)", "NULL", "EINVAL",
          "^ak_pool_create: pool 'bad': file '.*/zero-link' is not a regular file",
          [] { return create_file_pool(device_link_path()); }),
      ret("ak_pool_create", "AK_BACKING_FILE, a /proc file (no shared mapping)", "NULL", "ENODEV",
          "^ak_pool_create: pool 'bad': file '/proc/self/clear_refs' is on a file system that cannot map it shared",
          [] { return create_file_pool("/proc/self/clear_refs"); }),

      // ---- pool.h: allocation and free ------------------------------------------------------------
      dies("ak_pool_alloc", "p = NULL (the inline fast path reads the pool)", "",
           [] { (void)!ak_pool_alloc(null_handle<ak_pool>()); }),
      ret("ak_pool_alloc_slow", "p = NULL", "NULL", "EINVAL", "^ak_pool_alloc: pool is NULL",
          [] { return ptr(ak_pool_alloc_slow(nullptr)); }),
      ret("ak_pool_alloc", "max_objects live already", "NULL", "ENOMEM",
          "^ak_pool_alloc: pool 'bad': max_objects live objects already", [] {
            ak_pool_options o = pool_opts();
            o.max_objects = 1;
            Pool t(o);
            void *a = ak_pool_alloc(t.p);
            Got g = ptr(ak_pool_alloc(t.p));
            ak_pool_free(t.p, a);
            return g;
          }),
      ret("ak_pool_alloc", "from a signal handler that interrupted the pool's code on its thread (AK_SYNC_SPINLOCK)",
          "NULL", "EDEADLK", "^ak_pool_alloc: pool 'bad': called from a signal handler .*only AK_SYNC_LOCKFREE",
          [] { return nested_spinlock_alloc(); }),
      ret("ak_pool_free", "obj = NULL", "(no-op)", "-", "", [] {
        Pool t;
        ak_pool_free(t.p, nullptr);
        return nothing();
      }),
      ret("ak_pool_free_slow", "p = NULL", "(no-op)", "-", "", [] {
        static long x;
        ak_pool_free_slow(nullptr, &x);
        return nothing();
      }),
      dies("ak_pool_free", "p = NULL (the inline fast path reads the pool)", "", [] {
        static long x;
        ak_pool_free(null_handle<ak_pool>(), &x);
      }),
      dies("ak_pool_free", "a pointer from malloc", "ak_pool_free\\(0x[0-9a-f]+\\): pointer was not allocated by pool 'bad'",
           [] {
             Pool t;
             void *keep = ak_pool_alloc(t.p);
             (void)keep;
             ak_pool_free(t.p, malloc(48));
           }, Kind::DiesCheckedHardened),
      dies("ak_pool_free", "a pointer from ak_malloc",
           "ak_pool_free\\(0x[0-9a-f]+\\): pointer was not allocated by pool 'bad'", [] {
             Pool t;
             ak_pool_free(t.p, ak_malloc(48));
           }, Kind::DiesCheckedHardened),
      dies("ak_pool_free", "a pointer into the middle of an object",
           "ak_pool_free\\(0x[0-9a-f]+\\): pointer is inside pool 'bad' but not the start of an object", [] {
             Pool t;
             char *o = static_cast<char *>(ak_pool_alloc(t.p));
             ak_pool_free(t.p, o + 8);
           }, Kind::DiesCheckedHardened),
      dies("ak_pool_free", "double free", "ak_pool_free\\(0x[0-9a-f]+\\): double free", [] {
        Pool t;
        void *a = ak_pool_alloc(t.p), *b = ak_pool_alloc(t.p);
        ak_pool_free(t.p, a);
        ak_pool_free(t.p, b);
        ak_pool_free(t.p, a);
      }),
      dies("ak_pool_free", "double free (AK_SYNC_THREADS)", "ak_pool_free\\(0x[0-9a-f]+\\): double free", [] {
        Pool t(pool_opts(AK_SYNC_THREADS));
        void *a = ak_pool_alloc(t.p), *b = ak_pool_alloc(t.p);
        ak_pool_free(t.p, a);
        ak_pool_free(t.p, b);
        ak_pool_free(t.p, a);
      }),
      dies("ak_pool_free", "double free (AK_SYNC_SPINLOCK)", "ak_pool_free\\(0x[0-9a-f]+\\): double free", [] {
        Pool t(pool_opts(AK_SYNC_SPINLOCK));
        void *a = ak_pool_alloc(t.p), *b = ak_pool_alloc(t.p);
        ak_pool_free(t.p, a);
        ak_pool_free(t.p, b);
        ak_pool_free(t.p, a);
      }),
      dies("ak_pool_free", "double free (AK_SYNC_LOCKFREE)", "ak_pool_free\\(0x[0-9a-f]+\\): double free", [] {
        Pool t(pool_opts(AK_SYNC_LOCKFREE));
        void *a = ak_pool_alloc(t.p), *b = ak_pool_alloc(t.p);
        ak_pool_free(t.p, a);
        ak_pool_free(t.p, b);
        ak_pool_free(t.p, a);
      }),
      dies(
          "ak_pool_free", "double free in a row (AK_SYNC_NONE)", "ak_pool_free\\(0x[0-9a-f]+\\): double free",
          [] {
            Pool t;
            void *a = ak_pool_alloc(t.p);
            ak_pool_free(t.p, a);
            ak_pool_free(t.p, a);
          },
          Kind::DiesAlways),
      dies(
          "ak_pool_free", "double free in a row (AK_SYNC_THREADS)", "ak_pool_free\\(0x[0-9a-f]+\\): double free",
          [] {
            Pool t(pool_opts(AK_SYNC_THREADS));
            void *a = ak_pool_alloc(t.p);
            ak_pool_free(t.p, a);
            ak_pool_free(t.p, a);
          },
          Kind::DiesAlways),
      dies("ak_pool_free", "an object of another pool",
           "ak_pool_free\\(0x[0-9a-f]+\\): pointer belongs to pool 'other', not to pool 'bad'", [] {
             Pool t;
             ak_pool_options o = pool_opts();
             o.name = "other";
             Pool u(o);
             ak_pool_free(t.p, ak_pool_alloc(u.p));
           }, Kind::DiesCheckedHardened),
      dies(
          "ak_pool_free", "after ak_pool_destroy", "ak_pool_free\\(0x[0-9a-f]+\\): pool 'bad' was destroyed",
          [] {
            ak_pool_options o = pool_opts();
            ak_pool *p = ak_pool_create(&o);
            void *a = ak_pool_alloc(p);
            ak_pool_destroy(p);
            ak_pool_free(p, a);
          },
          Kind::DiesCheckedHardened),

      // ---- pool.h: the rest -----------------------------------------------------------------------
      ret("ak_pool_destroy", "p = NULL", "(no-op)", "-", "", [] {
        ak_pool_destroy(nullptr);
        return nothing();
      }),
      ret("ak_pool_reserve", "p = NULL", "EINVAL", "EINVAL", "^ak_pool_reserve: pool is NULL",
          [] { return code(ak_pool_reserve(nullptr, 1)); }),
      ret("ak_pool_reserve", "n = 0", "0", "-", "", [] {
        Pool t;
        return code(ak_pool_reserve(t.p, 0));
      }),
      ret("ak_pool_reserve", "n = SIZE_MAX (n objects overflow the address space)", "ENOMEM", "ENOMEM",
          "^ak_pool_reserve: pool 'bad': ", [] {
            Pool t;
            return code(ak_pool_reserve(t.p, SIZE_MAX));
          }),
      ret("ak_pool_reserve", "n above max_objects", "ENOMEM", "ENOMEM", "^ak_pool_reserve: pool 'bad': ", [] {
        ak_pool_options o = pool_opts();
        o.max_objects = 10;
        Pool t(o);
        return code(ak_pool_reserve(t.p, 11));
      }),
      ret("ak_pool_owns", "p = NULL", "false", "-", "", [] {
        static long x;
        return boolean(ak_pool_owns(nullptr, &x));
      }),
      ret("ak_pool_owns", "ptr = NULL", "false", "-", "", [] {
        Pool t;
        return boolean(ak_pool_owns(t.p, nullptr));
      }),
      ret("ak_pool_owns", "a pointer from malloc", "false", "-", "", [] {
        Pool t;
        void *keep = ak_pool_alloc(t.p);
        void *m = malloc(48);
        Got g = boolean(ak_pool_owns(t.p, m));
        free(m);
        ak_pool_free(t.p, keep);
        return g;
      }),
      ret("ak_pool_owns", "a pointer into the middle of an object", "false", "-", "", [] {
        Pool t;
        char *o = static_cast<char *>(ak_pool_alloc(t.p));
        Got g = boolean(ak_pool_owns(t.p, o + 8));
        ak_pool_free(t.p, o);
        return g;
      }),
      ret("ak_pool_trim", "p = NULL", "(no-op)", "-", "", [] {
        ak_pool_trim(nullptr);
        return nothing();
      }),
      ret("ak_pool_set_defragment", "p = NULL", "(no-op)", "-", "", [] {
        ak_pool_set_defragment(nullptr, true);
        return nothing();
      }),
      ret("ak_pool_stats_get", "p = NULL", "zeros, version set", "-", "", [] {
        ak_pool_stats s;
        std::memset(&s, 0xff, sizeof s);
        ak_pool_stats_get(nullptr, &s);
        return value(s.version == AK_POOL_STATS_VERSION && s.live == 0 && s.slabs == 0 ? "zeros, version set"
                                                                                      : "other");
      }),
      ret("ak_pool_stats_get", "out = NULL", "(no-op)", "-", "", [] {
        Pool t;
        ak_pool_stats_get(t.p, nullptr);
        return nothing();
      }),
      ret("ak_pool_stats_print", "f = NULL", "-1", "EINVAL", "", [] {
        Pool t;
        return value(std::to_string(ak_pool_stats_print(t.p, nullptr)));
      }),
      ret("ak_pool_stats_print", "f opened read-only", "-1", "EBADF", "", [] {
        Pool t;
        FILE *f = fopen("/dev/null", "r");
        Got g = value(std::to_string(ak_pool_stats_print(t.p, f)));
        fclose(f);
        return g;
      }),
      ret("ak_pool_stats_print", "p = NULL", "0 (prints an empty pool)", "-", "", [] {
        FILE *f = fopen("/dev/null", "w");
        int rc = ak_pool_stats_print(nullptr, f);
        fclose(f);
        return value(rc == 0 ? "0 (prints an empty pool)" : "other");
      }),
      ret("ak_pool_name", "p = NULL", "\"(null)\"", "-", "",
          [] { return value(std::string("\"") + ak_pool_name(nullptr) + "\""); }),

      // ---- malloc.h -------------------------------------------------------------------------------
      ret("ak_malloc", "n = 0", "non-NULL, unique", "-", "", [] {
        void *p = ak_malloc(0), *q = ak_malloc(0);
        Got g = ptr(p);
        if (p && q && p != q) g.result = "non-NULL, unique";
        ak_free(p);
        ak_free(q);
        return g;
      }),
      ret("ak_malloc", "n = SIZE_MAX", "NULL", "ENOMEM", "", [] { return ptr(ak_malloc(opaque(SIZE_MAX))); }),
      ret("ak_malloc", "n = SIZE_MAX - 4096 (overflows with the header)", "NULL", "ENOMEM", "",
          [] { return ptr(ak_malloc(opaque(SIZE_MAX - 4096))); }),
      ret("ak_malloc", "n = 2^62 (the OS refuses)", "NULL", "ENOMEM (under Valgrind: EINVAL)", "",
          [] { return ptr(ak_malloc(opaque(size_t(1) << 62))); }),
      ret("ak_calloc", "count * size overflows", "NULL", "ENOMEM", "", [] { return ptr(ak_calloc(SIZE_MAX / 2, 3)); }),
      ret("ak_calloc", "count = 0", "non-NULL", "-", "", [] {
        void *p = ak_calloc(0, 16);
        Got g = ptr(p);
        ak_free(p);
        return g;
      }),
      ret("ak_realloc", "n = SIZE_MAX (the block stays intact)", "NULL, block intact", "ENOMEM", "", [] {
        auto *p = static_cast<char *>(ak_malloc(8));
        std::memcpy(p, "intact!", 8);
        Got g = ptr(ak_realloc(p, SIZE_MAX));
        if (g.result == "NULL" && std::strcmp(p, "intact!") == 0) g.result = "NULL, block intact";
        ak_free(p);
        return g;
      }),
      ret("ak_realloc", "large block, n = SIZE_MAX (the block stays intact)", "NULL, block intact", "ENOMEM", "",
          [] {
            auto *p = static_cast<char *>(ak_malloc(1 << 20));
            std::memcpy(p, "intact!", 8);
            Got g = ptr(ak_realloc(p, SIZE_MAX));
            if (g.result == "NULL" && std::strcmp(p, "intact!") == 0) g.result = "NULL, block intact";
            ak_free(p);
            return g;
          }),
      ret("ak_realloc", "n = 0 (frees p, as glibc)", "NULL", "-", "", [] { return ptr(ak_realloc(ak_malloc(8), 0)); }),
      ret("ak_realloc", "p = NULL", "non-NULL", "-", "", [] {
        void *p = ak_realloc(nullptr, 16);
        Got g = ptr(p);
        ak_free(p);
        return g;
      }),
      ret("ak_reallocarray", "count * size overflows (the block stays intact)", "NULL, block intact", "ENOMEM", "",
          [] {
            auto *p = static_cast<char *>(ak_malloc(8));
            std::memcpy(p, "intact!", 8);
            Got g = ptr(ak_reallocarray(p, SIZE_MAX / 2, 3));
            if (g.result == "NULL" && std::strcmp(p, "intact!") == 0) g.result = "NULL, block intact";
            ak_free(p);
            return g;
          }),
      ret("ak_aligned_alloc", "align = 0", "NULL", "EINVAL", "", [] { return ptr(ak_aligned_alloc(0, 16)); }),
      ret("ak_aligned_alloc", "align = 3", "NULL", "EINVAL", "", [] { return ptr(ak_aligned_alloc(3, 16)); }),
      ret("ak_aligned_alloc", "align = 2 GiB (larger than any page)", "non-NULL, aligned", "-", "", [] {
        const size_t align = size_t(1) << 31;
        void *p = ak_aligned_alloc(align, 16);
        Got g = ptr(p);
        if (p && reinterpret_cast<uintptr_t>(p) % align == 0) g.result = "non-NULL, aligned";
        ak_free(p);
        return g;
      }),
      ret("ak_aligned_alloc", "align = 2^63", "NULL", "ENOMEM", "", [] { return ptr(ak_aligned_alloc(kBig, 16)); }),
      ret("ak_aligned_alloc", "n = SIZE_MAX", "NULL", "ENOMEM", "", [] { return ptr(ak_aligned_alloc(64, SIZE_MAX)); }),
      ret("ak_posix_memalign", "out = NULL", "EINVAL", "-", "", [] { return code(ak_posix_memalign(nullptr, 16, 8)); }),
      ret("ak_posix_memalign", "align = 3", "EINVAL, *out untouched", "-", "", [] {
        void *out = &out;
        Got g = code(ak_posix_memalign(&out, 3, 8));
        if (g.result == "EINVAL" && out == &out) g.result = "EINVAL, *out untouched";
        return g;
      }),
      ret("ak_posix_memalign", "align = 4 (below sizeof(void *))", "EINVAL", "-", "", [] {
        void *out = nullptr;
        return code(ak_posix_memalign(&out, 4, 8));
      }),
      ret("ak_posix_memalign", "n = SIZE_MAX", "ENOMEM, *out untouched", "-", "", [] {
        void *out = &out;
        Got g = code(ak_posix_memalign(&out, 64, SIZE_MAX));
        if (g.result == "ENOMEM" && out == &out) g.result = "ENOMEM, *out untouched";
        return g;
      }),
      ret("ak_memalign", "align = 0", "non-NULL", "-", "", [] {
        void *p = ak_memalign(0, 16);
        Got g = ptr(p);
        ak_free(p);
        return g;
      }),
      ret("ak_memalign", "align = 24 (rounded up to 32)", "non-NULL, 32-aligned", "-", "", [] {
        void *p = ak_memalign(24, 16);
        Got g = ptr(p);
        if (p && reinterpret_cast<uintptr_t>(p) % 32 == 0) g.result = "non-NULL, 32-aligned";
        ak_free(p);
        return g;
      }),
      ret("ak_free", "p = NULL", "(no-op)", "-", "", [] {
        ak_free(nullptr);
        return nothing();
      }),
      dies("ak_free", "a pointer from the C library's malloc",
           "free\\(0x[0-9a-f]+\\): invalid pointer \\(not from arenakit\\)", [] { ak_free(malloc(100)); }, Kind::DiesAlways),
      dies("ak_free", "a pointer from a pool", "free\\(0x[0-9a-f]+\\): invalid pointer \\(not from arenakit\\)", [] {
        Pool t;
        ak_free(ak_pool_alloc(t.p));
      }, Kind::DiesAlways),
      dies("ak_free", "a pointer into the middle of a block",
           "free\\(0x[0-9a-f]+\\): invalid pointer \\(not the start of a block\\)", [] {
             char *p = static_cast<char *>(ak_malloc(100));
             ak_free(p + 16);
           }, Kind::DiesAlways),
      dies("ak_free", "a pointer into the middle of a solo block (64 KiB to 4 MiB)",
           "free\\(0x[0-9a-f]+\\): invalid pointer \\(not the start of a block\\)", [] {
             char *p = static_cast<char *>(ak_malloc(1 << 20));
             ak_free(p + 4096);
           }, Kind::DiesAlways),
      dies("ak_free", "a pointer into the middle of a large block",
           "free\\(0x[0-9a-f]+\\): invalid pointer \\(inside a large block\\)", [] {
             char *p = static_cast<char *>(ak_malloc(8 << 20));
             ak_free(p + 4096);
           }, Kind::DiesAlways),
      dies("ak_free", "double free", "free\\(0x[0-9a-f]+\\): double free", [] {
        void *p = ak_malloc(100), *q = ak_malloc(100);
        ak_free(p);
        ak_free(q);
        ak_free(p);
      }),
      ret("ak_usable_size", "p = NULL", "0", "-", "", [] { return value(std::to_string(ak_usable_size(nullptr))); }),
      ret("ak_free_sized", "p = NULL", "(no-op)", "-", "", [] {
        ak_free_sized(nullptr, 100);
        return nothing();
      }),
      dies("ak_free_sized", "n larger than the block",
           "ak_free_sized: size 4096 does not match the block at 0x[0-9a-f]+ \\(48 bytes usable\\)",
           [] { ak_free_sized(ak_malloc(48), 4096); }, Kind::DiesCheckedHardened),
      ret("ak_free_aligned_sized", "p = NULL", "(no-op)", "-", "", [] {
        ak_free_aligned_sized(nullptr, 64, 100);
        return nothing();
      }),
      dies("ak_free_aligned_sized", "p not aligned to align",
           "ak_free_aligned_sized: the block at 0x[0-9a-f]+ is not aligned to 4096",
           [] { /* two 64-byte blocks: one of them is not 4096-aligned */
             char *a = static_cast<char *>(ak_aligned_alloc(64, 64)), *b = static_cast<char *>(ak_aligned_alloc(64, 64));
             ak_free_aligned_sized(reinterpret_cast<uintptr_t>(a) % 4096 ? a : b, 4096, 64);
           },
           Kind::DiesCheckedHardened),
      ret("ak_collect", "nothing allocated", "(no-op)", "-", "", [] {
        ak_collect(true);
        return nothing();
      }),
      ret("ak_malloc_stats_get", "out = NULL", "(no-op)", "-", "", [] {
        ak_malloc_stats_get(nullptr);
        return nothing();
      }),
      ret("ak_malloc_stats_print", "f = NULL", "-1", "EINVAL", "",
          [] { return value(std::to_string(ak_malloc_stats_print(nullptr))); }),
      ret("ak_malloc_stats_print", "f opened read-only", "-1", "EBADF", "", [] {
        FILE *f = fopen("/dev/null", "r");
        Got g = value(std::to_string(ak_malloc_stats_print(f)));
        fclose(f);
        return g;
      }),
      ret("ak_malloc_stat", "unknown name", "-1", "ENOENT", "", [] {
        uint64_t figure = 0;
        return value(std::to_string(ak_malloc_stat("stats.allocated", &figure)));
      }),
      ret("ak_malloc_stat", "name = NULL", "-1", "ENOENT", "", [] {
        uint64_t figure = 0;
        return value(std::to_string(ak_malloc_stat(nullptr, &figure)));
      }),
      ret("ak_malloc_stat", "value = NULL", "-1", "EINVAL", "",
          [] { return value(std::to_string(ak_malloc_stat("allocated", nullptr))); }),
      ret("ak_option_get", "o = 99 (unknown)", "0", "EINVAL", "",
          [] { return value(std::to_string(ak_option_get(bad_enum<ak_option>(99)))); }),
      ret("ak_option_set", "o = 99 (unknown)", "(no-op)", "EINVAL", "", [] {
        ak_option_set(bad_enum<ak_option>(99), 1);
        return nothing();
      }),
      ret("ak_option_set", "value out of the option's range", "(no-op)", "EINVAL",
          "^ak_option_set: AK_PURGE_DELAY = -2 is out of range", [] {
            ak_option_set(AK_OPTION_PURGE_DELAY, -2);
            return nothing();
          }),

      // ---- arenakit.hpp: where the C++ layer has error behaviour of its own ------------------------
      ret("ak::arena::arena(opts)", "max_chunk < first_chunk", "throws std::invalid_argument", "n/a",
          "^ak::arena: ak_arena_init: chunk sizes", [] {
            return catching([] {
              ak_arena_options o{};
              o.first_chunk = 1 << 20;
              o.max_chunk = 1 << 16;
              ak::arena a(o);
              return value("constructed");
            });
          }),
      ret("ak::arena::arena(buffer, size)", "size < AK_ARENA_MIN_BUFFER", "throws std::invalid_argument", "n/a",
          "^ak::arena: ak_arena_init: buffer", [] {
            return catching([] {
              static char buf[16];
              ak::arena a(buf, sizeof buf);
              return value("constructed");
            });
          }),
      ret("ak::arena::allocate", "align = 3", "nullptr", "EINVAL", "^ak_arena_alloc: alignment 3", [] {
        ak::arena a;
        void *p = a.allocate(16, opaque(3));
        return value(p ? "non-NULL" : "nullptr");
      }),
      ret("ak::arena::make_array<T>", "n * sizeof(T) overflows", "throws std::bad_array_new_length", "n/a", "", [] {
        return catching([] {
          ak::arena a;
          (void)a.make_array<std::string>(SIZE_MAX / 2);
          return value("returned");
        });
      }),
      ret("ak::arena::make<T>", "the arena's budget is exhausted", "throws ak::bad_alloc", "ENOMEM",
          "^ak::arena::make: ak_arena_alloc: .*exceed the budget", [] {
        return catching([] {
          ak_arena_options o{};
          o.max_bytes = 64;
          ak::arena a(o);
          (void)a.make<Obj>();
          (void)a.make<Obj>();
          return value("returned");
        });
      }),
      ret("ak::arena_allocator<T>::allocate", "n * sizeof(T) overflows", "throws std::bad_array_new_length", "n/a",
          "", [] {
            return catching([] {
              ak::arena a;
              ak::arena_allocator<long> al(a);
              (void)al.allocate(SIZE_MAX / 4);
              return value("returned");
            });
          }),
      ret("ak::arena_resource::allocate", "alignment = 3", "throws ak::bad_alloc", "EINVAL",
          "^ak::arena_resource::allocate: ak_arena_alloc: alignment 3 is not a power of two", [] {
        return catching([] {
          ak::arena a;
          ak::arena_resource r(a);
          (void)r.allocate(16, opaque(3));
          return value("returned");
        });
      }),
      ret("ak::object_pool<T>::object_pool(opts)", "sync = 9 (unknown)", "throws std::invalid_argument", "n/a",
          "^ak::object_pool: ak_pool_create: .*unknown sync mode", [] {
            return catching([] {
              ak::object_pool<Obj> p(bad_enum<ak_sync>(9));
              return value("constructed");
            });
          }),
      ret("ak::object_pool<T>::object_pool(opts)", "AK_BACKING_FILE, directory missing",
          "throws std::system_error(ENOENT)", "n/a", "^ak::object_pool: ak_pool_create: .*cannot create file", [] {
            return catching([] {
              std::string path = scratch_dir() + "/missing/pool.dat";
              ak_pool_options o{};
              o.backing = AK_BACKING_FILE;
              o.path = path.c_str();
              ak::object_pool<Obj> p(o);
              return value("constructed");
            });
          }),
      ret("ak::object_pool<T>::create", "max_objects live already", "throws ak::bad_alloc", "ENOMEM",
          "^ak::object_pool::create: ak_pool_alloc: ", [] {
        return catching([] {
          ak_pool_options o{};
          o.max_objects = 1;
          ak::object_pool<Obj> p(o);
          Obj *a = p.create();
          try {
            (void)p.create();
          } catch (...) {
            p.destroy(a);
            throw;
          }
          return value("returned");
        });
      }),
      ret("ak::object_pool<T>::reserve", "n = SIZE_MAX", "throws ak::bad_alloc", "ENOMEM",
          "^ak::object_pool::reserve: ak_pool_reserve: ", [] {
        return catching([] {
          ak::object_pool<Obj> p(AK_SYNC_NONE);
          p.reserve(SIZE_MAX);
          return value("returned");
        });
      }),
      ret("ak::pool_set::pool_set(base)", "AK_BACKING_FILE", "throws std::invalid_argument", "n/a",
          "^ak::pool_set: AK_BACKING_FILE cannot back several pools", [] {
            return catching([] {
              ak_pool_options o{};
              o.backing = AK_BACKING_FILE;
              o.path = "/tmp/x";
              ak::pool_set s(o);
              return value("constructed");
            });
          }),
      ret("ak::pool_set::get", "align = 3", "throws std::invalid_argument", "n/a",
          "^ak::pool_set: ak_pool_create: .*align is not a power of two", [] {
            return catching([] {
              ak::pool_set s;
              (void)s.get(16, 3);
              return value("returned");
            });
          }),
      ret("ak::pool_allocator<T>::allocate", "n * sizeof(T) overflows", "throws std::bad_array_new_length", "n/a",
          "", [] {
            return catching([] {
              ak::pool_allocator<long> al(std::make_shared<ak::pool_set>());
              (void)al.allocate(SIZE_MAX / 4);
              return value("returned");
            });
          }),
      ret("ak::pool_resource::pool_resource", "upstream = nullptr", "throws std::invalid_argument", "n/a",
          "^ak::pool_resource: the upstream resource is null", [] {
            return catching([] {
              ak::pool_resource r(AK_SYNC_NONE, nullptr);
              return value("constructed");
            });
          }),
  };
    malloc_matrix(v);
    pool_matrix(v);
    arena_matrix(v);
    return v;
  }();
  return rows;
}

// ---- running the rows -----------------------------------------------------------------------
// `want`: a name, "A or B", "n/a", or "A (under Valgrind: B)" - Valgrind's
// mmap refuses impossible lengths with EINVAL where Linux says ENOMEM.
bool errno_matches(std::string want, int got) {
  size_t vg = want.find(" (under Valgrind: ");
  if (vg != std::string::npos) {
    std::string alt = want.substr(vg + 18, want.size() - vg - 19);
    want = AK_ON_VALGRIND() ? want.substr(0, vg) + " or " + alt : want.substr(0, vg);
  }
  if (want == "n/a") return true;
  std::string name = errno_name(got);
  size_t at = 0;
  for (;;) {  // "A or B": any of them
    size_t sep = want.find(" or ", at);
    if (want.substr(at, sep == std::string::npos ? std::string::npos : sep - at) == name) return true;
    if (sep == std::string::npos) return false;
    at = sep + 4;
  }
}

// POSIX extended regular expressions, as EXPECT_DEATH uses on Linux.
bool matches(const std::string &text, const char *pattern) {
  regex_t re;
  if (regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB) != 0) {
    ADD_FAILURE() << "bad regular expression /" << pattern << "/";
    return false;
  }
  bool found = regexec(&re, text.c_str(), 0, nullptr, 0) == 0;
  regfree(&re);
  return found;
}

class BadInput : public ::testing::TestWithParam<size_t> {};

TEST_P(BadInput, Row) {
  const Row &row = table()[GetParam()];
  SCOPED_TRACE(std::string(row.function) + "(" + row.input + ")");
  if (row.kind == Kind::Returns) {
    // A fresh thread: errno is 0 and ak_last_error() is "" before the call,
    // so what is seen afterwards comes from this call alone.
    Got got;
    std::thread([&] {
      errno = 0;
      got = row.call();
    }).join();
    EXPECT_EQ(got.result, row.result);
    EXPECT_TRUE(errno_matches(row.err, got.err))
        << "errno " << errno_name(got.err) << " (" << got.err << "), expected " << row.err;
    if (*row.message) {
      EXPECT_TRUE(matches(got.message, row.message))
          << "message \"" << got.message << "\" does not match /" << row.message << "/";
    }
    return;
  }
  if (row.kind == Kind::DiesCheckedHardened && !AK_CHECKED && !AK_HARDENED)
    GTEST_SKIP() << "undefined in release builds; runs in the checked and the hardened build";
  if ((row.kind == Kind::DiesChecked || row.kind == Kind::DiesCheckedAsan) && !AK_CHECKED)
    GTEST_SKIP() << "undefined in release builds; runs in the checked build";
  if (row.kind == Kind::DiesCheckedAsan && !AK_TRACK_ASAN) GTEST_SKIP() << "needs AddressSanitizer";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(row.die(), row.message);
}

std::string row_name(size_t i) {
  std::string n = std::to_string(i) + "_";
  for (const char *c = table()[i].function; *c; c++)
    n += std::isalnum(static_cast<unsigned char>(*c)) ? *c : '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(Table, BadInput, ::testing::Range<size_t>(0, table().size()),
                         [](const auto &pi) { return row_name(pi.param); });

// ---- the table as the documented contract -----------------------------------------------------
std::string cell(const std::string &s) {
  std::string out;
  for (char c : s) {
    if (c == '|')
      out += "\\|";
    else
      out += c;
  }
  return out;
}

std::string render() {
  std::ostringstream md;
  md << "# Bad input: the documented contract\n\n"
        "<!-- Generated from tests/bad_input_test.cpp; do not edit. The test BadInputDocs.DocsMatchTheTable\n"
        "     fails when this file and the table differ; AK_UPDATE_DOCS=1 rewrites it. -->\n\n"
        "What every public function does with each bad input a user can give. Each row is\n"
        "one test case of `tests/bad_input_test.cpp`, run in the release build, the hardened\n"
        "build and the checked build (`AK_CHECKED`, under AddressSanitizer and\n"
        "UndefinedBehaviorSanitizer).\n\n"
        "- **Result**: the return value. `(no-op)`: the call does nothing. \"undefined; checked\n"
        "  build: dies\": misuse that release builds do not detect (it may corrupt memory or\n"
        "  crash); the checked build aborts with the message in the last column (a death test\n"
        "  there). An empty message means the process dies without one (the inline fast paths\n"
        "  read the handle before any check). \"undefined; checked and hardened builds: die\":\n"
        "  the same, and the hardened build (`AK_HARDENED`) dies with the message too.\n"
        "  \"dies (every build)\": release builds included, the process prints the message and\n"
        "  aborts (as the C library's `free` does with a pointer it did not hand out).\n"
        "- **errno**: errno after the call (`-`: left unchanged; `n/a`: not specified).\n"
        "- **Message**: a regular expression that `ak_last_error()` (or the exception's\n"
        "  `what()`, or the checked build's message on stderr) matches. Empty: not specified\n"
        "  (the malloc family sets errno only, as the C library does).\n\n"
        "File backing in a read-only directory: the tests run as root on the build machines,\n"
        "and root ignores directory permissions, so as root the row uses a path in `/sys`\n"
        "(sysfs refuses to create files even for root); as another user it uses a directory\n"
        "made read-only with chmod 0555.\n";
  const char *section = "";
  auto header = [&](const char *title) {
    md << "\n## " << title << "\n\n"
       << "| Function | Bad input | Result | errno | Message |\n"
       << "| --- | --- | --- | --- | --- |\n";
  };
  for (const Row &r : table()) {
    std::string f = r.function;
    const char *s = f.rfind("ak::", 0) == 0       ? "C++ layer (`arenakit.hpp`)"
                    : f.rfind("ak_arena", 0) == 0 ? "Region arena (`arena.h`)"
                    : f.rfind("ak_pool", 0) == 0  ? "Object pool (`pool.h`)"
                    : f == "ak_version" || f == "ak_last_error" || f == "ak_hardening"
                        ? "Common (`common.h`)"
                        : "General-purpose heap (`malloc.h`)";
    if (std::strcmp(s, section) != 0) {
      section = s;
      header(s);
    }
    md << "| `" << cell(r.function) << "` | " << cell(r.input) << " | " << cell(r.result) << " | "
       << cell(r.err) << " | " << (*r.message ? "`" + cell(r.message) + "`" : std::string()) << " |\n";
  }
  return md.str();
}

std::string docs_path() {
  std::string here = __FILE__;  // .../tests/bad_input_test.cpp
  return here.substr(0, here.rfind("/tests/")) + "/docs/bad-input.md";
}

// Every public enum has the fixed type int in C++ (AK_ENUM_INT), so that
// the bad values the rows pass are values of it: a program may hand any
// int to the library, which refuses it with EINVAL.
TEST(BadInputEnums, EveryPublicEnumTakesAnyInt) {
  EXPECT_TRUE((std::is_same<std::underlying_type_t<ak_arena_retain>, int>::value));
  EXPECT_TRUE((std::is_same<std::underlying_type_t<ak_sync>, int>::value));
  EXPECT_TRUE((std::is_same<std::underlying_type_t<ak_backing>, int>::value));
  EXPECT_TRUE((std::is_same<std::underlying_type_t<ak_option>, int>::value));
  EXPECT_TRUE((std::is_same<std::underlying_type_t<ak_prof_option>, int>::value));
  EXPECT_TRUE((std::is_same<std::underlying_type_t<ak_background>, int>::value));
}

TEST(BadInputDocs, DocsMatchTheTable) {
  std::string want = render();
  const char *update = getenv("AK_UPDATE_DOCS");
  if (update && std::strcmp(update, "1") == 0) {
    std::ofstream(docs_path()) << want;
  }
  std::ifstream in(docs_path());
  ASSERT_TRUE(in) << docs_path() << " is missing; run with AK_UPDATE_DOCS=1 to write it";
  std::stringstream have;
  have << in.rdbuf();
  EXPECT_EQ(have.str(), want) << docs_path() << " differs from the table; run with AK_UPDATE_DOCS=1";
}

// Every public function of the C headers has at least one row.
TEST(BadInputDocs, EveryPublicFunctionHasARow) {
  const char *functions[] = {"ak_version",
                             "ak_hardening",
                             "ak_pool_create_inline",
                             "ak_last_error",
                             "ak_arena_init",
                             "ak_arena_alloc_slow",
                             "ak_arena_alloc",
                             "ak_arena_clear",
                             "ak_arena_destroy",
                             "ak_arena_save",
                             "ak_arena_restore",
                             "ak_arena_defer",
                             "ak_arena_zalloc",
                             "ak_arena_alloc_array",
                             "ak_arena_strdup",
                             "ak_arena_strndup",
                             "ak_arena_realloc",
                             "ak_arena_owns",
                             "ak_arena_stats_get",
                             "ak_pool_create",
                             "ak_pool_destroy",
                             "ak_pool_alloc_slow",
                             "ak_pool_free_slow",
                             "ak_pool_alloc",
                             "ak_pool_free",
                             "ak_pool_reserve",
                             "ak_pool_owns",
                             "ak_pool_trim",
                             "ak_pool_set_defragment",
                             "ak_pool_stats_get",
                             "ak_pool_stats_print",
                             "ak_pool_name",
                             "ak_malloc",
                             "ak_calloc",
                             "ak_realloc",
                             "ak_reallocarray",
                             "ak_free",
                             "ak_aligned_alloc",
                             "ak_posix_memalign",
                             "ak_memalign",
                             "ak_usable_size",
                             "ak_free_sized",
                             "ak_free_aligned_sized",
                             "ak_collect",
                             "ak_malloc_stats_get",
                             "ak_malloc_stats_print",
                             "ak_malloc_stat",
                             "ak_option_get",
                             "ak_option_set"};
  for (const char *f : functions) {
    bool found = false;
    for (const Row &r : table()) found = found || std::strcmp(r.function, f) == 0;
    EXPECT_TRUE(found) << f << " has no row in the bad-input table";
  }
}

}  // namespace
