/* SPDX-License-Identifier: MIT */
/* malloc_header_pages_ctest.c - the malloc touches a segment's header only
 * where its spans' page descriptors lie: the walks over the descriptors
 * (the search for a page of the same class, the statistics and high-water
 * walks, a thread's exit) skip those no span has written, so the header's
 * later pages stay unmapped while the segment's first pages are the only
 * ones in use. A read of an untouched page would map it from the zero
 * page, and the first span whose descriptor lies there would fault it
 * again. Checked with mincore(2), in a process of its own: the first
 * segments are fresh mappings. Exit 0: no such page was mapped. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "arenakit/malloc.h"
#include "malloc/malloc_internal.h"
#include "malloc/size_class.h"

static int failures;

/* The header pages of `seg` past its first system page that hold only
 * descriptors of pages no span took must not be resident. */
static void check(const char *when, const void *block) {
  _ak_segment *seg = _ak_seg_of(block);
  long sys = sysconf(_SC_PAGESIZE);
  size_t first = offsetof(_ak_segment, pages) / (size_t)sys; /* a system page the header's start owns */
  size_t last = (sizeof(_ak_segment) - 1) / (size_t)sys;
  for (size_t i = first + 1; i <= last; i++) {
    /* The descriptors on this system page (whole or in part): untouched
     * unless a span wrote one of them. */
    size_t lo = (i * (size_t)sys - offsetof(_ak_segment, pages)) / sizeof(_ak_page);
    size_t hi = ((i + 1) * (size_t)sys - 1 - offsetof(_ak_segment, pages)) / sizeof(_ak_page);
    if (hi >= AK_SEG_PAGES) hi = AK_SEG_PAGES - 1;
    if (seg->carved_mask & _ak_run_bits((unsigned)lo, (unsigned)(hi - lo + 1))) continue;
    unsigned char v = 0;
    if (mincore((char *)seg + i * (size_t)sys, (size_t)sys, &v) != 0) {
      perror("malloc_header_pages: mincore");
      failures++;
      return;
    }
    if (v & 1) {
      fprintf(stderr,
              "malloc_header_pages: %s: header page %zu of segment %p is mapped, no span's descriptor lies "
              "there\n",
              when, i, (void *)seg);
      failures++;
    }
  }
}

static void *thread_main(void *arg) {
  (void)arg;
  void *p = ak_malloc(24); /* left live: the exiting thread abandons the segment */
  return p;
}

int main(void) {
  if (sizeof(_ak_segment) <= 2 * (size_t)sysconf(_SC_PAGESIZE)) {
    printf("malloc_header_pages: the header fits two system pages: nothing to check\n");
    return 77;
  }
  /* Blocks of several classes: each new class takes a one-page span, and
   * each span search looks for a free page of its class. */
  void *a = ak_malloc(16), *b = ak_malloc(200), *c = ak_malloc(1000), *d = ak_malloc(3000);
  if (!a || !b || !c || !d) return 1;
  check("after four classes", a);
  ak_malloc_stats s = {0};
  s.version = AK_MALLOC_STATS_VERSION;
  ak_malloc_stats_get(&s); /* walks every segment's descriptors */
  check("after ak_malloc_stats_get", a);
  pthread_t t;
  void *left = NULL;
  if (pthread_create(&t, NULL, thread_main, NULL) != 0 || pthread_join(t, &left) != 0 || !left) return 1;
  check("after a thread exited", left);
  void *e = ak_malloc(24); /* may adopt the exited thread's segment */
  check("after adoption", left);
  ak_free(left);
  ak_free(e);
  ak_free(a);
  ak_free(b);
  ak_free(c);
  ak_free(d);
  printf("malloc_header_pages: %s\n", failures ? "FAILED" : "ok");
  return failures != 0;
}
