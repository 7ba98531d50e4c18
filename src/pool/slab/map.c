/* SPDX-License-Identifier: MIT */
/* map.c - a pool's slab table (slab/map.h): the set of its slab
 * addresses, read by ak_pool_owns and the checked build's frees (a foreign
 * pointer is looked up here, never dereferenced), and the slab counters;
 * and the process-wide slab map behind it.
 *
 * The table is split into AK_TABLE_SHARDS shards by a hash of the slab's
 * address, each a sorted array under its own word lock on its own cache
 * line. Threads that obtain and release slabs at once (AK_SYNC_THREADS
 * with release_empty gives every empty slab back at once) mostly meet
 * different shards, so the line of one lock, its array and its counters
 * does not move between cores on every slab. The hash drops the address's
 * low 16 bits, so the small slabs of one thread's C-heap arena share a few
 * shards and those of another thread's arena others. */
#include <stdlib.h>
#include <string.h>

#include "common/assert.h"
#include "common/wordlock.h"
#include "os/os_mem.h"
#include "pool/slab/map.h"

/* ---- the slab map: every pool's slab addresses, read without a lock ------ */

/* One bit per 4 KiB granule of the address space, set while a slab of some
 * pool starts there (slabs are at least a page and aligned to their size,
 * so a slab start is always a granule start). Two levels, as mimalloc's
 * segment map: a leaf covers 1 GiB (32 KiB of bits, allocated on first use
 * and kept), the root holds a leaf per GiB of the address space the map
 * covers (48 bits on 64-bit targets). Readers load two words, no lock: the
 * free paths of the checked and hardened builds ask it before they read any
 * slab header, so a pointer the library does not own is never
 * dereferenced. A slab above the covered range is found in its pool's
 * table instead (_ak_table_known). */
#define MAP_GRAN_BITS AK_POOL_MAP_GRAN_BITS
#define MAP_LEAF_BITS AK_POOL_MAP_LEAF_BITS
#define MAP_ROOT ((size_t)1 << (AK_POOL_MAP_ADDR_BITS - MAP_GRAN_BITS - MAP_LEAF_BITS))
#define MAP_LEAF_WORDS (((size_t)1 << MAP_LEAF_BITS) / 64)

/* Public (arenakit/pool.h): the hardened inline frees read it too. Leaves
 * and words are accessed with __atomic builtins, as there. */
uint64_t *_ak_pool_slab_map[MAP_ROOT];

static bool map_covers(uintptr_t x) { return (x >> MAP_GRAN_BITS >> MAP_LEAF_BITS) < MAP_ROOT; }

/* Sets (or clears) the bit of slab address `x`; -1 if out of memory for a
 * leaf. Addresses beyond the map are left to the pool's table. */
static int map_set(uintptr_t x, bool on) {
  if (!map_covers(x)) return 0;
  size_t g = x >> MAP_GRAN_BITS;
  uint64_t **root = &_ak_pool_slab_map[g >> MAP_LEAF_BITS];
  uint64_t *leaf = __atomic_load_n(root, __ATOMIC_ACQUIRE);
  if (!leaf) {
    if (!on) return 0;
    uint64_t *fresh = calloc(MAP_LEAF_WORDS, sizeof *fresh);
    if (!fresh) return -1;
    if (__atomic_compare_exchange_n(root, &leaf, fresh, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
      leaf = fresh;
    else
      free(fresh); /* another thread installed one: `leaf` is it */
  }
  size_t i = g & (((size_t)1 << MAP_LEAF_BITS) - 1);
  AK_ASSERT((x & (((uintptr_t)1 << MAP_GRAN_BITS) - 1)) == 0 && i / 64 < MAP_LEAF_WORDS); /* a granule */
  uint64_t bit = (uint64_t)1 << (i % 64);
  uint64_t was = on ? __atomic_fetch_or(&leaf[i / 64], bit, __ATOMIC_RELEASE)
                    : __atomic_fetch_and(&leaf[i / 64], ~bit, __ATOMIC_RELEASE);
  AK_ASSERT(!(was & bit) == on); /* one live slab per granule: set once, cleared once */
  (void)was;
  return 0;
}

bool _ak_table_known(_ak_slab_table *t, uintptr_t x) {
  if (!map_covers(x)) return _ak_table_has(t, x);
  return _ak_pool_known_slab(x);
}

static _ak_table_shard *shard_of(_ak_slab_table *t, uintptr_t x) {
  uint64_t h = (uint64_t)(x >> 16) * UINT64_C(0x9E3779B97F4A7C15);
  return &t->shard[h >> (64 - AK_TABLE_SHARD_BITS)];
}

/* First index whose address is >= x (binary search of the sorted array). */
static size_t find(const _ak_table_shard *s, uintptr_t x) {
  size_t lo = 0, hi = s->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (s->a[mid] < x)
      lo = mid + 1;
    else
      hi = mid;
  }
  AK_ASSERT(lo <= s->n && (lo == s->n || s->a[lo] >= x) && (lo == 0 || s->a[lo - 1] < x));
  return lo;
}

int _ak_table_add(_ak_slab_table *t, uintptr_t x) {
  if (map_set(x, true) != 0) return -1;
  _ak_table_shard *s = shard_of(t, x);
  _ak_word_lock(&s->mu);
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 8;
    uintptr_t *a = realloc(s->a, cap * sizeof *a);
    if (!a) {
      _ak_word_unlock(&s->mu);
      (void)map_set(x, false);
      return -1;
    }
    s->a = a;
    s->cap = cap;
  }
  size_t i = find(s, x);
  AK_ASSERT(i == s->n || s->a[i] != x); /* a slab address is added once */
  memmove(s->a + i + 1, s->a + i, (s->n - i) * sizeof *s->a);
  s->a[i] = x;
  __atomic_store_n(&s->n, s->n + 1, __ATOMIC_RELAXED);
  /* Sorted, without duplicates (find's binary search relies on it). */
  AK_ASSERT(s->n <= s->cap && (i == 0 || s->a[i - 1] < x) && (i + 1 == s->n || x < s->a[i + 1]));
  s->allocs++;
  bool high = s->n > s->high;
  if (high) s->high = s->n;
  _ak_word_unlock(&s->mu);
  /* The high-water mark is sampled, not kept exactly: an exact one needs a
   * count shared by all shards, and that one word, moving between cores on
   * every slab, cost as much as the rest of the table. */
  if (AK_UNLIKELY(high)) _ak_table_sample(t);
  return 0;
}

