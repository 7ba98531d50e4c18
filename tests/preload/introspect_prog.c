/* SPDX-License-Identifier: MIT */
/* introspect_prog.c - a program that knows nothing of arenakit and uses
 * glibc's malloc introspection and internal names, run by introspect_test
 * under LD_PRELOAD. argv[1] says what it does; it prints name=value lines
 * on stdout (after the measurements, so printing allocates nothing that
 * they see) and exits 0 unless a call misbehaves:
 *   trim      allocates about 64 MiB (small blocks and large ones), touches
 *             it, frees it, then calls malloc_trim(0): the process's RSS
 *             (VmRSS) before and after, and what malloc_trim returned
 *   mallinfo  mallinfo2's in-use figures before and after allocating blocks
 *             of mixed sizes, and the blocks' usable sizes summed; mallinfo
 *             beside them; ak_malloc_stat's "allocated" when the malloc has
 *             it (dlsym)
 *   info      malloc_info(0, stdout), then malloc_info(1, ...) (EINVAL),
 *             then malloc_stats() (on stderr)
 *   libc      __libc_malloc and the rest of glibc's internal names, their
 *             blocks freed by free() and the other way round */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern void *__libc_malloc(size_t n);
extern void __libc_free(void *p);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *p, size_t n);
extern void *__libc_memalign(size_t align, size_t n);

/* VmRSS of this process in bytes (0 if unreadable); allocates nothing
 * (stdio would: a FILE and its buffer, freed again, between the trims). */
static size_t rss_now(void) {
  char text[4096];
  int fd = open("/proc/self/status", O_RDONLY);
  if (fd < 0) return 0;
  ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  if (n <= 0) return 0;
  text[n] = '\0';
  const char *at = strstr(text, "\nVmRSS:");
  return at ? (size_t)strtoull(at + 7, NULL, 10) * 1024 : 0;
}

enum { SMALL = 12000, LARGE = 4 };
static void *small_blocks[SMALL];
static void *large_blocks[LARGE];

static int trim(void) {
  size_t before = rss_now();
  for (int i = 0; i < SMALL; i++) { /* 1 KiB to 7 KiB: about 48 MiB of segments */
    small_blocks[i] = malloc(1024 + (size_t)(i % 7) * 1024);
    if (!small_blocks[i]) return 1;
    memset(small_blocks[i], 1, 1024 + (size_t)(i % 7) * 1024);
  }
  for (int i = 0; i < LARGE; i++) { /* 4 x 8 MiB: large blocks */
    large_blocks[i] = malloc((size_t)8 << 20);
    if (!large_blocks[i]) return 1;
    memset(large_blocks[i], 1, (size_t)8 << 20);
  }
  size_t full = rss_now();
  for (int i = 0; i < SMALL; i++) free(small_blocks[i]);
  for (int i = 0; i < LARGE; i++) free(large_blocks[i]);
  size_t freed = rss_now();
  int rc = malloc_trim(0);
  size_t trimmed = rss_now();
  int again = malloc_trim(0); /* nothing left to give back */
  printf("rss_start=%zu\nrss_full=%zu\nrss_freed=%zu\nrss_trimmed=%zu\ntrim=%d\ntrim_again=%d\n", before,
         full, freed, trimmed, rc, again);
  return 0;
}

enum { MIXED = 20000 };
static void *mixed[MIXED];

static int info2(void) {
  struct mallinfo2 a = mallinfo2();
  size_t usable = 0;
  for (int i = 0; i < MIXED; i++) {
    size_t n = 8 + (size_t)(i * 37) % 2000;
    mixed[i] = malloc(n);
    if (!mixed[i]) return 1;
    usable += malloc_usable_size(mixed[i]);
  }
  struct mallinfo2 b = mallinfo2();
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations" /* glibc marks mallinfo so */
  struct mallinfo c = mallinfo();
#pragma GCC diagnostic pop
  int (*ak_stat)(const char *, uint64_t *) = NULL;
  void *sym = dlsym(RTLD_DEFAULT, "ak_malloc_stat");
  memcpy(&ak_stat, &sym, sizeof sym); /* POSIX's way from dlsym to a function (ISO C has no cast) */
  uint64_t ak_allocated = 0;
  if (ak_stat && ak_stat("allocated", &ak_allocated) != 0) return 1;
  printf("inuse_before=%zu\ninuse_after=%zu\nusable_sum=%zu\n", a.uordblks + a.hblkhd, b.uordblks + b.hblkhd,
         usable);
  size_t grown = b.uordblks + b.hblkhd - (a.uordblks + a.hblkhd);
  printf("within_1pct=%d\n", grown >= usable - usable / 100 && grown <= usable + usable / 100);
  printf("arena=%zu\nfordblks=%zu\nmallinfo_uordblks=%d\nak_allocated=%llu\nhave_ak=%d\n", b.arena,
         b.fordblks, c.uordblks, (unsigned long long)ak_allocated, ak_stat != NULL);
  for (int i = 0; i < MIXED; i++) free(mixed[i]);
  return 0;
}

static int info(void) {
  void *volatile keep = malloc(100); /* volatile: the compiler may not drop the pair */
  if (malloc_info(0, stdout) != 0) return 1;
  errno = 0;
  int rc = malloc_info(1, stdout);
  printf("\noptions1_rc=%d errno=%d\n", rc, errno);
  malloc_stats(); /* on stderr */
  free(keep);
  return 0;
}

static int libc(void) {
  char *a = __libc_malloc(100);
  char *b = malloc(200);
  char *c = __libc_calloc(10, 10);
  if (!a || !b || !c) return 1;
  for (int i = 0; i < 100; i++)
    if (c[i]) return 2;
  memset(a, 1, 100);
  a = __libc_realloc(a, 5000);
  void *d = __libc_memalign(256, 300);
  if (!a || !d || ((uintptr_t)d & 255)) return 3;
  free(a);        /* __libc_realloc's block to free */
  __libc_free(b); /* malloc's block to __libc_free */
  free(c);
  free(d);
  printf("libc=ok\n");
  return 0;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  if (!strcmp(mode, "trim")) return trim();
  if (!strcmp(mode, "mallinfo")) return info2();
  if (!strcmp(mode, "info")) return info();
  if (!strcmp(mode, "libc")) return libc();
  fprintf(stderr, "usage: %s trim|mallinfo|info|libc\n", argv[0]);
  return 2;
}
