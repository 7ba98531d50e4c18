/* SPDX-License-Identifier: MIT */
/* stats_prog.c - a program that knows nothing of arenakit, run by
 * stats_output_test under LD_PRELOAD: it prints its pid on stdout, allocates
 * small blocks and one large block (so the exit report has size classes
 * and a large block; the large one stays live), then ends as argv[1] says:
 *   plain         returns from main
 *   fork          forks; the child allocates, exits with exit(0); the parent
 *                 waits for it, then returns
 *   close-stderr  closes fd 2 first (a daemon's habit), then returns */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "plain";
  printf("%ld\n", (long)getpid());
  fflush(stdout);
  static void *keep[1000];
  for (int i = 0; i < 1000; i++) {
    keep[i] = malloc((size_t)(16 + i % 200));
    if (keep[i]) memset(keep[i], 1, 16);
  }
  void *large = malloc(8u << 20);
  if (large) memset(large, 1, 1u << 20);
  if (!strcmp(mode, "close-stderr")) close(2);
  if (!strcmp(mode, "fork")) {
    pid_t child = fork();
    if (child == 0) {
      void *p = malloc(100);
      free(p);
      exit(0);
    }
    int status;
    if (child > 0) waitpid(child, &status, 0);
  }
  /* `large` stays live: the exit report shows one large block. */
  for (int i = 0; i < 500; i++) free(keep[i]);
  return 0;
}
