/* SPDX-License-Identifier: MIT */
/* simple_malloc.c - libak-simple-malloc.so, the seed 003 "simple" baseline:
 * one global pthread mutex around one first-fit free list. For the
 * benchmarks only (LD_PRELOAD); it is deliberately naive.
 *
 * - Blocks carry a 16-byte header {size, tag}; sizes are multiples of 16, so
 *   every block is 16-byte aligned.
 * - The free list is kept in address order; malloc takes the first block
 *   that fits (splitting off the rest when at least kMinBlock remains),
 *   free walks the list to its place and merges with the neighbours. Both
 *   are O(free blocks), under the one mutex.
 * - When nothing fits, a 4 MiB chunk (or more, for a large request) is
 *   mapped and added to the list; chunks are never returned.
 * - Requests of kDirect bytes and more get a mapping of their own (tag
 *   kTagMapped, size = mapping length), unmapped by free.
 * - Aligned requests over-allocate and put a second header in front of the
 *   aligned address (tag kTagAligned, size = distance back to the block's
 *   header).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define SM_API __attribute__((visibility("default")))

enum {
  kHeader = 16,
  kMinBlock = 32,
};
static const size_t kChunk = (size_t)4 << 20;
static const size_t kDirect = (size_t)256 << 10;
static const size_t kTagUsed = 0x5e11u;
static const size_t kTagFree = 0xf3eeu;
static const size_t kTagMapped = 0x3a99u;
static const size_t kTagAligned = 0xa119u;

typedef struct block {
  size_t size; /* whole block, header included */
  size_t tag;
  struct block *next; /* free blocks only */
} block;

static pthread_mutex_t sm_lock = PTHREAD_MUTEX_INITIALIZER;
static block *sm_free; /* address order */

static block *header_of(void *p) { return (block *)((char *)p - kHeader); }
static void *payload(block *b) { return (char *)b + kHeader; }

