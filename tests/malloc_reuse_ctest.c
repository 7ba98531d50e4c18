/* SPDX-License-Identifier: MIT */
/* malloc_reuse_ctest.c - where a heap takes memory once its own pages of
 * a class are used up: pages that held data before pages never touched
 * (a sparser segment's dirty pages before a fuller one's untouched pages,
 * a spare segment's before the heap's own untouched ones), and an
 * abandoned segment only when it is out of touched free pages, one at a
 * time (a thread that adopted every abandoned segment it could would
 * leave the threads starting beside it to map fresh ones). Each case runs
 * in a child of its own (fork), with the purge delays off, so that no
 * page is decommitted under the check. Exit 0: every case behaved. */
#define _GNU_SOURCE
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "arenakit/malloc.h"
#include "arenakit/reclaim.h"
#include "malloc/malloc_internal.h"

static int failures;

static void run(const char *name, int (*body)(void)) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    perror("malloc_reuse: fork");
    failures++;
    return;
  }
  if (pid == 0) {
    if (ak_reclaim_set_delays(-1, -1) != 0 || ak_reclaim_set_page_delay(-1) != 0) _exit(2);
    _exit(body());
  }
  int st = 0;
  waitpid(pid, &st, 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    fprintf(stderr, "malloc_reuse: %s: failed (status %#x)\n", name, st);
    failures++;
  }
}

static uint64_t stat_of(const char *name) {
  uint64_t v = 0;
  if (ak_malloc_stat(name, &v) != 0) abort();
  return v;
}

/* ---- a spare's touched pages before untouched ones ------------------------- */

static sem_t first_done, spare_ready;
static void *spare_seg; /* the segment the short-lived thread emptied */

/* Fills part of a segment of its own with blocks, frees them all and
 * exits: the empty segment becomes a spare whose pages held data. */
static void *fill_and_leave(void *arg) {
  (void)arg;
  enum { N = 200 };
  void *b[N];
  for (int i = 0; i < N; i++)
    if (!(b[i] = ak_malloc(4000))) return NULL;
  spare_seg = _ak_seg_of(b[0]);
  for (int i = 0; i < N; i++) ak_free(b[i]);
  return NULL;
}

static void *place_after_spare(void *arg) {
  void *a = ak_malloc(48); /* the heap's first span: a fresh segment, the rest untouched */
  sem_post(&first_done);
  sem_wait(&spare_ready);
  void *b = ak_malloc(200); /* a new class: no touched free page of the heap's own */
  *(int *)arg = a && b && _ak_seg_of(b) == spare_seg && _ak_seg_of(a) != spare_seg ? 0 : 1;
  if (*(int *)arg)
    fprintf(stderr,
            "malloc_reuse: the new span is in %p, the spare with touched pages was %p (own segment %p)\n",
            (void *)_ak_seg_of(b), spare_seg, (void *)_ak_seg_of(a));
  ak_free(a);
  ak_free(b);
  return NULL;
}

static int spare_before_untouched(void) {
  int result = 3;
  pthread_t placer, filler;
  if (sem_init(&first_done, 0, 0) != 0 || sem_init(&spare_ready, 0, 0) != 0 ||
      pthread_create(&placer, NULL, place_after_spare, &result) != 0)
    return 2;
  sem_wait(&first_done);
  if (pthread_create(&filler, NULL, fill_and_leave, NULL) != 0 || pthread_join(filler, NULL) != 0) return 2;
  if (!spare_seg || stat_of("abandoned_segments") != 0) {
    fprintf(stderr, "malloc_reuse: the emptied segment was not left as a spare\n");
    return 4;
  }
  sem_post(&spare_ready);
  pthread_join(placer, NULL);
  return result;
}

/* ---- adoption: one segment, and only when out of touched pages ---------------- */

enum { SEGS = 3 };
static void *kept[SEGS]; /* one live block in each segment the first thread abandons */

/* Fills SEGS segments with blocks and keeps one block in each when it
 * exits: SEGS abandoned segments, each with touched free pages. */
static void *abandon_segments(void *arg) {
  (void)arg;
  enum { N = 4000 }; /* 16 MiB of 4000-byte blocks */
  void **b = ak_malloc(N * sizeof *b);
  if (!b) return NULL;
  int k = 0;
  for (int i = 0; i < N; i++) {
    if (!(b[i] = ak_malloc(4000))) return NULL;
    if (k < SEGS && (k == 0 || _ak_seg_of(b[i]) != _ak_seg_of(kept[k - 1]))) {
      kept[k++] = b[i];
      b[i] = NULL;
    }
  }
  for (int i = 0; i < N; i++) ak_free(b[i]);
  ak_free(b);
  return NULL;
}

static uint64_t abandoned_after; /* while the second thread runs (its exit abandons again) */

static void *allocate_classes(void *arg) {
  static const size_t sizes[] = {16, 32, 64, 128, 256, 512, 1024, 2048, 3000, 6000};
  void *got[sizeof sizes / sizeof *sizes];
  int *result = arg;
  *result = 0;
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    got[i] = ak_malloc(sizes[i]);
    /* Every span in the one segment adopted, none in a fresh one. */
    if (!got[i] || _ak_seg_of(got[i]) != _ak_seg_of(got[0])) *result = 1;
  }
  bool adopted = false;
  for (int k = 0; k < SEGS; k++) adopted = adopted || _ak_seg_of(kept[k]) == _ak_seg_of(got[0]);
  if (!adopted) *result = 1;
  abandoned_after = stat_of("abandoned_segments");
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) ak_free(got[i]);
  return NULL;
}

