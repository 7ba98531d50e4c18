/* SPDX-License-Identifier: MIT */
/* harden.c - random numbers and free-list chaining for the hardened
 * build's mitigations (see harden.h). */
#define _GNU_SOURCE
#include "common/harden.h"

#include "arenakit/common.h"
#include "arenakit/detail/link.h"
#include "os/os_mem.h"

#include <time.h>

/* xorshift64* per thread; initial-exec TLS: one %fs access, no call. */
static __attribute__((tls_model("initial-exec"))) _Thread_local uint64_t rng_state;

static uint64_t seed(void) {
  uint64_t s = _ak_os_entropy();
  if (s == 0) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    s = (uint64_t)(uintptr_t)&ts ^ ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^
        (uint64_t)(uintptr_t)&rng_state;
  }
  return s ? s : UINT64_C(0x9e3779b97f4a7c15);
}

/* One xorshift64* step of the state `*x` (kept in a register by callers
 * that draw many numbers, then stored back once). */
static inline uint64_t rng_step(uint64_t *x) {
  uint64_t v = *x;
  v ^= v >> 12;
  v ^= v << 25;
  v ^= v >> 27;
  *x = v;
  return v * UINT64_C(0x2545f4914f6cdd1d);
}

uint64_t _ak_random(void) {
  uint64_t x = rng_state;
  if (x == 0) x = seed();
  uint64_t r = rng_step(&x);
  rng_state = x;
  return r;
}

void *_ak_chain_blocks(uintptr_t base, size_t stride, size_t n, void *tail, uintptr_t key, bool shuffle) {
  void *head = tail;
  if (!shuffle || n < 2) {
    /* Address order: the chain pops from low to high addresses. */
    for (size_t i = n; i-- > 0;) {
      void *b = (void *)(base + i * stride);
      _ak_link_set(b, head, key);
      head = b;
    }
    return head;
  }
  /* Random order that keeps locality (as mimalloc's secure mode does): the
   * blocks are cut into up to 8 slices of consecutive blocks and the chain
   * takes the next block of a randomly chosen slice each time. Which block
   * comes next cannot be predicted, yet memory is visited in at most 8
   * ascending streams that the hardware prefetcher follows. */
  enum { SLICES = 8 };
  uintptr_t cur[SLICES], end[SLICES];
  size_t ns = n < SLICES ? n : SLICES, per = n / ns, live = ns;
  for (size_t i = 0; i < ns; i++) {
    cur[i] = base + i * per * stride;
    end[i] = i + 1 == ns ? base + n * stride : cur[i] + per * stride;
  }
  uintptr_t first = 0, prev = 0;
  /* The generator's state stays in a register for the whole chain (the
   * link stores could alias the thread-local word), and each 64-bit draw
   * picks four slices, 16 bits each: (16 bits * live) >> 16 is uniform in
   * [0, live) up to a bias below live / 65536. */
  uint64_t x = rng_state, r = 0;
  if (x == 0) x = seed();
  unsigned left = 0; /* 16-bit picks left in r */
  while (live) {
    if (left == 0) {
      r = rng_step(&x);
      left = 4;
    }
    size_t i = (size_t)(((r & 0xffff) * (uint64_t)live) >> 16);
    r >>= 16;
    left--;
    uintptr_t b = cur[i];
    cur[i] += stride;
    if (cur[i] == end[i]) { /* slice used up: the last live one takes its place */
      live--;
      cur[i] = cur[live];
      end[i] = end[live];
    }
    if (prev)
      _ak_link_set((void *)prev, (void *)b, key);
    else
      first = b;
    prev = b;
  }
  rng_state = x;
  _ak_link_set((void *)prev, head, key);
  return (void *)first;
}

const char *ak_hardening(void) {
  static const char *const names[16] = {
      "none",
      "links",
      "guards",
      "links,guards",
      "shuffle",
      "links,shuffle",
      "guards,shuffle",
      "links,guards,shuffle",
      "double-free",
      "links,double-free",
      "guards,double-free",
      "links,guards,double-free",
      "shuffle,double-free",
      "links,shuffle,double-free",
      "guards,shuffle,double-free",
      "links,guards,shuffle,double-free",
  };
  return names[AK_HARDENED & 15];
}