void _ak_table_sample(_ak_slab_table *t) {
  size_t n = 0;
  for (size_t k = 0; k < AK_TABLE_SHARDS; k++) n += __atomic_load_n(&t->shard[k].n, __ATOMIC_RELAXED);
  size_t peak = atomic_load_explicit(&t->peak, memory_order_relaxed);
  while (n > peak && !atomic_compare_exchange_weak_explicit(&t->peak, &peak, n, memory_order_relaxed,
                                                            memory_order_relaxed)) {
  }
}

void _ak_table_del(_ak_slab_table *t, uintptr_t x) {
  _ak_table_shard *s = shard_of(t, x);
  _ak_word_lock(&s->mu);
  size_t i = find(s, x);
  if (i < s->n && s->a[i] == x) {
    AK_ASSERT(s->n > 0 && s->releases < s->allocs); /* released once, after it was added */
    memmove(s->a + i, s->a + i + 1, (s->n - i - 1) * sizeof *s->a);
    __atomic_store_n(&s->n, s->n - 1, __ATOMIC_RELAXED);
    s->releases++;
    (void)map_set(x, false);                    /* before the backing takes the memory back */
    AK_ASSERT(s->allocs - s->releases == s->n); /* every slab in the table is counted */
  }
  _ak_word_unlock(&s->mu);
}

void _ak_table_each(_ak_slab_table *t, void (*fn)(uintptr_t slab, void *ctx), void *ctx) {
  for (size_t k = 0; k < AK_TABLE_SHARDS; k++) {
    _ak_table_shard *s = &t->shard[k];
    _ak_word_lock(&s->mu);
    for (size_t i = 0; i < s->n; i++) fn(s->a[i], ctx);
    _ak_word_unlock(&s->mu);
  }
}

bool _ak_table_has(_ak_slab_table *t, uintptr_t x) {
  _ak_table_shard *s = shard_of(t, x);
  _ak_word_lock(&s->mu);
  size_t i = find(s, x);
  bool has = i < s->n && s->a[i] == x;
  _ak_word_unlock(&s->mu);
  return has;
}

void _ak_table_stats(_ak_slab_table *t, size_t slab_size, ak_pool_stats *out) {
  size_t n = 0, resident = 0, allocs = 0, releases = 0;
  for (size_t k = 0; k < AK_TABLE_SHARDS; k++) {
    _ak_table_shard *s = &t->shard[k];
    _ak_word_lock(&s->mu);
    for (size_t i = 0; i < s->n; i++) resident += _ak_os_resident((void *)s->a[i], slab_size);
    n += s->n;
    allocs += s->allocs;
    releases += s->releases;
    _ak_word_unlock(&s->mu);
  }
  _ak_table_sample(t);
  AK_ASSERT(releases <= allocs && allocs - releases == n); /* the counters agree with the table */
  out->slabs = n;
  out->peak_slabs = atomic_load_explicit(&t->peak, memory_order_relaxed);
  if (out->peak_slabs < n) out->peak_slabs = n; /* shards read one after another */
  out->bytes_reserved = n * slab_size;
  out->bytes_resident = resident;
  out->slab_allocs = allocs;
  out->slab_releases = releases;
}

void _ak_table_lock_all(_ak_slab_table *t) {
  for (size_t k = 0; k < AK_TABLE_SHARDS; k++) _ak_word_lock(&t->shard[k].mu);
}

void _ak_table_unlock_all(_ak_slab_table *t) {
  for (size_t k = AK_TABLE_SHARDS; k-- > 0;) _ak_word_unlock(&t->shard[k].mu);
}

void _ak_table_free(_ak_slab_table *t) {
  for (size_t k = 0; k < AK_TABLE_SHARDS; k++) {
    AK_ASSERT(t->shard[k].allocs - t->shard[k].releases == t->shard[k].n); /* the counters agree */
    for (size_t i = 0; i < t->shard[k].n; i++) (void)map_set(t->shard[k].a[i], false);
    free(t->shard[k].a);
    t->shard[k] = (_ak_table_shard){0};
  }
}
