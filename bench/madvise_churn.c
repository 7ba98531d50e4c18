/* SPDX-License-Identifier: MIT */
/* madvise_churn.c - the measurement behind the reclaim policy's choice of
 * MADV_DONTNEED over MADV_FREE (src/os/os_mem.c, docs/design.md).
 *
 * A pool's worth of slabs (`slabs` x 64 KiB, default 768: 48 MiB, the
 * 1M x 48 B churn) is written whole, then every slab is decommitted with
 * the advice under test, `rounds` (default 20) times, as a program whose
 * spares are purged between bursts of use. Per advice: ms per round (the
 * writes, their page faults and the madvise calls), minor faults per round
 * (getrusage), and how much the decommit took out of RSS
 * (/proc/self/statm, read before and after the madvise calls), which is
 * what a user and the acceptance read. A third line,
 * "none", keeps the pages (the cost floor). Each advice has its own region;
 * rounds are interleaved (DONTNEED, FREE, none, DONTNEED, ...), means.
 *
 *   madvise_churn [slabs] [rounds]
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define SLAB ((size_t)64 * 1024)

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static long minflt(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

static double rss_mib(void) {
  long pages = 0, resident = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (!f) return -1;
  if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = -1;
  fclose(f);
  return (double)resident * (double)sysconf(_SC_PAGESIZE) / 1048576.0;
}

int main(int argc, char **argv) {
  size_t slabs = argc > 1 ? strtoul(argv[1], NULL, 10) : 768;
  int rounds = argc > 2 ? atoi(argv[2]) : 20;
  size_t bytes = slabs * SLAB;
  char *m[3]; /* one region per advice, so no advice pays for another's */
  for (int a = 0; a < 3; a++) {
    m[a] = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m[a] == MAP_FAILED) return perror("mmap"), 1;
    memset(m[a], 1, bytes);
  }
  const char *names[] = {"MADV_DONTNEED", "MADV_FREE", "none (kept)"};
  const int advice[] = {MADV_DONTNEED, MADV_FREE, -1};
  double ms[3] = {0}, rss[3] = {0};
  long flt[3] = {0};
  for (int r = 0; r < rounds; r++) {
    for (int a = 0; a < 3; a++) { /* interleaved: DONTNEED, FREE, none, DONTNEED, ... */
      long f0 = minflt();
      double t0 = now_s();
      memset(m[a], r + a, bytes); /* the slabs used again */
      double before = rss_mib();
      for (size_t s = 0; advice[a] >= 0 && s < slabs; s++) madvise(m[a] + s * SLAB, SLAB, advice[a]);
      double t1 = now_s();
      flt[a] += minflt() - f0;
      ms[a] += (t1 - t0) * 1e3;
      rss[a] += before - rss_mib(); /* what the decommit took out of the process's RSS */
    }
  }
  printf("%zu slabs of 64 KiB (%.0f MiB), %d rounds: write all, decommit all\n", slabs,
         (double)bytes / 1048576.0, rounds);
  printf("%-14s %12s %18s %24s\n", "advice", "ms/round", "minor faults/round", "RSS given back MiB/round");
  for (int a = 0; a < 3; a++)
    printf("%-14s %12.2f %18.0f %24.1f\n", names[a], ms[a] / rounds, (double)flt[a] / rounds,
           rss[a] / rounds);
  for (int a = 0; a < 3; a++) munmap(m[a], bytes);
  return 0;
}