static int adopt_one_when_needed(void) {
  pthread_t t;
  if (pthread_create(&t, NULL, abandon_segments, NULL) != 0 || pthread_join(t, NULL) != 0) return 2;
  uint64_t before = stat_of("abandoned_segments");
  if (before < SEGS || !kept[SEGS - 1]) {
    fprintf(stderr, "malloc_reuse: %llu segments abandoned, %d wanted\n", (unsigned long long)before, SEGS);
    return 4;
  }
  int result = 3;
  if (pthread_create(&t, NULL, allocate_classes, &result) != 0 || pthread_join(t, NULL) != 0) return 2;
  uint64_t after = abandoned_after;
  if (result != 0 || after != before - 1) {
    fprintf(stderr,
            "malloc_reuse: ten classes %s; abandoned segments %llu before, %llu after (one adopted wanted)\n",
            result ? "spread beyond the adopted segment" : "in the adopted segment",
            (unsigned long long)before, (unsigned long long)after);
    return 1;
  }
  for (int k = 0; k < SEGS; k++) ak_free(kept[k]);
  return 0;
}

/* ---- dirty pages before a fuller segment's untouched ones ----------------------- */

static pthread_barrier_t filled;
static void *dense_seg, *sparse_seg; /* the two segments the first threads abandon */

/* Fills `pages` pages with blocks of `size`, waits for the other filler
 * (and for `before`), then keeps one block in each of the first `keep`
 * pages and frees the rest; exits (the segment is abandoned). With keep ==
 * pages the segment is dense with no dirty page; with keep == 1 its freed
 * pages are dirty. */
struct fill {
  size_t size;
  int pages, keep;
  void **seg;
  sem_t *before; /* waited for before freeing (NULL: none) */
};

static void *fill_pages(void *arg) {
  const struct fill *f = arg;
  static void *blocks[2][4096];
  void **b = blocks[f->keep == 1];
  int n = 0;
  uintptr_t first_page = 0, page = 0;
  for (int pages = 0; pages < f->pages && n < 4096;) {
    if (!(b[n] = ak_malloc(f->size))) return NULL;
    uintptr_t pg = (uintptr_t)b[n] >> AK_PAGE_SHIFT;
    if (n == 0) first_page = pg;
    if (pg != page) {
      page = pg;
      pages++;
    }
    n++;
  }
  *f->seg = _ak_seg_of(b[0]);
  pthread_barrier_wait(&filled);
  if (f->before) sem_wait(f->before);
  page = 0;
  for (int i = 0; i < n; i++) {
    uintptr_t pg = (uintptr_t)b[i] >> AK_PAGE_SHIFT;
    bool keep = pg != page && (int)(pg - first_page) < f->keep;
    page = pg;
    if (!keep) ak_free(b[i]);
  }
  return NULL;
}

static void *place_in_dirty(void *arg) {
  int *result = arg;
  void *c = ak_malloc(4000); /* the dense segment's class: adopts it (a page with room) */
  void *y = ak_malloc(100);  /* no dirty page: adopts the sparse segment */
  void *z = ak_malloc(200);  /* dirty pages there, untouched ones in the fuller segment */
  *result =
      c && y && z && _ak_seg_of(c) == dense_seg && _ak_seg_of(y) == sparse_seg && _ak_seg_of(z) == sparse_seg
          ? 0
          : 1;
  if (*result)
    fprintf(stderr,
            "malloc_reuse: blocks in %p, %p, %p; the dense segment (untouched free pages) %p, the sparse one "
            "(dirty free pages) %p\n",
            c ? (void *)_ak_seg_of(c) : NULL, y ? (void *)_ak_seg_of(y) : NULL,
            z ? (void *)_ak_seg_of(z) : NULL, dense_seg, sparse_seg);
  return NULL;
}

static int dirty_before_untouched(void) {
  sem_t sparse_gone;
  pthread_t dense, sparse, placer;
  struct fill d = {4000, 40, 40, &dense_seg, &sparse_gone};
  struct fill sp = {3000, 30, 1, &sparse_seg, NULL};
  if (sem_init(&sparse_gone, 0, 0) != 0 || pthread_barrier_init(&filled, NULL, 2) != 0) return 2;
  /* Both fill at once (neither adopts the other's segment); the sparse
   * one exits first, so the dense segment is the most recently abandoned. */
  if (pthread_create(&dense, NULL, fill_pages, &d) != 0 ||
      pthread_create(&sparse, NULL, fill_pages, &sp) != 0)
    return 2;
  pthread_join(sparse, NULL);
  sem_post(&sparse_gone);
  pthread_join(dense, NULL);
  if (!dense_seg || !sparse_seg || dense_seg == sparse_seg || stat_of("abandoned_segments") != 2) {
    fprintf(stderr, "malloc_reuse: the two segments were not abandoned apart\n");
    return 4;
  }
  int result = 3;
  if (pthread_create(&placer, NULL, place_in_dirty, &result) != 0 || pthread_join(placer, NULL) != 0)
    return 2;
  return result;
}

int main(void) {
  run("a spare's touched pages before untouched ones", spare_before_untouched);
  run("one abandoned segment adopted, when out of touched pages", adopt_one_when_needed);
  run("dirty pages before a fuller segment's untouched ones", dirty_before_untouched);
  printf("malloc_reuse: %s\n", failures ? "FAILED" : "ok");
  return failures != 0;
}
