/* SPDX-License-Identifier: MIT */
/* os_mem.c - the OS memory layer: the only file that calls mmap, munmap,
 * madvise and membarrier. See os_mem.h for the contract.
 *
 * Portability (docs/platforms.md): mremap, mincore and getrandom are
 * Linux system calls that glibc and musl both wrap; CMake checks for each
 * (AK_HAVE_MREMAP, AK_HAVE_MINCORE, AK_HAVE_GETRANDOM) and a C library
 * without one gets the portable fallback below instead. On x86-64 and
 * aarch64 Linux the build takes the system calls, so the fallbacks cost
 * those builds nothing; the musl stage of scripts/test.sh builds them
 * (forced off) and runs the C tests on them. */
#define _GNU_SOURCE
#include "os/os_mem.h"

#include "common/assert.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#ifndef AK_HAVE_MREMAP
#define AK_HAVE_MREMAP 1
#endif
#ifndef AK_HAVE_MINCORE
#define AK_HAVE_MINCORE 1
#endif
#ifndef AK_HAVE_GETRANDOM
#define AK_HAVE_GETRANDOM 1
#endif
#if AK_HAVE_GETRANDOM
#include <sys/random.h>
#endif
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <unistd.h>

/* No MAP_NORESERVE: what this maps is handed out as usable memory, so it
 * is charged against what the system can commit, as glibc's malloc does.
 * The kernel then answers ENOMEM at once for a request it cannot back: a
 * mapping larger than RAM + swap under the heuristic overcommit policy
 * (overcommit_memory 0), anything past the commit limit under the strict
 * one (2), and anything past RLIMIT_AS in every mode. With MAP_NORESERVE,
 * a malloc larger than RAM + swap would succeed and the program would die
 * on a page fault later. (The aligned region is only ever a hint, not a
 * reservation, so there is nothing mapped NORESERVE at all.) */
