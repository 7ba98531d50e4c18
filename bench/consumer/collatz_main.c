/* SPDX-License-Identifier: MIT */
/* collatz_main.c - the Collatz list and array programs (bench/collatz.c)
 * as a program of their own, compiled apart from arenakit and run with
 * whatever malloc LD_PRELOAD gives it (bench/consumer/collatz.sh).
 * Usage: collatz_main list|ivec TOP THREADS
 * Prints "<seconds> <steps>" and exits 1 if a sequence came out wrong. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collatz.h"

int main(int argc, char **argv) {
  if (argc != 4 || (strcmp(argv[1], "list") && strcmp(argv[1], "ivec"))) {
    fprintf(stderr, "usage: %s list|ivec TOP THREADS\n", argv[0]);
    return 2;
  }
  long top = atol(argv[2]);
  int threads = atoi(argv[3]);
  struct timespec t0, t1;
  long steps = 0, bad = 0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int rc = collatz_run(!strcmp(argv[1], "list"), top, threads, &steps, &bad);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  printf("%.4f %ld\n", (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9, steps);
  return rc != 0 || bad != 0 || steps != collatz_reference(top);
}