static void *map(size_t n) {
  void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

static size_t page_round(size_t n) {
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  return (n + pg - 1) & ~(pg - 1);
}

/* Inserts b into the address-ordered list and merges it with its
 * neighbours when they touch. Caller holds the lock. */
static void insert_free(block *b) {
  b->tag = kTagFree;
  block *prev = NULL, *cur = sm_free;
  while (cur && cur < b) {
    prev = cur;
    cur = cur->next;
  }
  b->next = cur;
  if (cur && (char *)b + b->size == (char *)cur) {
    b->size += cur->size;
    b->next = cur->next;
  }
  if (prev && (char *)prev + prev->size == (char *)b) {
    prev->size += b->size;
    prev->next = b->next;
  } else if (prev) {
    prev->next = b;
  } else {
    sm_free = b;
  }
}

/* A used block of at least `need` bytes (header included), or NULL.
 * Caller holds the lock. */
static block *take(size_t need) {
  for (int attempt = 0; attempt < 2; attempt++) {
    block *prev = NULL;
    for (block *b = sm_free; b; prev = b, b = b->next) {
      if (b->size < need) continue;
      block *rest = b->next;
      if (b->size - need >= kMinBlock) {
        block *r = (block *)((char *)b + need);
        r->size = b->size - need;
        r->tag = kTagFree;
        r->next = b->next;
        rest = r;
        b->size = need;
      }
      if (prev)
        prev->next = rest;
      else
        sm_free = rest;
      b->tag = kTagUsed;
      return b;
    }
    size_t n = need > kChunk ? page_round(need) : kChunk;
    block *c = map(n);
    if (!c) return NULL;
    c->size = n;
    insert_free(c);
  }
  return NULL;
}

static void *sm_alloc(size_t n) {
  if (n > SIZE_MAX / 2) {
    errno = ENOMEM;
    return NULL;
  }
  size_t need = (n + kHeader + 15) & ~(size_t)15;
  if (need < kMinBlock) need = kMinBlock;
  if (need >= kDirect) {
    size_t len = page_round(need);
    block *b = map(len);
    if (!b) {
      errno = ENOMEM;
      return NULL;
    }
    b->size = len;
    b->tag = kTagMapped;
    return payload(b);
  }
  pthread_mutex_lock(&sm_lock);
  block *b = take(need);
  pthread_mutex_unlock(&sm_lock);
  if (!b) {
    errno = ENOMEM;
    return NULL;
  }
  return payload(b);
}

/* The header of the block that holds p (p may be an aligned pointer). */
static block *block_of(void *p) {
  block *h = header_of(p);
  if (h->tag == kTagAligned) h = (block *)((char *)h - h->size);
  return h;
}

static void sm_release(block *b) {
  if (b->tag == kTagMapped) {
    munmap(b, b->size);
    return;
  }
  pthread_mutex_lock(&sm_lock);
  insert_free(b);
  pthread_mutex_unlock(&sm_lock);
}

SM_API void *malloc(size_t n) { return sm_alloc(n); }

SM_API void free(void *p) {
  if (p) sm_release(block_of(p));
}

SM_API void *calloc(size_t count, size_t size) {
  size_t n;
  if (__builtin_mul_overflow(count, size, &n)) {
    errno = ENOMEM;
    return NULL;
  }
  void *p = sm_alloc(n);
  if (p) memset(p, 0, n);
  return p;
}

SM_API size_t malloc_usable_size(void *p) {
  if (!p) return 0;
  block *b = block_of(p);
  return (size_t)((char *)b + b->size - (char *)p);
}

SM_API void *realloc(void *p, size_t n) {
  if (!p) return sm_alloc(n);
  if (n == 0) {
    free(p);
    return NULL;
  }
  size_t have = malloc_usable_size(p);
  if (n <= have && header_of(p)->tag != kTagMapped) return p;
  if (n <= have && n * 2 > have) return p;
  void *q = sm_alloc(n);
  if (!q) return NULL;
  memcpy(q, p, n < have ? n : have);
  free(p);
  return q;
}

SM_API void *reallocarray(void *p, size_t count, size_t size) {
  size_t n;
  if (__builtin_mul_overflow(count, size, &n)) {
    errno = ENOMEM;
    return NULL;
  }
  return realloc(p, n);
}

static void *sm_aligned(size_t align, size_t n) {
  if (align <= 16) return sm_alloc(n);
  if (n > SIZE_MAX / 2 || align > SIZE_MAX / 4) {
    errno = ENOMEM;
    return NULL;
  }
  char *raw = sm_alloc(n + align + kHeader);
  if (!raw) return NULL;
  uintptr_t a = ((uintptr_t)raw + kHeader + align - 1) & ~(uintptr_t)(align - 1);
  block *h = header_of((void *)a);
  h->tag = kTagAligned;
  h->size = (size_t)((char *)h - (char *)header_of(raw));
  return (void *)a;
}

static int power_of_two(size_t a) { return a && !(a & (a - 1)); }

SM_API int posix_memalign(void **out, size_t align, size_t n) {
  if (!power_of_two(align) || align % sizeof(void *)) return EINVAL;
  int saved = errno;
  void *p = sm_aligned(align, n);
  if (!p) {
    errno = saved;
    return ENOMEM;
  }
  *out = p;
  return 0;
}

SM_API void *aligned_alloc(size_t align, size_t n) {
  if (!power_of_two(align)) {
    errno = EINVAL;
    return NULL;
  }
  return sm_aligned(align, n);
}

SM_API void *memalign(size_t align, size_t n) {
  size_t a = 1;
  while (a < align) a <<= 1;
  return sm_aligned(a, n);
}

SM_API void *valloc(size_t n) { return sm_aligned((size_t)sysconf(_SC_PAGESIZE), n); }

SM_API void *pvalloc(size_t n) {
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  return sm_aligned(pg, page_round(n ? n : 1));
}
