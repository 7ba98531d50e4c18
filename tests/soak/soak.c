/* SPDX-License-Identifier: MIT */
/* soak.c - ak_soak: a long-running random mix of every arenakit component
 * across threads, with resident memory sampled and bounded, and every byte
 * of every allocation verified.
 *
 * Each worker slot (--threads of them) runs a deterministic random mix
 * seeded from --seed, the slot and the incarnation:
 *   - its own arenas: allocations of random size and alignment, zalloc,
 *     realloc of the newest block, marks and restores, clears, destroy and
 *     re-init with other options (caller buffer, budget, retain modes);
 *   - pools shared by all threads in the SPINLOCK, LOCKFREE and THREADS
 *     modes (one capped by max_objects, one heap-backed, one defragmented)
 *     and a per-slot AK_SYNC_NONE pool; shared-pool objects are handed to
 *     other threads for freeing through small locked inboxes;
 *   - ak_malloc, ak_calloc, ak_realloc, ak_aligned_alloc,
 *     ak_posix_memalign and ak_free with sizes from 0 bytes to 4 MiB,
 *     also freed by other threads.
 * Worker threads exit after a random lifetime and a new thread takes over
 * the slot (and frees what its predecessor allocated, into the heaps and
 * slabs the exited thread handed back).
 *
 * Every allocation is filled with a pattern derived from a unique tag and
 * checked when freed, when an arena releases it, and for every live block
 * at the end. A sampler thread reads /proc/self/statm every 100 ms and
 * fails the run if resident memory exceeds
 *   baseline + factor * (peak live bytes so far) + slack
 * (or --rss-limit-mb). At the end everything is freed, pools are trimmed
 * (and must report 0 live objects) and destroyed, arenas destroyed,
 * ak_collect(true) called, and resident memory must return near the
 * baseline. Exit status 0 only when every check passed; each failure
 * prints a line starting with "ak_soak: FAIL".
 *
 * Usage: ak_soak [--seconds N] [--threads T] [--seed S] [--rss-limit-mb M]
 *                [--verbose] [--inject corrupt|leak]
 * (--inject plants a bug of the kind the soak must catch; tests/soak
 * registers those runs as tests that pass only when the soak fails.)
 */
#define _GNU_SOURCE
#include <arenakit/arenakit.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- build flavour ---------------------------------------------------------- */

#if defined(__SANITIZE_ADDRESS__)
#define SOAK_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SOAK_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define SOAK_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SOAK_TSAN 1
#endif
#endif
#ifndef SOAK_ASAN
#define SOAK_ASAN 0
#endif
#ifndef SOAK_TSAN
#define SOAK_TSAN 0
#endif

/* ---- limits of what each slot keeps live --------------------------------------- */

enum {
  MAX_SLOTS = 64,
  MAL_CAP = 2048,        /* live ak_malloc blocks per slot */
  POOL_CAP = 3000,       /* live pool objects per slot */
  INBOX_CAP = 256,       /* items waiting in a slot's inbox */
  NARENAS = 2,           /* arenas per slot */
  ARENA_RECS = 4096,     /* live blocks per arena */
  MAX_MARKS = 8,         /* nested marks per arena */
  ARENA_BUF = 16 * 1024, /* caller buffer of an arena */
};
#define MiB ((size_t)1024 * 1024)
#define MAL_BYTES_CAP (6 * MiB)   /* live ak_malloc bytes per slot */
#define ARENA_BYTES_CAP (3 * MiB) /* live bytes per arena before a clear */
#define ARENA_BUDGET (2 * MiB)    /* max_bytes of the budgeted arena variant */

/* The RSS bound: baseline + FACTOR * peak live + slack. The factor covers
 * size-class rounding, partly used slabs and pages, and memory freed but
 * not yet handed back (purge delay, retained arena chunks); the slack
 * covers per-thread caches and the pages each size class keeps. Under a
 * sanitizer the shadow is left out (see rss_bytes()), and the slack grows
 * by what the sanitizer's run time keeps for itself (thread records, stack
 * depot, the slower pace at which pages are handed back). */
#if SOAK_TSAN || SOAK_ASAN
#define RSS_FACTOR 3.0
#define RSS_SLACK_MB 64.0
#define FINAL_SLACK_MB 32.0
#else
#define RSS_FACTOR 2.0
#define RSS_SLACK_MB 32.0
#define FINAL_SLACK_MB 16.0
#endif
#define RSS_SLACK_PER_THREAD_MB 4.0

/* ---- configuration and global state --------------------------------------------- */

static struct {
  double seconds;
  int threads;
  uint64_t seed;
  double rss_limit_mb; /* 0: computed */
  bool verbose;
  const char *inject; /* self-test: "corrupt" or "leak" (the run must fail) */
} cfg = {60.0, 4, 1, 0.0, false, NULL};

static atomic_bool g_stop;
static atomic_int g_failures;
static pthread_mutex_t g_print_mu = PTHREAD_MUTEX_INITIALIZER;

static atomic_size_t g_live;      /* bytes the program holds (all components) */
static atomic_size_t g_peak_live; /* high-water mark of g_live */
static atomic_size_t g_rss_peak;  /* highest RSS sampled */
static size_t g_baseline;         /* RSS before the workers start */
static double g_worst_ratio;      /* sampler: max (rss - baseline) / bound room */
static size_t g_limit_at_peak;    /* the bound when the peak RSS was sampled */
static atomic_uint_fast64_t g_next_uid;
static atomic_bool g_injected; /* --inject corrupt: done */

typedef struct counters {
  uint64_t malloc_ops, pool_ops, arena_ops, remote_frees, verified, pool_capped, arena_budget;
} counters;
static pthread_mutex_t g_count_mu = PTHREAD_MUTEX_INITIALIZER;
static counters g_count;
static uint64_t g_incarnations;

/* Prints a failure and stops the run. */
static void fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  pthread_mutex_lock(&g_print_mu);
  fputs("ak_soak: FAIL: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  fflush(stderr);
  pthread_mutex_unlock(&g_print_mu);
  va_end(ap);
  atomic_fetch_add(&g_failures, 1);
  atomic_store(&g_stop, true);
}

