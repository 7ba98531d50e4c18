/* SPDX-License-Identifier: MIT */
/* malloc_validate_ctest.c - the invariant checks of a segment and of a
 * span (src/malloc/validate.c), which the checked build runs at the slow
 * paths: they pass on a heap in use, and each broken invariant aborts
 * with a message naming the caller, the structure and the invariant.
 * Every case runs in a child of its own (fork), where no other thread
 * (the background purge) touches the segment; the child's stderr is read
 * back and matched. Exit 0: every case behaved. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "arenakit/malloc.h"
#if __has_include("arenakit/config.h")
#include "arenakit/config.h" /* AK_CONFIG_HARDENED: what the library was built with */
#endif
#include "malloc/malloc_internal.h"
#include "malloc/size_class.h"

static int failures;

static _ak_page *span_of(const void *p) { return _ak_page_of(_ak_seg_of(p), p); }

/* Stores `next` as free block `b`'s link the way the library built
 * against arenakit/config.h does: this file is compiled without the
 * library's definitions, so its ak_harden_encode is 0. Encoded with the
 * span's key when the links or double-free mitigation (bits 1 and 8 of
 * AK_CONFIG_HARDENED, as arenakit/detail/pool.h names them) is built in. */
static void set_link(const _ak_page *pg, void *b, const void *next) {
#ifdef AK_CONFIG_HARDENED
  bool encoded = (AK_CONFIG_HARDENED & (1 | 8)) != 0;
#else
  bool encoded = false;
#endif
  _ak_link_set(b, next, encoded ? pg->key : 0);
}

/* Runs `body` in a child: it must die of SIGABRT with `want` in its
 * stderr, or (want NULL) exit 0. */
static void expect(const char *name, void (*body)(void), const char *want) {
  int fd[2];
  if (pipe(fd) != 0) {
    perror("pipe");
    exit(1);
  }
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fd[1], 2);
    close(fd[0]);
    body();
    _exit(0);
  }
  close(fd[1]);
  char out[4096];
  size_t n = 0;
  ssize_t r;
  while (n < sizeof out - 1 && (r = read(fd[0], out + n, sizeof out - 1 - n)) > 0) n += (size_t)r;
  out[n] = 0;
  close(fd[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  bool ok = want ? WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT && strstr(out, want) != NULL
                 : WIFEXITED(st) && WEXITSTATUS(st) == 0;
  if (!ok) {
    fprintf(stderr, "malloc_validate: %s: expected %s%s%s, got status %#x and: %s\n", name,
            want ? "an abort with \"" : "a clean exit", want ? want : "", want ? "\"" : "", st, out);
    failures++;
  }
}

static void heap_in_use(void) {
  void *keep[64];
  for (int i = 0; i < 64; i++) keep[i] = ak_malloc((size_t)(8 + 40 * i));
  for (int i = 0; i < 64; i += 2) ak_free(keep[i]);
  void *solo = ak_malloc(200000); /* a span of several pages */
  bool ok = _ak_segment_validate(_ak_seg_of(keep[1]), "test") &&
            _ak_page_validate(span_of(keep[1]), "test") && _ak_page_validate(span_of(keep[63]), "test") &&
            _ak_page_validate(span_of(solo), "test") && _ak_segment_validate(_ak_seg_of(solo), "test");
  _exit(ok ? 0 : 1);
}

static void free_list_cycle(void) {
  void *a = ak_malloc(48), *b = ak_malloc(48);
  ak_free(a);
  _ak_page *pg = span_of(a);
  if (!pg->free) _exit(3);
  set_link(pg, pg->free, pg->free); /* the head links to itself */
  (void)_ak_page_validate(pg, "test");
  ak_free(b);
}

static void link_off_the_blocks(void) {
  char *a = ak_malloc(48), *b = ak_malloc(48);
  ak_free(a);
  _ak_page *pg = span_of(a);
  if (!pg->free) _exit(3);
  set_link(pg, pg->free, (char *)pg->free + 8); /* inside a block */
  (void)_ak_page_validate(pg, "test");
  ak_free(b);
}

static void counts_do_not_add_up(void) {
  void *a = ak_malloc(48);
  _ak_used_set(span_of(a), _ak_used(span_of(a)) + 1);
  (void)_ak_page_validate(span_of(a), "test");
}

static void dirty_page_in_a_span(void) {
  void *a = ak_malloc(48);
  _ak_segment *seg = _ak_seg_of(a);
  seg->dirty_mask |= UINT64_C(1) << (span_of(a) - seg->pages);
  (void)_ak_segment_validate(seg, "test");
}

static void span_page_never_carved(void) {
  void *a = ak_malloc(48);
  _ak_segment *seg = _ak_seg_of(a);
  seg->carved_mask &= ~(UINT64_C(1) << (span_of(a) - seg->pages));
  (void)_ak_segment_validate(seg, "test");
}

static void dirty_page_never_carved(void) {
  void *a = ak_malloc(48);
  _ak_segment *seg = _ak_seg_of(a);
  uint64_t untouched = seg->free_mask & ~seg->carved_mask;
  if (!untouched) _exit(3);
  seg->dirty_mask |= untouched & -untouched; /* a page no span took, marked as one that held data */
  (void)_ak_segment_validate(seg, "test");
}

static void span_page_not_linked(void) {
  void *solo = ak_malloc(200000);
  _ak_page *pg = span_of(solo);
  if (pg->span < 2) _exit(3);
  pg[1].head_off = 0;
  (void)_ak_segment_validate(_ak_seg_of(solo), "test");
}

static void free_page_with_a_block_size(void) {
  void *a = ak_malloc(48), *solo = ak_malloc(200000);
  _ak_segment *seg = _ak_seg_of(solo);
  unsigned at = (unsigned)(span_of(solo) - seg->pages);
  ak_free(solo); /* its pages are free again, and carved */
  if (!(seg->free_mask >> at & 1) || !(seg->carved_mask >> at & 1)) _exit(3);
  seg->pages[at].block_size = 48;
  (void)_ak_segment_validate(seg, "test");
  ak_free(a);
}

int main(void) {
  expect("a heap in use", heap_in_use, NULL);
  expect("a free-list cycle", free_list_cycle, "test: malloc span 0x"); /* the class and the reason follow */
  expect("a free-list cycle", free_list_cycle,
         "is invalid: the free list is longer than the carved blocks (a cycle)");
  expect("a link off the blocks", link_off_the_blocks, "is invalid: a free-list link off the carved blocks");
  expect("counts", counts_do_not_add_up, "is invalid: used + free + never-carved blocks != capacity");
  expect("a dirty page in a span", dirty_page_in_a_span,
         "test: malloc segment 0x"); /* the address and the reason follow */
  expect("a dirty page in a span", dirty_page_in_a_span,
         "is invalid: a dirty or decommitted page is in a span");
  expect("a page never carved", span_page_never_carved, "is invalid: a page in a span was never carved");
  expect("a dirty page never carved", dirty_page_never_carved,
         "is invalid: a dirty or decommitted page was never carved");
  expect("a page not linked", span_page_not_linked, "is invalid: a span's page is not linked to its head");
  expect("a free page's block size", free_page_with_a_block_size, "is invalid: a free page has a block size");
  printf("malloc_validate: %s\n", failures ? "FAILED" : "ok");
  return failures != 0;
}
