/* SPDX-License-Identifier: MIT */
/* Writes deterministic text lines for the sort workload of
 * tests/realprog/run.sh.  Usage: gen_lines BYTES SEED > file
 * Lines look like "<word> <word> <number> <tail>" with varying lengths,
 * a skewed word distribution and about 10% repeated lines, so sort sees
 * equal keys, numeric keys and duplicates. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static uint64_t state;

static uint64_t next(void) {
  state ^= state >> 12;
  state ^= state << 25;
  state ^= state >> 27;
  return state * 2685821657736338717ull;
}

static size_t word(char *p, unsigned maxlen) {
  static const char alpha[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-";
  unsigned n = 1 + (unsigned)(next() % maxlen);
  for (unsigned i = 0; i < n; i++) p[i] = alpha[next() % 64];
  return n;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: gen_lines BYTES SEED\n");
    return 2;
  }
  unsigned long long target = strtoull(argv[1], NULL, 10);
  state = strtoull(argv[2], NULL, 10) * 0x9e3779b97f4a7c15ull + 1;
  static char prev[64][256];
  static size_t prevlen[64];
  char line[256];
  unsigned long long written = 0;
  unsigned long long count = 0;
  while (written < target) {
    size_t n;
    uint64_t r = next();
    if (count >= 64 && r % 10 == 0) {
      unsigned k = (unsigned)(r >> 8) % 64;
      n = prevlen[k];
      for (size_t i = 0; i < n; i++) line[i] = prev[k][i];
    } else {
      n = 0;
      /* first field from a small vocabulary: many equal leading keys */
      if (r % 3 == 0) {
        n += (size_t)snprintf(line + n, 16, "key%03u", (unsigned)(next() % 500));
      } else {
        n += word(line + n, 12);
      }
      line[n++] = ' ';
      n += word(line + n, 30);
      line[n++] = ' ';
      n += (size_t)snprintf(line + n, 24, "%llu", (unsigned long long)(next() % 10000000ull));
      line[n++] = ' ';
      n += word(line + n, 80);
      unsigned k = (unsigned)(count % 64);
      for (size_t i = 0; i < n; i++) prev[k][i] = line[i];
      prevlen[k] = n;
    }
    line[n++] = '\n';
    if (fwrite(line, 1, n, stdout) != n) return 1;
    written += n;
    count++;
  }
  return fflush(stdout) != 0;
}