static void note(const char *fmt, ...) {
  if (!cfg.verbose) return;
  va_list ap;
  va_start(ap, fmt);
  pthread_mutex_lock(&g_print_mu);
  fputs("ak_soak: ", stdout);
  vfprintf(stdout, fmt, ap);
  fputc('\n', stdout);
  fflush(stdout);
  pthread_mutex_unlock(&g_print_mu);
  va_end(ap);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* Resident bytes of the process (/proc/self/statm, second field). */
static size_t statm_rss(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long size = 0, resident = 0;
  int n = fscanf(f, "%lu %lu", &size, &resident);
  fclose(f);
  if (n != 2) return 0;
  return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

#if SOAK_ASAN || SOAK_TSAN
/* Under a sanitizer, the shadow of every address range the program ever
 * touched stays resident after the range is unmapped (ASan: 1/8 of it,
 * TSan: several times it), so statm grows with the address space the
 * allocator has cycled through, not with what it holds. The bound then
 * applies to the program's own mappings: /proc/self/smaps without the
 * sanitizers' shadow, which on x86-64 lies in mappings of a terabyte or
 * more, or between 2 GiB and 0x550000000000 (below PIE binaries, the
 * sanitizer heaps, libraries and mmap). */
#define SHADOW_MIN_MAPPING ((uint64_t)1 << 40)
#define SHADOW_LO UINT64_C(0x7fff8000)
#define SHADOW_HI UINT64_C(0x550000000000)
static atomic_size_t g_shadow_rss; /* last shadow RSS seen (sampler thread / main after join) */
static size_t rss_bytes(void) {
  FILE *f = fopen("/proc/self/smaps", "r");
  if (!f) return statm_rss();
  char line[512];
  size_t app = 0, shadow = 0;
  bool is_shadow = false;
  while (fgets(line, sizeof line, f)) {
    uint64_t lo, hi;
    unsigned long kb;
    if (sscanf(line, "%" SCNx64 "-%" SCNx64 " ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
      is_shadow = hi - lo >= SHADOW_MIN_MAPPING || (lo >= SHADOW_LO && hi <= SHADOW_HI);
    } else if (sscanf(line, "Rss: %lu kB", &kb) == 1) {
      if (is_shadow)
        shadow += (size_t)kb * 1024;
      else
        app += (size_t)kb * 1024;
    }
  }
  fclose(f);
  atomic_store(&g_shadow_rss, shadow);
  return app;
}
#define RSS_SOURCE "/proc/self/smaps without sanitizer shadow"
#else
static size_t rss_bytes(void) { return statm_rss(); }
#define RSS_SOURCE "/proc/self/statm"
#endif

static double mib(size_t b) { return (double)b / (double)MiB; }

static void live_add(size_t n) {
  size_t v = atomic_fetch_add(&g_live, n) + n;
  size_t p = atomic_load(&g_peak_live);
  while (v > p && !atomic_compare_exchange_weak(&g_peak_live, &p, v)) {
  }
}
static void live_sub(size_t n) { atomic_fetch_sub(&g_live, n); }

/* The computed RSS bound for a given peak of live bytes. */
static size_t rss_bound(size_t peak_live) {
  if (cfg.rss_limit_mb > 0) return (size_t)(cfg.rss_limit_mb * (double)MiB);
  double slack = (RSS_SLACK_MB + RSS_SLACK_PER_THREAD_MB * cfg.threads) * (double)MiB;
  return g_baseline + (size_t)(RSS_FACTOR * (double)peak_live + slack);
}

/* ---- random numbers (splitmix64, one state per thread) ---------------------------- */

typedef struct rng {
  uint64_t s;
} rng;

static uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  return z ^ (z >> 31);
}
static uint64_t rnd(rng *r) { return mix64(r->s += UINT64_C(0x9e3779b97f4a7c15)); }
static size_t below(rng *r, size_t n) { return n ? (size_t)(rnd(r) % n) : 0; }
static size_t between(rng *r, size_t lo, size_t hi) { return lo + below(r, hi - lo + 1); }
static bool chance(rng *r, unsigned percent) { return below(r, 100) < percent; }

/* ---- the content pattern ------------------------------------------------------------- */

#define PATTERN_STEP UINT64_C(0x9e3779b97f4a7c15)

/* Word i of a block with tag t holds mix64(t) + i * step; byte o of the block
 * is byte o % 8 of word o / 8 as stored, so a prefix of a block checks
 * against the same tag (realloc). */
static void fill_range(void *p, size_t from, size_t to, uint64_t tag) {
  unsigned char *b = p;
  size_t i = from & ~(size_t)7;
  uint64_t w = mix64(tag) + (uint64_t)(i / 8) * PATTERN_STEP;
  if (i < from) { /* the partial first word */
    unsigned char e[8];
    memcpy(e, &w, 8);
    for (size_t j = from - i; j < 8 && i + j < to; j++) b[i + j] = e[j];
    i += 8;
    w += PATTERN_STEP;
  }
  for (; i + 8 <= to; i += 8, w += PATTERN_STEP) memcpy(b + i, &w, 8);
  if (i < to) memcpy(b + i, &w, to - i);
}

static void fill(void *p, size_t n, uint64_t tag) { fill_range(p, 0, n, tag); }

/* Returns n if [p, p + n) holds the pattern of `tag`, else the offset of the
 * first wrong byte (its expected and found values in *want and *got). */
static size_t check(const void *p, size_t n, uint64_t tag, unsigned *want, unsigned *got) {
  const unsigned char *b = p;
  uint64_t w = mix64(tag);
  size_t i = 0;
  for (; i + 8 <= n; i += 8, w += PATTERN_STEP) {
    uint64_t v;
    memcpy(&v, b + i, 8);
    if (v != w) break;
  }
  if (i >= n) return n;
  unsigned char e[8];
  memcpy(e, &w, 8);
  for (size_t j = 0; j < 8 && i + j < n; j++)
    if (b[i + j] != e[j]) {
      *want = e[j];
      *got = b[i + j];
      return i + j;
    }
  return n;
}

static size_t first_nonzero(const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    if (b[i]) return i;
  return n;
}

/* ---- items: live malloc blocks and pool objects ------------------------------------ */

enum { K_MALLOC = 0, K_POOL = 1 };

typedef struct item {
  void *p;
  size_t size;
  uint64_t tag;
  int16_t pool; /* K_POOL: index into g_pools, or -1 for the slot's NONE pool */
  uint8_t kind;
  uint8_t origin; /* slot that allocated it (for messages) */
} item;

/* ---- the shared pools ------------------------------------------------------------------ */

typedef struct pool_def {
  const char *name;
  ak_sync sync;
  size_t size;
  size_t max_objects;
  ak_backing backing;
  bool defragment;
  size_t spare;
} pool_def;

static const pool_def g_pool_defs[] = {
    {"spin24", AK_SYNC_SPINLOCK, 24, 0, AK_BACKING_MMAP, false, 0},
    {"spin136-defrag", AK_SYNC_SPINLOCK, 136, 0, AK_BACKING_MMAP, true, 0},
    {"lockfree16", AK_SYNC_LOCKFREE, 16, 0, AK_BACKING_MMAP, false, 0},
    {"lockfree200", AK_SYNC_LOCKFREE, 200, 0, AK_BACKING_MMAP, false, 0},
    {"threads48", AK_SYNC_THREADS, 48, 0, AK_BACKING_MMAP, false, 0},
    {"threads1000-capped", AK_SYNC_THREADS, 1000, 600, AK_BACKING_MMAP, false, 0},
    {"threads64-heap-spare", AK_SYNC_THREADS, 64, 0, AK_BACKING_HEAP, false, 2},
};
enum { NPOOLS = sizeof g_pool_defs / sizeof g_pool_defs[0] };
static ak_pool *g_pools[NPOOLS];

static size_t natural_align(size_t size) {
  size_t a = size & (~size + 1);
  return a > 16 ? 16 : a;
}

/* ---- per-slot state (survives the slot's threads) ---------------------------------------- */

typedef struct arena_rec {
  void *p;
  size_t size;
  uint64_t tag;
} arena_rec;

typedef struct soak_arena {
  ak_arena a;
  int variant; /* -1: not initialised */
  size_t budget;
  arena_rec *recs;
  size_t n, bytes;
  struct {
    ak_arena_mark m;
    size_t n, bytes;
  } marks[MAX_MARKS];
  size_t nmarks;
  unsigned char *buf; /* caller buffer for the buffer variant */
} soak_arena;

typedef struct inbox {
  pthread_mutex_t mu;
  item q[INBOX_CAP];
  size_t n;
} inbox;

typedef struct slot {
  int id;
  pthread_t th;
  atomic_int state; /* 0 idle, 1 running, 2 finished (join me) */
  unsigned incarnation;
  item *mal;
  size_t nmal, mal_bytes;
  item *pl;
  size_t npl;
  ak_pool *none_pool;
  size_t none_size;
  soak_arena ar[NARENAS];
  inbox box;
  /* thread-local while running */
  rng r;
  uint64_t uid, tagn;
  counters c;
} slot;

static slot *g_slots;

static uint64_t new_tag(slot *s) { return (s->uid << 32) | ++s->tagn; }

static const char *item_kind(const item *it) {
  return it->kind == K_MALLOC ? "ak_malloc block" : "pool object";
}

static const char *item_pool_name(const slot *s, const item *it) {
  if (it->kind != K_POOL) return "ak_malloc";
  return it->pool < 0 ? (s ? ak_pool_name(s->none_pool) : "none") : g_pool_defs[it->pool].name;
}

/* Verifies an item's contents; false (and a failure) if wrong. */
static bool verify_item(slot *s, const item *it, const char *when) {
  unsigned want = 0, got = 0;
  size_t off = check(it->p, it->size, it->tag, &want, &got);
  if (s) s->c.verified += it->size;
  if (off != it->size) {
    fail("%s %p (size %zu, pool %s, tag %016" PRIx64
         ", allocated by slot %u) corrupted %s: byte %zu is 0x%02x, "
         "expected 0x%02x",
         item_kind(it), it->p, it->size, item_pool_name(s, it), it->tag, it->origin, when, off, got, want);
    return false;
  }
  return true;
}

/* Releases an item (verified first) with the right call; `s` is the calling
 * slot (NULL: the main thread at the end). */
static void release_item(slot *s, item *it, ak_pool *none_pool, const char *when) {
  verify_item(s, it, when);
  if (it->kind == K_MALLOC) {
    ak_free(it->p);
  } else {
    ak_pool_free(it->pool < 0 ? none_pool : g_pools[it->pool], it->p);
  }
  live_sub(it->size);
}

/* Hands an item to another slot's inbox; false if every tried inbox is full. */
static bool send_item(slot *s, const item *it) {
  if (cfg.threads < 2) return false;
  for (int tries = 0; tries < 2; tries++) {
    int t = (int)below(&s->r, (size_t)cfg.threads - 1);
    if (t >= s->id) t++;
    inbox *b = &g_slots[t].box;
    pthread_mutex_lock(&b->mu);
    bool ok = b->n < INBOX_CAP;
    if (ok) b->q[b->n++] = *it;
    pthread_mutex_unlock(&b->mu);
    if (ok) {
      s->c.remote_frees++;
      return true;
    }
  }
  return false;
}

/* Frees what other threads sent to this slot. */
static void drain_inbox(slot *s) {
  item local[INBOX_CAP];
  pthread_mutex_lock(&s->box.mu);
  size_t n = s->box.n;
  memcpy(local, s->box.q, n * sizeof(item));
  s->box.n = 0;
  pthread_mutex_unlock(&s->box.mu);
  for (size_t i = 0; i < n; i++) release_item(s, &local[i], NULL, "when freed by another thread");
}

/* Removes item i from an array by moving the last one into its place. */
static item take(item *v, size_t *n, size_t i) {
  item it = v[i];
  v[i] = v[--*n];
  return it;
}

/* ---- ak_malloc & co. --------------------------------------------------------------------------- */

/* A size between lo and hi, log-uniform (as many 100-byte as 100-KiB
 * blocks), so large blocks appear without dominating the run time. */
static size_t log_between(rng *r, size_t lo, size_t hi) {
  unsigned a = 0, b = 0;
  while (((size_t)2 << a) <= lo) a++;
  while (((size_t)1 << b) < hi) b++;
  size_t base = (size_t)1 << between(r, a, b);
  size_t n = base + below(r, base);
  return n < lo ? lo : n > hi ? hi : n;
}

/* Mostly small blocks, as real programs allocate: every new page costs a
 * page fault, and faults, not the allocator, would set the pace. The rare
 * large ones (own mappings above 512 KiB) still come by the hundred a
 * minute, and realloc grows blocks across the size classes. */
static size_t malloc_size(rng *r) {
  size_t k = below(r, 10000);
  if (k < 100) return 0;
  if (k < 7000) return between(r, 1, 128);
  if (k < 9960) return log_between(r, 129, 8192);
  if (k < 9998) return log_between(r, 8193, 512 * 1024);
  return log_between(r, 512 * 1024 + 1, 4 * MiB);
}

static size_t pow2(rng *r, unsigned lo_log, unsigned hi_log) {
  return (size_t)1 << between(r, lo_log, hi_log);
}

static bool check_block(const void *p, size_t n, size_t align, const char *call) {
  if ((uintptr_t)p & (align - 1)) {
    fail("%s(%zu): %p is not aligned to %zu", call, n, p, align);
    return false;
  }
  if (n && ak_usable_size(p) < n) {
    fail("%s(%zu): ak_usable_size(%p) = %zu is smaller than requested", call, n, p, ak_usable_size(p));
    return false;
  }
  return true;
}

static void malloc_alloc(slot *s) {
  rng *r = &s->r;
  size_t n = malloc_size(r);
  size_t align = n > 8 ? 16 : 8;
  void *p = NULL;
  const char *call;
  size_t k = below(r, 100);
  if (k < 55) {
    call = "ak_malloc";
    p = ak_malloc(n);
  } else if (k < 75) {
    call = "ak_calloc";
    size_t esz = between(r, 1, 64), cnt = n / esz + 1;
    n = cnt * esz;
    align = n > 8 ? 16 : 8;
    p = ak_calloc(cnt, esz);
    if (p && first_nonzero(p, n) != n) {
      fail("ak_calloc(%zu, %zu) = %p: byte %zu is not zero", cnt, esz, p, first_nonzero(p, n));
      ak_free(p);
      return;
    }
  } else if (k < 90) {
    call = "ak_aligned_alloc";
    align = chance(r, 2) ? pow2(r, 17, 22) : pow2(r, 0, 16);
    p = ak_aligned_alloc(align, n);
  } else {
    call = "ak_posix_memalign";
    align = pow2(r, 3, 13);
    int rc = ak_posix_memalign(&p, align, n);
    if (rc != 0) {
      fail("ak_posix_memalign(%zu, %zu) returned %d", align, n, rc);
      return;
    }
  }
  s->c.malloc_ops++;
  if (!p) {
    fail("%s(%zu) returned NULL (errno %d: %s)", call, n, errno, ak_last_error());
    return;
  }
  if (!check_block(p, n, align, call)) return;
  live_add(n);
  item it = {p, n, new_tag(s), 0, K_MALLOC, (uint8_t)s->id};
  fill(p, n, it.tag);
  s->mal[s->nmal++] = it;
  s->mal_bytes += n;
}

static void malloc_free(slot *s) {
  item it = take(s->mal, &s->nmal, below(&s->r, s->nmal));
  s->mal_bytes -= it.size;
  s->c.malloc_ops++;
  if (chance(&s->r, 30) && verify_item(s, &it, "before being sent to another thread") && send_item(s, &it))
    return;
  if (chance(&s->r, 3)) { /* realloc(p, 0) frees (glibc semantics) */
    verify_item(s, &it, "when freed");
    if (ak_realloc(it.p, 0) != NULL) fail("ak_realloc(%p, 0) did not free and return NULL", it.p);
    live_sub(it.size);
    return;
  }
  release_item(s, &it, NULL, "when freed");
}

static void malloc_realloc(slot *s) {
  rng *r = &s->r;
  item *it = &s->mal[below(r, s->nmal)];
  /* Shrink, grow a little (as a growing buffer does) or take a new size;
   * the kept prefix must survive, and the new tail gets the same pattern. */
  size_t k = below(r, 100), n;
  if (k < 40)
    n = between(r, it->size / 2, it->size);
  else if (k < 85)
    n = it->size + between(r, 1, it->size / 4 < 4096 ? it->size / 4 + 16 : 4096);
  else
    n = malloc_size(r);
  if (n == 0) n = 1;
  s->c.malloc_ops++;
  void *q = ak_realloc(it->p, n);
  if (!q) {
    fail("ak_realloc(%p, %zu -> %zu) returned NULL (errno %d: %s)", it->p, it->size, n, errno,
         ak_last_error());
    return;
  }
  if (!check_block(q, n, n > 8 ? 16 : 8, "ak_realloc")) return;
  item old = *it;
  old.p = q;
  old.size = n < it->size ? n : it->size;
  verify_item(s, &old, "after ak_realloc (the kept prefix)");
  live_add(n);
  live_sub(it->size);
  s->mal_bytes += n;
  s->mal_bytes -= it->size;
  if (n > it->size) fill_range(q, it->size, n, it->tag);
  it->p = q;
  it->size = n;
}

static void malloc_op(slot *s) {
  size_t k = below(&s->r, 100);
  bool full = s->nmal >= MAL_CAP || s->mal_bytes >= MAL_BYTES_CAP;
  if (s->nmal && (full || k < 35))
    malloc_free(s);
  else if (s->nmal && k < 50)
    malloc_realloc(s);
  else
    malloc_alloc(s);
}

/* ---- pools ----------------------------------------------------------------------------------------- */

static void none_pool_create(slot *s) {
  static const size_t sizes[] = {8, 32, 96, 512, 4000};
  ak_pool_options o;
  memset(&o, 0, sizeof o);
  o.object_size = sizes[below(&s->r, sizeof sizes / sizeof sizes[0])];
  o.sync = AK_SYNC_NONE;
  o.name = "none";
  o.defragment = chance(&s->r, 25);
  o.spare_slabs = chance(&s->r, 25) ? 1 : 0;
  s->none_pool = ak_pool_create(&o);
  s->none_size = o.object_size;
  if (!s->none_pool) fail("ak_pool_create(NONE, %zu) failed: %s", o.object_size, ak_last_error());
}

/* Frees (verified) every NONE-pool object of the slot and destroys the pool;
 * with `keep_live`, destroys it with the objects still allocated. */
static void none_pool_destroy(slot *s, bool keep_live) {
  for (size_t i = 0; i < s->npl;) {
    if (s->pl[i].pool >= 0) {
      i++;
      continue;
    }
    item it = take(s->pl, &s->npl, i);
    if (keep_live) {
      verify_item(s, &it, "before destroying its pool");
      live_sub(it.size);
    } else {
      release_item(s, &it, s->none_pool, "when freed");
    }
  }
  if (!keep_live) {
    ak_pool_stats st;
    ak_pool_stats_get(s->none_pool, &st);
    if (st.live != 0)
      fail("NONE pool of slot %d reports %zu live objects after all were freed", s->id, st.live);
  }
  ak_pool_destroy(s->none_pool);
  s->none_pool = NULL;
}

static void pool_alloc(slot *s) {
  rng *r = &s->r;
  int idx = chance(r, 25) ? -1 : (int)below(r, NPOOLS);
  if (idx < 0 && !s->none_pool) return;
  ak_pool *p = idx < 0 ? s->none_pool : g_pools[idx];
  size_t size = idx < 0 ? s->none_size : g_pool_defs[idx].size;
  s->c.pool_ops++;
  errno = 0;
  void *o = ak_pool_alloc(p);
  if (!o) {
    if (idx >= 0 && g_pool_defs[idx].max_objects && errno == ENOMEM) {
      s->c.pool_capped++;
      return;
    }
    fail("ak_pool_alloc(%s) returned NULL (errno %d: %s)", ak_pool_name(p), errno, ak_last_error());
    return;
  }
  if ((uintptr_t)o & (natural_align(size) - 1))
    fail("ak_pool_alloc(%s) = %p: misaligned", ak_pool_name(p), o);
  if (chance(r, 2) && !ak_pool_owns(p, o))
    fail("ak_pool_owns(%s, %p) is false for its own object", ak_pool_name(p), o);
  live_add(size);
  item it = {o, size, new_tag(s), (int16_t)idx, K_POOL, (uint8_t)s->id};
  fill(o, size, it.tag);
  s->pl[s->npl++] = it;
}

static void pool_free(slot *s) {
  item it = take(s->pl, &s->npl, below(&s->r, s->npl));
  s->c.pool_ops++;
  if (it.pool >= 0 && chance(&s->r, 30) && verify_item(s, &it, "before being sent to another thread") &&
      send_item(s, &it))
    return;
  release_item(s, &it, s->none_pool, "when freed");
}

static void pool_misc(slot *s) {
  rng *r = &s->r;
  size_t k = below(r, 100);
  ak_pool *p = g_pools[below(r, NPOOLS)];
  if (k < 40) {
    ak_pool_trim(p);
  } else if (k < 60) {
    ak_pool_stats st;
    ak_pool_stats_get(p, &st);
    if (st.version != AK_POOL_STATS_VERSION || st.bytes_resident > st.bytes_reserved + 4096)
      fail("ak_pool_stats_get(%s): inconsistent (resident %zu > reserved %zu)", ak_pool_name(p),
           st.bytes_resident, st.bytes_reserved);
  } else if (k < 70) {
    ak_pool_set_defragment(p, chance(r, 50));
  } else if (k < 80) {
    if (ak_pool_reserve(p, between(r, 1, 64)) != 0)
      fail("ak_pool_reserve(%s) failed: %s", ak_pool_name(p), ak_last_error());
  } else if (s->none_pool) {
    ak_pool_trim(s->none_pool);
  }
}

static void pool_op(slot *s) {
  size_t k = below(&s->r, 100);
  if (s->npl && (s->npl >= POOL_CAP || k < 45))
    pool_free(s);
  else if (k < 97)
    pool_alloc(s);
  else
    pool_misc(s);
}

/* ---- arenas ------------------------------------------------------------------------------------------ */

static void arena_init(slot *s, soak_arena *sa) {
  ak_arena_options o;
  memset(&o, 0, sizeof o);
  sa->variant = (int)below(&s->r, 4);
  sa->budget = 0;
  switch (sa->variant) {
    case 1: /* small chunks, dedicated chunks from 256 KiB, bounded retention */
      o.first_chunk = 4096;
      o.max_chunk = MiB;
      o.retain = AK_ARENA_RETAIN_LIMIT;
      o.retain_limit = 256 * 1024;
      break;
    case 2: /* caller buffer first, nothing retained */
      o.buffer = sa->buf;
      o.buffer_size = ARENA_BUF;
      o.retain = AK_ARENA_RETAIN_NONE;
      break;
    case 3: /* a budget: ENOMEM past it */ o.max_bytes = sa->budget = ARENA_BUDGET; break;
    default: break;
  }
  if (ak_arena_init(&sa->a, &o) != 0)
    fail("ak_arena_init(variant %d) failed: %s", sa->variant, ak_last_error());
  sa->n = sa->bytes = sa->nmarks = 0;
}

static bool verify_recs(slot *s, soak_arena *sa, size_t from, const char *when) {
  for (size_t i = from; i < sa->n; i++) {
    unsigned want = 0, got = 0;
    const arena_rec *rc = &sa->recs[i];
    size_t off = check(rc->p, rc->size, rc->tag, &want, &got);
    s->c.verified += rc->size;
    if (off != rc->size) {
      fail("arena block %p (size %zu, arena variant %d of slot %d, tag %016" PRIx64
           ") corrupted %s: byte %zu is 0x%02x, expected 0x%02x",
           rc->p, rc->size, sa->variant, s->id, rc->tag, when, off, got, want);
      return false;
    }
  }
  return true;
}

static void arena_clear(slot *s, soak_arena *sa) {
  verify_recs(s, sa, 0, "before ak_arena_clear");
  ak_arena_clear(&sa->a);
  live_sub(sa->bytes);
  sa->n = sa->bytes = sa->nmarks = 0;
}

static void arena_destroy(slot *s, soak_arena *sa) {
  verify_recs(s, sa, 0, "before ak_arena_destroy");
  ak_arena_destroy(&sa->a);
  live_sub(sa->bytes);
  sa->n = sa->bytes = sa->nmarks = 0;
  sa->variant = -1;
}

static void arena_alloc(slot *s, soak_arena *sa) {
  rng *r = &s->r;
  size_t k = below(r, 10000), n;
  if (k < 8000)
    n = between(r, 0, 256);
  else if (k < 9960)
    n = log_between(r, 257, 16384);
  else if (k < 9997)
    n = log_between(r, 16385, MiB);
  else
    n = log_between(r, MiB, 3 * MiB);
  size_t align = chance(r, 90) ? pow2(r, 0, 4) : pow2(r, 5, 16);
  bool zero = chance(r, 10);
  errno = 0;
  void *p = zero ? ak_arena_zalloc(&sa->a, n, align) : ak_arena_alloc(&sa->a, n, align);
  s->c.arena_ops++;
  if (!p) {
    if (sa->budget && errno == ENOMEM) {
      ak_arena_stats st;
      ak_arena_stats_get(&sa->a, &st);
      size_t need = ((n ? n : 1) + 7) / 8 * 8;
      if (st.used + need <= sa->budget && align <= 8)
        fail("ak_arena_alloc(%zu, %zu) refused with ENOMEM under budget (used %zu of %zu)", n, align, st.used,
             sa->budget);
      s->c.arena_budget++;
      arena_clear(s, sa);
      return;
    }
    fail("ak_arena_alloc(%zu, %zu) returned NULL (errno %d: %s)", n, align, errno, ak_last_error());
    return;
  }
  if ((uintptr_t)p & (align - 1)) fail("ak_arena_alloc(%zu, %zu) = %p: misaligned", n, align, p);
  if (zero && first_nonzero(p, n) != n)
    fail("ak_arena_zalloc(%zu) = %p: byte %zu not zero", n, p, first_nonzero(p, n));
  live_add(n);
  arena_rec rc = {p, n, new_tag(s)};
  fill(p, n, rc.tag);
  sa->recs[sa->n++] = rc;
  sa->bytes += n;
}

/* Resizes the newest block (only if no mark lies above it). */
static void arena_realloc(slot *s, soak_arena *sa) {
  if (!sa->n || (sa->nmarks && sa->marks[sa->nmarks - 1].n >= sa->n)) return;
  arena_rec *rc = &sa->recs[sa->n - 1];
  size_t n = between(&s->r, 1, rc->size * 2 + 64);
  if (n > 64 * 1024) n = 64 * 1024;
  s->c.arena_ops++;
  errno = 0;
  void *q = ak_arena_realloc(&sa->a, rc->p, rc->size, n, 8);
  if (!q) {
    if (sa->budget && errno == ENOMEM) {
      s->c.arena_budget++;
      arena_clear(s, sa);
      return;
    }
    fail("ak_arena_realloc(%p, %zu -> %zu) returned NULL: %s", rc->p, rc->size, n, ak_last_error());
    return;
  }
  unsigned want = 0, got = 0;
  size_t keep = n < rc->size ? n : rc->size;
  size_t off = check(q, keep, rc->tag, &want, &got);
  if (off != keep) fail("ak_arena_realloc(%p, %zu -> %zu) = %p lost byte %zu", rc->p, rc->size, n, q, off);
  live_add(n);
  live_sub(rc->size);
  sa->bytes += n;
  sa->bytes -= rc->size;
  if (n > rc->size) fill_range(q, rc->size, n, rc->tag);
  rc->p = q;
  rc->size = n;
}

static void arena_op(slot *s) {
  rng *r = &s->r;
  soak_arena *sa = &s->ar[below(r, NARENAS)];
  if (sa->variant < 0) arena_init(s, sa);
  size_t k = below(r, 1000);
  if (sa->n >= ARENA_RECS || sa->bytes >= ARENA_BYTES_CAP || k < 5) {
    s->c.arena_ops++;
    arena_clear(s, sa);
  } else if (k < 30) {
    if (sa->nmarks < MAX_MARKS) {
      sa->marks[sa->nmarks].m = ak_arena_save(&sa->a);
      sa->marks[sa->nmarks].n = sa->n;
      sa->marks[sa->nmarks].bytes = sa->bytes;
      sa->nmarks++;
      s->c.arena_ops++;
    }
  } else if (k < 55) {
    if (sa->nmarks) {
      sa->nmarks--;
      size_t mn = sa->marks[sa->nmarks].n;
      verify_recs(s, sa, mn, "before ak_arena_restore");
      ak_arena_restore(&sa->a, sa->marks[sa->nmarks].m);
      live_sub(sa->bytes - sa->marks[sa->nmarks].bytes);
      sa->n = mn;
      sa->bytes = sa->marks[sa->nmarks].bytes;
      s->c.arena_ops++;
    }
  } else if (k < 80) {
    arena_realloc(s, sa);
  } else if (k < 80 + (below(r, 10) == 0)) {
    s->c.arena_ops++;
    arena_destroy(s, sa);
  } else {
    arena_alloc(s, sa);
  }
}

/* ---- the worker threads ---------------------------------------------------------------------------------
 */

static void *worker(void *arg) {
  slot *s = arg;
  memset(&s->c, 0, sizeof s->c);
  s->uid = atomic_fetch_add(&g_next_uid, 1) + 1;
  s->tagn = 0;
  s->r.s = mix64(cfg.seed ^ mix64((uint64_t)s->id * 1000003u + s->incarnation));
  double lifetime = 0.2 + (double)below(&s->r, 2800) / 1000.0;
  double end = now_s() + lifetime;
  if (!s->none_pool) none_pool_create(s);
  for (uint64_t ops = 0; !atomic_load_explicit(&g_stop, memory_order_relaxed); ops++) {
    if ((ops & 255) == 0) {
      if (now_s() > end) break;
      drain_inbox(s);
    }
    /* From op 2000 on, until some thread holds a malloc block to corrupt. */
    if (ops >= 2000 && cfg.inject && !atomic_load_explicit(&g_injected, memory_order_relaxed) &&
        !strcmp(cfg.inject, "corrupt") && !atomic_exchange(&g_injected, true)) {
      bool done = false;
      for (size_t i = 0; i < s->nmal && !done; i++)
        if (s->mal[i].size) { /* a stray write, as a buggy allocator would make */
          /* Byte 0: every later path checks it (a shrinking realloc keeps at
           * least one byte; a corrupted last byte could be cut off). */
          ((unsigned char *)s->mal[i].p)[0] ^= 0x40;
          done = true;
        }
      if (!done) atomic_store(&g_injected, false); /* another thread, later */
    }
    size_t k = below(&s->r, 100);
    if (k < 35)
      malloc_op(s);
    else if (k < 70)
      pool_op(s);
    else if (k < 99)
      arena_op(s);
    else if (chance(&s->r, 5))
      ak_collect(chance(&s->r, 20));
  }
  /* Exit: hand a quarter of the live blocks to other threads, free what
   * arrived, and now and then destroy the NONE pool and the arenas (their
   * successors start afresh); the rest stays for the next thread. */
  for (size_t i = 0; i < s->nmal / 4; i++) {
    if (!send_item(s, &s->mal[s->nmal - 1])) break;
    s->mal_bytes -= s->mal[--s->nmal].size;
  }
  for (size_t i = 0, n = s->npl / 4; i < n && s->npl; i++) {
    item *it = &s->pl[s->npl - 1];
    if (it->pool < 0 || !send_item(s, it)) break;
    s->npl--;
  }
  drain_inbox(s);
  if (s->none_pool && chance(&s->r, 30)) none_pool_destroy(s, chance(&s->r, 30));
  for (int i = 0; i < NARENAS; i++)
    if (s->ar[i].variant >= 0 && chance(&s->r, 20)) arena_destroy(s, &s->ar[i]);
  pthread_mutex_lock(&g_count_mu);
  g_count.malloc_ops += s->c.malloc_ops;
  g_count.pool_ops += s->c.pool_ops;
  g_count.arena_ops += s->c.arena_ops;
  g_count.remote_frees += s->c.remote_frees;
  g_count.verified += s->c.verified;
  g_count.pool_capped += s->c.pool_capped;
  g_count.arena_budget += s->c.arena_budget;
  g_incarnations++;
  pthread_mutex_unlock(&g_count_mu);
  atomic_store(&s->state, 2);
  return NULL;
}

static void start_worker(slot *s) {
  pthread_attr_t at;
  pthread_attr_init(&at);
  pthread_attr_setstacksize(&at, 512 * 1024);
  s->incarnation++;
  atomic_store(&s->state, 1);
  int rc = pthread_create(&s->th, &at, worker, s);
  pthread_attr_destroy(&at);
  if (rc != 0) {
    atomic_store(&s->state, 0);
    fail("pthread_create: %s", strerror(rc));
  }
}

/* ---- the RSS sampler
 * ----------------------------------------------------------------------------------------- */

static atomic_bool g_sampler_stop;
static double g_watchdog; /* set before the sampler starts: past it, the run is stuck */

static void *sampler(void *arg) {
  (void)arg;
  double t0 = now_s(), next_note = t0 + 1.0;
  while (!atomic_load(&g_sampler_stop)) {
    size_t peak_live = atomic_load(&g_peak_live);
    size_t rss = rss_bytes();
    size_t bound = rss_bound(peak_live);
    if (rss > atomic_load(&g_rss_peak)) {
      atomic_store(&g_rss_peak, rss);
      g_limit_at_peak = bound;
    }
    double room = (double)bound - (double)g_baseline;
    double ratio = room > 0 ? ((double)rss - (double)g_baseline) / room : 0;
    if (ratio > g_worst_ratio) g_worst_ratio = ratio;
    if (rss > bound && atomic_load(&g_failures) == 0 && cfg.rss_limit_mb > 0) {
      fail("resident memory %.1f MiB exceeds --rss-limit-mb %.0f (live now %.1f MiB, peak live %.1f MiB)",
           mib(rss), cfg.rss_limit_mb, mib(atomic_load(&g_live)), mib(peak_live));
    } else if (rss > bound && atomic_load(&g_failures) == 0) {
      fail(
          "resident memory %.1f MiB exceeds the bound %.1f MiB (baseline %.1f MiB + %.1f x peak live %.1f "
          "MiB + "
          "slack; live now %.1f MiB)",
          mib(rss), mib(bound), mib(g_baseline), RSS_FACTOR, mib(peak_live), mib(atomic_load(&g_live)));
    }
    if (now_s() > g_watchdog) {
      fail("the run did not finish %.0f s after its end: a thread is stuck (deadlock or livelock?); aborting",
           g_watchdog - t0 - cfg.seconds);
      abort();
    }
    if (now_s() >= next_note) {
      next_note += 1.0;
      note("t=%.0fs live %.1f MiB (peak %.1f), rss %.1f MiB (bound %.1f)", now_s() - t0,
           mib(atomic_load(&g_live)), mib(peak_live), mib(rss), mib(bound));
    }
    sleep_ms(100);
  }
  return NULL;
}

/* ---- the end: verify and free everything
 * ----------------------------------------------------------------------- */

static void final_cleanup(void) {
  for (int i = 0; i < cfg.threads; i++) {
    slot *s = &g_slots[i];
    for (size_t j = 0; j < s->box.n; j++) release_item(NULL, &s->box.q[j], NULL, "at the end (in an inbox)");
    s->box.n = 0;
  }
  for (int i = 0; i < cfg.threads; i++) {
    slot *s = &g_slots[i];
    memset(&s->c, 0, sizeof s->c);
    for (size_t j = 0; j < s->nmal; j++) release_item(s, &s->mal[j], NULL, "at the end");
    s->nmal = s->mal_bytes = 0;
    for (size_t j = 0; j < s->npl; j++)
      if (s->pl[j].pool >= 0 && cfg.inject && !strcmp(cfg.inject, "leak") &&
          !atomic_exchange(&g_injected, true))
        continue; /* self-test: one shared-pool object is never freed */
      else
        release_item(s, &s->pl[j], s->none_pool, "at the end");
    s->npl = 0;
    if (s->none_pool) none_pool_destroy(s, false);
    for (int a = 0; a < NARENAS; a++)
      if (s->ar[a].variant >= 0) arena_destroy(s, &s->ar[a]);
    g_count.verified += s->c.verified;
  }
  for (int i = 0; i < NPOOLS; i++) {
    ak_pool_trim(g_pools[i]);
    ak_pool_stats st;
    ak_pool_stats_get(g_pools[i], &st);
    if (st.live != 0)
      fail("pool %s reports %zu live objects after every object was freed", g_pool_defs[i].name, st.live);
    if (cfg.verbose) ak_pool_stats_print(g_pools[i], stdout);
    ak_pool_destroy(g_pools[i]);
    g_pools[i] = NULL;
  }
  if (atomic_load(&g_live) != 0) fail("internal: %zu live bytes left in the books", atomic_load(&g_live));
}

/* ---- main
 * ------------------------------------------------------------------------------------------------------ */

static void usage(const char *argv0) {
  fprintf(
      stderr,
      "usage: %s [--seconds N] [--threads T] [--seed S] [--rss-limit-mb M] [--verbose] [--inject BUG]\n"
      "  --seconds N       run time (default 60)\n"
      "  --threads T       worker threads, 1..%d (default 4)\n"
      "  --seed S          random seed (default 1)\n"
      "  --rss-limit-mb M  fixed bound on resident memory (default: baseline + %.0f x peak live + slack)\n"
      "  --verbose         progress every second and pool statistics\n",
      argv0, MAX_SLOTS, RSS_FACTOR);
}

static bool parse_args(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    char *end = NULL;
    if (!strcmp(a, "--verbose") || !strcmp(a, "-v")) {
      cfg.verbose = true;
      continue;
    }
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) return false;
    if (i + 1 >= argc) return false;
    const char *v = argv[++i];
    errno = 0;
    if (!strcmp(a, "--seconds")) {
      cfg.seconds = strtod(v, &end);
      if (cfg.seconds <= 0) return false;
    } else if (!strcmp(a, "--threads")) {
      long t = strtol(v, &end, 10);
      if (t < 1 || t > MAX_SLOTS) return false;
      cfg.threads = (int)t;
    } else if (!strcmp(a, "--seed")) {
      cfg.seed = strtoull(v, &end, 0);
    } else if (!strcmp(a, "--inject")) {
      cfg.inject = v;
      if (strcmp(v, "corrupt") && strcmp(v, "leak")) return false;
      end = (char *)v + strlen(v);
    } else if (!strcmp(a, "--rss-limit-mb")) {
      cfg.rss_limit_mb = strtod(v, &end);
      if (cfg.rss_limit_mb <= 0) return false;
    } else {
      return false;
    }
    if (errno || !end || *end) return false;
  }
  return true;
}