static void *sys_map(void *hint, size_t size, void *ctx) {
  (void)ctx;
  void *p = mmap(hint, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

static int sys_unmap(void *p, size_t size, void *ctx) {
  (void)ctx;
  return munmap(p, size);
}

/* MADV_DONTNEED, not MADV_FREE (bench/madvise_churn compares them): reuse
 * of a MADV_FREE page costs no fault, but the kernel frees MADV_FREE pages
 * only under memory pressure, so they stay in RSS: cgroup accounting and
 * the user's monitor show the memory as still used, and "RSS back to its
 * baseline" cannot hold. MADV_DONTNEED takes the pages out of RSS at once.
 * The reclaim policy (common/reclaim.h) decommits only spares left unused
 * for the purge delay, so the refault cost that MADV_FREE would save is
 * already rare by construction; what is decommitted must show as gone. */
static int sys_decommit(void *p, size_t size, void *ctx) {
  (void)ctx;
  return madvise(p, size, MADV_DONTNEED);
}

static const _ak_os_hooks default_hooks = {sys_map, sys_unmap, sys_decommit, NULL};
static _ak_os_hooks hooks = {sys_map, sys_unmap, sys_decommit, NULL};

/* Counters: relaxed atomics; they are statistics, not synchronisation.
 * The live ones are striped: each thread adds to one of AK_OS_STRIPES
 * cache lines, so threads that map and unmap all the time (a pool on the
 * C heap churning slabs) do not pass one line back and forth; a reader
 * sums the stripes (a stripe may go "negative" when one thread maps and
 * another unmaps: unsigned wrap-around, the sum is right). */
#define AK_OS_STRIPES 16
typedef struct os_stripe {
  _Alignas(64) atomic_size_t mapped_bytes;
  atomic_size_t mappings, map_calls;
} os_stripe;
static os_stripe c_stripes[AK_OS_STRIPES];
static atomic_uint c_next_stripe;
static atomic_size_t c_failed_calls;
static __thread unsigned tl_stripe __attribute__((tls_model("initial-exec"))); /* index + 1; 0: none yet */

/* Adds the deltas (as unsigned, wrapping) to the calling thread's stripe. */
static void count(size_t bytes, size_t mappings, size_t calls) {
  unsigned i = tl_stripe;
  if (AK_UNLIKELY(i == 0))
    i = tl_stripe = atomic_fetch_add_explicit(&c_next_stripe, 1, memory_order_relaxed) % AK_OS_STRIPES + 1;
  AK_ASSERT(i >= 1 && i <= AK_OS_STRIPES);
  os_stripe *c = &c_stripes[i - 1];
  if (bytes) atomic_fetch_add_explicit(&c->mapped_bytes, bytes, memory_order_relaxed);
  if (mappings) atomic_fetch_add_explicit(&c->mappings, mappings, memory_order_relaxed);
  if (calls) atomic_fetch_add_explicit(&c->map_calls, calls, memory_order_relaxed);
}

/* Fault injection (see os_mem.h): per kind, a countdown to the failing
 * call (0 = off), its errno, the calls seen since arming, the total fired. */
static struct {
  atomic_size_t countdown, calls, fired;
  atomic_int err;
} faults[_AK_OS_FAULT_KINDS_];

void _ak_os_fail_nth(_ak_os_fault kind, size_t n, int err) {
  if ((unsigned)kind >= _AK_OS_FAULT_KINDS_) return;
  atomic_store(&faults[kind].err, err ? err : ENOMEM);
  atomic_store(&faults[kind].calls, 0);
  atomic_store(&faults[kind].countdown, n);
}

size_t _ak_os_fault_calls(_ak_os_fault kind) {
  return (unsigned)kind < _AK_OS_FAULT_KINDS_ ? atomic_load(&faults[kind].calls) : 0;
}

size_t _ak_os_faults_fired(_ak_os_fault kind) {
  return (unsigned)kind < _AK_OS_FAULT_KINDS_ ? atomic_load(&faults[kind].fired) : 0;
}

/* Counts one call of `kind`; true (errno set) when the injected failure
 * fires on it. One relaxed load when nothing is armed. */
static bool fault_fires(_ak_os_fault kind) {
  size_t n = atomic_load_explicit(&faults[kind].countdown, memory_order_relaxed);
  if (AK_LIKELY(n == 0)) return false;
  atomic_fetch_add(&faults[kind].calls, 1);
  while (n > 0) {
    if (atomic_compare_exchange_weak(&faults[kind].countdown, &n, n - 1)) {
      if (n != 1) return false;
      atomic_fetch_add(&faults[kind].fired, 1);
      errno = atomic_load(&faults[kind].err);
      return true;
    }
  }
  return false;
}

_ak_os_hooks _ak_os_set_hooks(const _ak_os_hooks *h) {
  _ak_os_hooks old = hooks;
  hooks = h ? *h : default_hooks;
  return old;
}

_ak_os_hooks _ak_os_default_hooks(void) { return default_hooks; }

void _ak_os_get_counters(_ak_os_counters *out) {
  out->mapped_bytes = out->mappings = out->map_calls = 0;
  for (size_t i = 0; i < AK_OS_STRIPES; i++) {
    out->mapped_bytes += atomic_load_explicit(&c_stripes[i].mapped_bytes, memory_order_relaxed);
    out->mappings += atomic_load_explicit(&c_stripes[i].mappings, memory_order_relaxed);
    out->map_calls += atomic_load_explicit(&c_stripes[i].map_calls, memory_order_relaxed);
  }
  out->failed_calls = atomic_load_explicit(&c_failed_calls, memory_order_relaxed);
}

/* The page size the layer reports (0: not asked yet), and the system's:
 * they differ only under _ak_os_set_page_size, which shows the library a
 * system with larger pages; mappings are then aligned to the reported
 * size, as that system's kernel would align them. */
static atomic_size_t g_page_size, g_system_page_size;

static size_t system_page_size(void) {
  size_t ps = atomic_load_explicit(&g_system_page_size, memory_order_relaxed);
  if (ps == 0) {
    long v = sysconf(_SC_PAGESIZE);
    ps = v > 0 ? (size_t)v : 4096;
    atomic_store_explicit(&g_system_page_size, ps, memory_order_relaxed);
  }
  return ps;
}

size_t _ak_os_page_size(void) {
  size_t ps = atomic_load_explicit(&g_page_size, memory_order_relaxed);
  if (ps == 0) {
    ps = system_page_size();
    atomic_store_explicit(&g_page_size, ps, memory_order_relaxed);
  }
  return ps;
}

size_t _ak_os_set_page_size(size_t ps) {
  size_t before = _ak_os_page_size();
  AK_ASSERT(ps == 0 || ((ps & (ps - 1)) == 0 && ps % system_page_size() == 0));
  atomic_store_explicit(&g_page_size, ps, memory_order_relaxed);
  return before;
}

size_t _ak_os_round_page(size_t n) {
  size_t ps = _ak_os_page_size();
  if (n > SIZE_MAX - (ps - 1)) return 0;
  return (n + ps - 1) & ~(ps - 1);
}

/* Aligned mappings are asked for at addresses of their own region (hints
 * only: the kernel takes one if that range is free, and never replaces a
 * mapping for it): a bump pointer hands each request a fresh range,
 * aligned for it, so consecutive slabs or segments come out aligned with
 * one mmap each and lie end to end (the kernel merges them into one VMA),
 * and threads that map at the same time never ask for the same range. The
 * region starts at a random place (address-space randomisation) of
 * [1 TiB, 1.5 TiB) and wraps before 2 TiB, below the region mimalloc
 * hints at (2 TiB up), so that the two do not take each other's ranges in
 * one process. A hint the kernel cannot take (the range is in use) only
 * costs the over-map below; after AK_HINT_MAX_MISSES in a row (a sanitizer
 * keeps that region for itself) the layer stops asking. */
#define AK_HINT_BASE ((uintptr_t)1 << 40)
#define AK_HINT_SPAN ((uintptr_t)1 << 40)
#define AK_HINT_GRAIN ((uintptr_t)64 << 10)
#define AK_HINT_MAX_SIZE ((uintptr_t)1 << 30) /* larger: no hint (randomisation) */
#define AK_HINT_MAX_MISSES 16
static atomic_uintptr_t g_hint_next;
static atomic_int g_hint_misses; /* hints in a row the kernel did not take */

static void *aligned_hint(size_t len, size_t align) {
#if UINTPTR_MAX <= 0xffffffffu
  (void)len, (void)align, (void)&g_hint_next; /* 32-bit: no room for a region of its own */
  return NULL;
#else
  if (len > AK_HINT_MAX_SIZE || align > AK_HINT_MAX_SIZE ||
      atomic_load_explicit(&g_hint_misses, memory_order_relaxed) >= AK_HINT_MAX_MISSES)
    return NULL;
  /* Room for `len` at an `align` boundary, in whole grains (every hint
   * is a multiple of the grain, so `align` <= grain costs no slack). */
  uintptr_t slack = align > AK_HINT_GRAIN ? align - AK_HINT_GRAIN : 0;
  uintptr_t step = (len + slack + AK_HINT_GRAIN - 1) & ~(AK_HINT_GRAIN - 1);
  for (int tries = 0; tries < 4; tries++) {
    uintptr_t h = atomic_fetch_add_explicit(&g_hint_next, step, memory_order_relaxed);
    if (h >= AK_HINT_BASE && h <= AK_HINT_BASE + AK_HINT_SPAN - step) {
      uintptr_t at = (h + align - 1) & ~(uintptr_t)(align - 1);
      /* The aligned range lies inside the step this call took. */
      AK_ASSERT(at + len <= h + step);
      return (void *)at;
    }
    /* First use or past the end: one thread moves the pointer to a random
     * 4 MiB boundary of the first half; the others take from there. */
    uintptr_t start =
        AK_HINT_BASE + (((uintptr_t)_ak_os_entropy() % (AK_HINT_SPAN / 2)) & ~(((uintptr_t)4 << 20) - 1));
    uintptr_t seen = h + step;
    if (atomic_compare_exchange_strong_explicit(&g_hint_next, &seen, start + step, memory_order_relaxed,
                                                memory_order_relaxed))
      return (void *)((start + align - 1) & ~(uintptr_t)(align - 1));
  }
  return NULL;
#endif
}

/* Unmaps part of a mapping without touching the counters (used to trim the
 * over-mapped ends of an aligned reservation). */
static void unmap_part(void *p, size_t size) {
  if (size) (void)hooks.unmap(p, size, hooks.ctx);
}

void *_ak_os_alloc(size_t size, size_t align) {
  size_t ps = _ak_os_page_size(), sys_ps = system_page_size();
  size_t len = _ak_os_round_page(size);
  if (size == 0 || align == 0 || (align & (align - 1)) != 0 || len == 0) {
    atomic_fetch_add_explicit(&c_failed_calls, 1, memory_order_relaxed);
    errno = (size != 0 && len == 0) ? ENOMEM : EINVAL;
    return NULL;
  }
  if (fault_fires(_AK_OS_FAULT_RESERVE)) {
    atomic_fetch_add_explicit(&c_failed_calls, 1, memory_order_relaxed);
    return NULL;
  }
  void *p;
  if (align < ps) align = ps; /* a mapping starts at a page (of the reported size) */
  if (align <= sys_ps) {
    p = hooks.map(NULL, len, hooks.ctx);
  } else {
    /* First one mapping at a hint of the aligned region: one system call
     * instead of three, and no unmap (an unmap in a multi-threaded process
     * interrupts the other cores to flush their TLBs). */
    void *hint = aligned_hint(len, align);
    p = NULL;
    bool overmap = hint == NULL; /* no hint (too large, or hints stopped): over-map at once */
    if (hint) {
      p = hooks.map(hint, len, hooks.ctx);
      if (p == hint)
        atomic_store_explicit(&g_hint_misses, 0, memory_order_relaxed);
      else if (p)
        atomic_fetch_add_explicit(&g_hint_misses, 1, memory_order_relaxed);
      if (p && ((uintptr_t)p & (align - 1)) != 0) { /* placed elsewhere, unaligned */
        unmap_part(p, len);
        overmap = true;
      }
    }
    if (overmap) {
      /* Over-map by align - page, then trim both ends. */
      size_t extra = align - sys_ps;
      if (len > SIZE_MAX - extra) {
        atomic_fetch_add_explicit(&c_failed_calls, 1, memory_order_relaxed);
        errno = ENOMEM;
        return NULL;
      }
      char *raw = hooks.map(NULL, len + extra, hooks.ctx);
      p = raw;
      if (raw) {
        char *aligned = (char *)(((uintptr_t)raw + align - 1) & ~(uintptr_t)(align - 1));
        AK_ASSERT(aligned + len <= raw + len + extra); /* the trimmed range lies in the over-map */
        unmap_part(raw, (size_t)(aligned - raw));
        unmap_part(aligned + len, (size_t)(raw + len + extra - (aligned + len)));
        p = aligned;
      }
    }
  }
  if (!p) {
    atomic_fetch_add_explicit(&c_failed_calls, 1, memory_order_relaxed);
    if (errno == 0) errno = ENOMEM;
    return NULL;
  }
  /* What every caller relies on: `align`-aligned, whole pages. */
  AK_ASSERT(((uintptr_t)p & (align - 1)) == 0 && ((uintptr_t)p & (ps - 1)) == 0);
  count(len, 1, 1);
  return p;
}

void _ak_os_free(void *p, size_t size) {
  if (!p) return;
  size_t len = _ak_os_round_page(size);
  /* A range this layer mapped: page-aligned, not empty. */
  AK_ASSERT(((uintptr_t)p & (_ak_os_page_size() - 1)) == 0 && len > 0);
  int saved = errno; /* freeing never changes errno for the caller */
  (void)hooks.unmap(p, len, hooks.ctx);
  errno = saved;
  count(-len, (size_t)-1, 0);
}

void *_ak_os_remap(void *p, size_t old_size, size_t new_size, size_t align) {
  size_t old_len = _ak_os_round_page(old_size), new_len = _ak_os_round_page(new_size);
  AK_ASSERT(((uintptr_t)p & (_ak_os_page_size() - 1)) == 0 && old_len > 0);
  if (new_len == 0) {
    errno = ENOMEM;
    return NULL;
  }
  if (new_len == old_len) return p;
  if (new_len > old_len && fault_fires(_AK_OS_FAULT_COMMIT)) return NULL;
#if !AK_HAVE_MREMAP
  /* Without mremap: shrink by unmapping the tail; grow in place when the
   * range after the mapping is free (a hint the kernel takes), else move
   * by copying into a new aligned mapping. */
  if (new_len < old_len) {
    unmap_part((char *)p + new_len, old_len - new_len);
    count(new_len - old_len, 0, 0); /* wraps: subtracts */
    return p;
  }
  char *end = (char *)p + old_len;
  void *tail = hooks.map(end, new_len - old_len, hooks.ctx);
  if (tail == end) {
    count(new_len - old_len, 0, 0);
    return p;
  }
  if (tail) unmap_part(tail, new_len - old_len);
  void *moved = _ak_os_alloc(new_len, align);
  if (!moved) return NULL;
  memcpy(moved, p, old_len);
  _ak_os_free(p, old_len);
  return moved;
#else
  void *q = mremap(p, old_len, new_len, 0); /* in place, or fail */
  if (q == MAP_FAILED) {
    /* Move: reserve an aligned range, then move the pages over it. */
    void *dst = _ak_os_alloc(new_len, align);
    if (!dst) return NULL;
    count(-new_len, (size_t)-1, 0); /* counted below */
    q = mremap(p, old_len, new_len, MREMAP_MAYMOVE | MREMAP_FIXED, dst);
    if (q == MAP_FAILED && errno == EFAULT && new_len > old_len) {
      /* [p, p + old_len) is mapped but spans several of the kernel's
       * mappings (a block moved into part of another with
       * _ak_os_move_into), which mremap takes only one at a time: copy. */
      memcpy(dst, p, old_len);
      unmap_part(p, old_len);
      q = dst;
    } else if (q == MAP_FAILED) {
      int e = errno;
      count(new_len, 1, 0);
      _ak_os_free(dst, new_len);
      errno = e;
      return NULL;
    }
  }
  count(new_len - old_len, 0, 0); /* wraps when shrinking */
  return q;
#endif
}

int _ak_os_move_into(void *p, size_t size, void *dst) {
  size_t len = _ak_os_round_page(size);
  AK_ASSERT((((uintptr_t)p | (uintptr_t)dst) & (_ak_os_page_size() - 1)) == 0);
  void *q = mremap(p, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, dst);
  if (q == MAP_FAILED) return -1;
  count(-len, (size_t)-1, 0); /* [p, p + len) is gone; dst's range was counted already */
  return 0;
}

int _ak_os_decommit(void *p, size_t size) {
  /* madvise takes whole pages: an unaligned start would fail (EINVAL) and
   * keep the memory committed. */
  AK_ASSERT(((uintptr_t)p & (_ak_os_page_size() - 1)) == 0);
  return hooks.decommit(p, _ak_os_round_page(size), hooks.ctx);
}

uint64_t _ak_os_entropy(void) {
  uint64_t v = 0;
#if AK_HAVE_GETRANDOM
  if (getrandom(&v, sizeof v, GRND_NONBLOCK) != (ssize_t)sizeof v) return 0;
#else
  int saved = errno;
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? read(fd, &v, sizeof v) : -1;
  if (fd >= 0) close(fd);
  errno = saved;
  if (n != (ssize_t)sizeof v) return 0;
#endif
  return v;
}

int _ak_os_guard(void *p, size_t size, bool on) {
  if (!on && fault_fires(_AK_OS_FAULT_COMMIT)) return -1;
  return mprotect(p, _ak_os_round_page(size), on ? PROT_NONE : PROT_READ | PROT_WRITE);
}

size_t _ak_os_resident(const void *p, size_t size) {
#if !AK_HAVE_MINCORE
  (void)p; /* no way to ask: every page counts as resident (an upper bound) */
  return _ak_os_round_page(size);
#else
  size_t ps = system_page_size(); /* mincore's unit, whatever the layer reports */
  size_t pages = _ak_os_round_page(size) / ps;
  unsigned char vec[256];
  size_t resident = 0;
  for (size_t i = 0; i < pages; i += sizeof vec) {
    size_t n = pages - i < sizeof vec ? pages - i : sizeof vec;
    if (mincore((char *)p + i * ps, n * ps, vec) != 0) return 0;
    for (size_t j = 0; j < n; j++) resident += (vec[j] & 1) ? ps : 0;
  }
  return resident;
#endif
}

void *_ak_os_heap_alloc(size_t size, size_t align) {
  if (align < sizeof(void *)) align = sizeof(void *);
  if (size == 0 || size > SIZE_MAX - align) {
    errno = size ? ENOMEM : EINVAL;
    return NULL;
  }
  size_t len = (size + align - 1) & ~(align - 1); /* aligned_alloc wants a multiple */
  void *p = fault_fires(_AK_OS_FAULT_RESERVE) ? NULL : aligned_alloc(align, len);
  if (!p) {
    atomic_fetch_add_explicit(&c_failed_calls, 1, memory_order_relaxed);
    if (errno == 0) errno = ENOMEM;
    return NULL;
  }
  count(len, 1, 1);
  return p;
}

void _ak_os_heap_free(void *p, size_t size) {
  if (!p) return;
  AK_ASSERT(size > 0); /* the size _ak_os_heap_alloc counted */
  free(p);
  count(-size, (size_t)-1, 0);
}

void _ak_os_fail_file_op(int nth, int err) {
  _ak_os_fail_nth(_AK_OS_FAULT_FILE, nth > 0 ? (size_t)nth : 0, err);
}

/* Reads up to cap - 1 bytes of a /proc file into `buf` (NUL-terminated)
 * with plain system calls (no stdio: no malloc under the preload).
 * Returns the length; 0 if it cannot be read. */
static size_t read_proc(const char *path, char *buf, size_t cap) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  size_t n = 0;
  for (ssize_t r; n < cap - 1 && (r = read(fd, buf + n, cap - 1 - n)) != 0; n += r > 0 ? (size_t)r : 0)
    if (r < 0 && errno != EINTR) break;
  close(fd);
  buf[n] = '\0';
  return n;
}

/* The number after `key` in /proc/meminfo's text, in bytes (the file
 * counts kB); SIZE_MAX if absent. */
static size_t meminfo_bytes(const char *text, const char *key) {
  const char *at = strstr(text, key);
  if (!at) return SIZE_MAX;
  unsigned long long kb = strtoull(at + strlen(key), NULL, 10);
  return kb > SIZE_MAX / 1024 ? SIZE_MAX : (size_t)kb * 1024;
}

size_t _ak_os_commit_limit(void) {
  int saved = errno;
  size_t limit = SIZE_MAX;
  char buf[8192];
  bool strict = read_proc("/proc/sys/vm/overcommit_memory", buf, sizeof buf) && buf[0] == '2';
  struct sysinfo si;
  if (strict && read_proc("/proc/meminfo", buf, sizeof buf)) {
    size_t cl = meminfo_bytes(buf, "CommitLimit:"), used = meminfo_bytes(buf, "Committed_AS:");
    if (cl != SIZE_MAX && used != SIZE_MAX) limit = cl > used ? cl - used : 0;
  } else if (!strict && sysinfo(&si) == 0) {
    unsigned long long total = (unsigned long long)si.totalram + si.totalswap,
                       unit = si.mem_unit ? si.mem_unit : 1;
    limit = total > SIZE_MAX / unit ? SIZE_MAX : (size_t)(total * unit);
  }
  struct rlimit rl;
  if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    size_t in_use = 0; /* the first field of statm: pages of address space */
    if (read_proc("/proc/self/statm", buf, sizeof buf))
      in_use = (size_t)strtoull(buf, NULL, 10) * system_page_size();
    size_t left = rl.rlim_cur > in_use ? (size_t)rl.rlim_cur - in_use : 0;
    if (left < limit) limit = left;
  }
  errno = saved;
  return limit;
}

/* The file system backs the file as the pool will use it: a page mapped
 * shared (tried first: it writes nothing, and pseudo files such as /proc's
 * have no mmap), then a page of blocks allocated (posix_fallocate), then
 * the file emptied again. 0, or -1 + errno and `*why`. */
static int file_probe(int fd, const char **why) {
  size_t ps = system_page_size();
  void *m = mmap(NULL, ps, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) {
    *why = "is on a file system that cannot map it shared (mmap MAP_SHARED)";
    return -1;
  }
  munmap(m, ps);
  int e;
  while ((e = posix_fallocate(fd, 0, (off_t)ps)) == EINTR) {
  }
  if (e) {
    *why = "is on a file system that cannot allocate blocks for it (posix_fallocate)";
    errno = e;
    return -1;
  }
  if (ftruncate(fd, 0) != 0) {
    *why = "cannot be truncated";
    return -1;
  }
  return 0;
}

int _ak_os_file_open(const char *path, const char **why) {
  /* Not O_TRUNC: the type and the lock decide first whether the file may
   * be emptied. O_NONBLOCK: opening a FIFO or a device never waits. */
  *why = NULL;
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0600);
  if (fd < 0) return -1;
  struct stat st;
  int e = 0;
  if (fstat(fd, &st) != 0) {
    e = errno;
  } else if (!S_ISREG(st.st_mode)) {
    *why = "is not a regular file";
    e = EINVAL;
  } else if (fcntl(fd, F_SETFL, 0) != 0) {
    e = errno;
  } else if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    e = errno == EWOULDBLOCK ? EBUSY : errno;
    *why = "is in use by another pool (locked)";
  } else if (ftruncate(fd, 0) != 0) {
    e = errno;
    *why = "cannot be truncated";
  } else if (file_probe(fd, why) != 0) {
    e = errno;
  }
  if (e) {
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

int _ak_os_file_resize(int fd, size_t size) {
  if (fault_fires(_AK_OS_FAULT_FILE)) return -1;
  if ((off_t)size < 0) {
    errno = EFBIG;
    return -1;
  }
  return ftruncate(fd, (off_t)size);
}

void *_ak_os_file_map(int fd, size_t offset, size_t size, size_t align) {
  if (fault_fires(_AK_OS_FAULT_FILE)) return NULL;
  size_t len = _ak_os_round_page(size);
  /* Reserve an aligned window of anonymous memory, then map the file over
   * it with MAP_FIXED: the window guarantees the alignment. */
  char *win = _ak_os_alloc(len, align);
  if (!win) return NULL;
  void *p = mmap(win, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, (off_t)offset);
  if (p == MAP_FAILED) {
    int e = errno;
    _ak_os_free(win, len);
    errno = e;
    return NULL;
  }
  return p;
}

int _ak_os_file_alloc(int fd, size_t offset, size_t size) {
  if (fault_fires(_AK_OS_FAULT_FILE)) return -1;
  if ((off_t)offset < 0 || (off_t)size < 0 || (off_t)(offset + size) < (off_t)offset) {
    errno = EFBIG;
    return -1;
  }
  int e;
  while ((e = posix_fallocate(fd, (off_t)offset, (off_t)size)) == EINTR) {
  }
  if (e) {
    errno = e;
    return -1;
  }
  return 0;
}

size_t _ak_os_file_room(int fd) {
  struct statvfs sv;
  if (fstatvfs(fd, &sv) != 0) return SIZE_MAX;
  unsigned long long unit = sv.f_frsize ? sv.f_frsize : sv.f_bsize;
  return unit && sv.f_bavail > SIZE_MAX / unit ? SIZE_MAX : (size_t)(sv.f_bavail * unit);
}

/* Deallocates [offset, offset + size) of the file (a hole reads as zero);
 * 0 or -1 + errno (EOPNOTSUPP where the file system cannot). */
static int punch(int fd, size_t offset, size_t size) {
#ifdef FALLOC_FL_PUNCH_HOLE
  return fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)offset, (off_t)size);