int main(int argc, char **argv) {
  if (!parse_args(argc, argv)) {
    usage(argv[0]);
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  /* Everything the program itself needs is allocated and touched before
   * the baseline is taken. */
  g_slots = calloc((size_t)cfg.threads, sizeof(slot));
  if (!g_slots) return 2;
  for (int i = 0; i < cfg.threads; i++) {
    slot *s = &g_slots[i];
    s->id = i;
    s->mal = calloc(MAL_CAP, sizeof(item));
    s->pl = calloc(POOL_CAP, sizeof(item));
    pthread_mutex_init(&s->box.mu, NULL);
    for (int a = 0; a < NARENAS; a++) {
      s->ar[a].recs = calloc(ARENA_RECS, sizeof(arena_rec));
      s->ar[a].buf = calloc(1, ARENA_BUF);
      s->ar[a].variant = -1;
      if (!s->ar[a].recs || !s->ar[a].buf) return 2;
    }
    if (!s->mal || !s->pl) return 2;
  }
  for (int i = 0; i < NPOOLS; i++) {
    const pool_def *d = &g_pool_defs[i];
    ak_pool_options o;
    memset(&o, 0, sizeof o);
    o.object_size = d->size;
    o.sync = d->sync;
    o.max_objects = d->max_objects;
    o.backing = d->backing;
    o.defragment = d->defragment;
    o.spare_slabs = d->spare;
    o.name = d->name;
    g_pools[i] = ak_pool_create(&o);
    if (!g_pools[i]) {
      fprintf(stderr, "ak_soak: FAIL: ak_pool_create(%s): %s\n", d->name, ak_last_error());
      return 1;
    }
  }
  g_baseline = rss_bytes();
  if (!g_baseline) {
    fprintf(stderr, "ak_soak: FAIL: cannot read /proc/self/statm\n");
    return 1;
  }
  atomic_store(&g_rss_peak, g_baseline);
  printf("ak_soak: %.0f s, %d threads (%ld cores), seed %" PRIu64 ", baseline RSS %.1f MiB, bound %s\n",
         cfg.seconds, cfg.threads, sysconf(_SC_NPROCESSORS_ONLN), cfg.seed, mib(g_baseline),
         cfg.rss_limit_mb > 0 ? "fixed (--rss-limit-mb)" : "baseline + factor x peak live + slack");

  pthread_t samp;
  double t0 = now_s(), end = t0 + cfg.seconds;
  /* Joining the workers and the final checks take seconds at most. */
  g_watchdog = end + 60.0 + cfg.seconds / 10.0;
  if (pthread_create(&samp, NULL, sampler, NULL) != 0) return 2;
  for (int i = 0; i < cfg.threads; i++) start_worker(&g_slots[i]);
  while (!atomic_load(&g_stop)) {
    sleep_ms(20);
    bool over = now_s() >= end;
    if (over) atomic_store(&g_stop, true);
    for (int i = 0; i < cfg.threads; i++) {
      slot *s = &g_slots[i];
      if (atomic_load(&s->state) == 2) {
        pthread_join(s->th, NULL);
        atomic_store(&s->state, 0);
        if (!over && !atomic_load(&g_stop)) start_worker(s);
      }
    }
  }
  for (int i = 0; i < cfg.threads; i++) {
    slot *s = &g_slots[i];
    if (atomic_load(&s->state) != 0) {
      pthread_join(s->th, NULL);
      atomic_store(&s->state, 0);
    }
  }
  double elapsed = now_s() - t0;
  size_t rss_end_of_run = rss_bytes();

  final_cleanup();
  ak_collect(true);
  atomic_store(&g_sampler_stop, true);
  pthread_join(samp, NULL);
  /* Memory goes back at once (pools, arenas) or at ak_collect(true) (the
   * heap); allow a few retries for what other threads' frees left behind. */
  size_t final_rss = rss_bytes();
  size_t final_bound = g_baseline + (size_t)(FINAL_SLACK_MB * (double)MiB);
  for (int i = 0; i < 10 && final_rss > final_bound; i++) {
    sleep_ms(50);
    ak_collect(true);
    final_rss = rss_bytes();
  }
  if (final_rss > final_bound)
    fail("resident memory after freeing everything is %.1f MiB, more than baseline %.1f MiB + %.0f MiB",
         mib(final_rss), mib(g_baseline), FINAL_SLACK_MB);

  uint64_t total = g_count.malloc_ops + g_count.pool_ops + g_count.arena_ops;
  printf("ak_soak: %.1f s, %" PRIu64 " thread lifetimes, %" PRIu64 " ops (%.2f M/s): malloc %" PRIu64
         ", pool %" PRIu64 ", arena %" PRIu64 "; %" PRIu64 " cross-thread frees, %" PRIu64
         " pool-cap refusals, %" PRIu64 " arena-budget refusals; %.1f GiB verified\n",
         elapsed, g_incarnations, total, (double)total / elapsed / 1e6, g_count.malloc_ops, g_count.pool_ops,
         g_count.arena_ops, g_count.remote_frees, g_count.pool_capped, g_count.arena_budget,
         (double)g_count.verified / (1024.0 * MiB));
  printf(
      "ak_soak: peak live %.1f MiB, peak RSS %.1f MiB (bound then %.1f MiB; worst use of the bound %.0f%%), "
      "RSS at end of run %.1f MiB, final RSS %.1f MiB (baseline %.1f, allowed %.1f)\n",
      mib(atomic_load(&g_peak_live)), mib(atomic_load(&g_rss_peak)), mib(g_limit_at_peak),
      g_worst_ratio * 100.0, mib(rss_end_of_run), mib(final_rss), mib(g_baseline), mib(final_bound));
#if SOAK_ASAN || SOAK_TSAN
  printf("ak_soak: RSS read from %s; sanitizer shadow resident at the end: %.1f MiB (not bounded)\n",
         RSS_SOURCE, mib(atomic_load(&g_shadow_rss)));
#endif
  int failures = atomic_load(&g_failures);
  /* One line for scripts (tests/soak/run.sh). */
  printf("ak_soak: summary: %s, %.0f s, %d threads, seed %" PRIu64 ", %" PRIu64 " ops (malloc %" PRIu64
         ", pool %" PRIu64 ", arena %" PRIu64
         "), peak live %.1f MiB, peak RSS %.1f MiB (bound %.1f MiB), "
         "final RSS %.1f MiB (baseline %.1f MiB)\n",
         failures ? "FAIL" : "PASS", elapsed, cfg.threads, cfg.seed, total, g_count.malloc_ops,
         g_count.pool_ops, g_count.arena_ops, mib(atomic_load(&g_peak_live)), mib(atomic_load(&g_rss_peak)),
         mib(g_limit_at_peak), mib(final_rss), mib(g_baseline));
  if (failures) {
    printf("ak_soak: FAILED (%d check%s failed, seed %" PRIu64 ")\n", failures, failures == 1 ? "" : "s",
           cfg.seed);
    return 1;
  }
  printf("ak_soak: PASS\n");
  return 0;
}