#else
  (void)fd, (void)offset, (void)size;
  errno = EOPNOTSUPP;
  return -1;
#endif
}

void _ak_os_file_unmap(int fd, void *p, size_t offset, size_t size) {
  int saved = errno;
  _ak_os_free(p, size);
  (void)punch(fd, offset, size);
  errno = saved;
}

int _ak_os_file_decommit(int fd, void *p, size_t offset, size_t size) {
  if (punch(fd, offset, size) == 0) return 0;
  return _ak_os_decommit(p, size); /* no holes here: at least the mapping lets go */
}

void _ak_os_file_close(int fd) {
  if (fd >= 0) close(fd);
}

/* membarrier(2) commands (linux/membarrier.h, not in every libc's headers). */
#define MB_QUERY 0
#define MB_PRIVATE_EXPEDITED (1 << 3)
#define MB_REGISTER_PRIVATE_EXPEDITED (1 << 4)

bool _ak_os_barrier_register(void) {
#ifdef SYS_membarrier
  long cmds = syscall(SYS_membarrier, MB_QUERY, 0);
  return cmds >= 0 && (cmds & MB_PRIVATE_EXPEDITED) &&
         syscall(SYS_membarrier, MB_REGISTER_PRIVATE_EXPEDITED, 0) == 0;
#else
  return false;
#endif
}

int _ak_os_barrier(void) {
#ifdef SYS_membarrier
  return syscall(SYS_membarrier, MB_PRIVATE_EXPEDITED, 0) == 0 ? 0 : -1;
#else
  errno = ENOSYS;
  return -1;
#endif
}
