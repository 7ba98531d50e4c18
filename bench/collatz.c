/* SPDX-License-Identifier: MIT */
/* collatz.c - the seed 003 test programs, as plain C over malloc/free.
 *
 * Both programs compute, for every x in 1..top, the length of x's Collatz
 * sequence (x -> x/2 if even, 3x+1 if odd, until 1) the seed's way: the
 * sequence so far is kept in a container that is copied (a new container,
 * the old one freed) and then extended by up to 50 steps, until it reaches
 * 1. The work is spread over `threads` threads, thread t taking
 * x = t+1, t+1+threads, ...
 *   ivec  a growable array: struct {long *data; long size, cap;} (24 bytes);
 *         the copy has the same capacity, extending past it doubles the
 *         capacity with realloc
 *   list  a singly linked list of cells {long value; cell *next;} (16
 *         bytes), newest value first; the copy keeps the order, cell by cell
 * Values are longs: trajectories from below 10^6 pass 5.6 * 10^10. Each
 * finished sequence is checked (every value is the successor of the one
 * before it, the last is 1), so an allocator that hands out overlapping
 * blocks shows up as a wrong sum, not only as a crash.
 */
#include "collatz.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum { kExtendSteps = 50 };

static long collatz_next(long x) { return (x & 1) ? 3 * x + 1 : x / 2; }

/* ---- ivec ---------------------------------------------------------------- */

typedef struct ivec {
  long *data;
  long size;
  long cap;
} ivec;

static ivec *ivec_make(long cap) {
  ivec *v = malloc(sizeof *v);
  if (!v) abort();
  v->data = malloc((size_t)cap * sizeof(long));
  if (!v->data) abort();
  v->size = 0;
  v->cap = cap;
  return v;
}

static void ivec_free(ivec *v) {
  free(v->data);
  free(v);
}

static void ivec_push(ivec *v, long x) {
  if (v->size == v->cap) {
    long cap = v->cap * 2;
    long *d = realloc(v->data, (size_t)cap * sizeof(long));
    if (!d) abort();
    v->data = d;
    v->cap = cap;
  }
  v->data[v->size++] = x;
}

static ivec *ivec_copy(const ivec *v) {
  ivec *c = ivec_make(v->cap);
  memcpy(c->data, v->data, (size_t)v->size * sizeof(long));
  c->size = v->size;
  return c;
}

/* Steps from x to 1, or -1 if the sequence came out wrong. */
static long ivec_collatz(long x) {
  ivec *xs = ivec_make(4);
  ivec_push(xs, x);
  while (x > 1) {
    ivec *ys = ivec_copy(xs);
    ivec_free(xs);
    xs = ys;
    for (int i = 0; i < kExtendSteps && x > 1; i++) {
      x = collatz_next(x);
      ivec_push(xs, x);
    }
  }
  long steps = xs->size - 1;
  for (long i = 0; i < steps; i++)
    if (xs->data[i + 1] != collatz_next(xs->data[i])) steps = -1;
  if (xs->data[xs->size - 1] != 1) steps = -1;
  ivec_free(xs);
  return steps;
}

/* ---- list ---------------------------------------------------------------- */

typedef struct cell {
  long value;
  struct cell *next;
} cell;

static cell *cons(long value, cell *next) {
  cell *c = malloc(sizeof *c);
  if (!c) abort();
  c->value = value;
  c->next = next;
  return c;
}

static void list_free(cell *xs) {
  while (xs) {
    cell *n = xs->next;
    free(xs);
    xs = n;
  }
}

static cell *list_copy(const cell *xs) {
  cell *head = NULL, **tail = &head;
  for (; xs; xs = xs->next) {
    *tail = cons(xs->value, NULL);
    tail = &(*tail)->next;
  }
  return head;
}

static long list_collatz(long x) {
  cell *xs = cons(x, NULL);
  while (x > 1) {
    cell *ys = list_copy(xs);
    list_free(xs);
    xs = ys;
    for (int i = 0; i < kExtendSteps && x > 1; i++) {
      x = collatz_next(x);
      xs = cons(x, xs);
    }
  }
  long steps = 0;
  if (xs->value != 1) steps = -1;
  for (const cell *c = xs; c->next && steps >= 0; c = c->next, steps++)
    if (c->value != collatz_next(c->next->value)) steps = -1;
  list_free(xs);
  return steps;
}

/* ---- threads --------------------------------------------------------------- */

typedef struct job {
  int list;
  long first, stride, top;
  long steps; /* sum of the sequence lengths (steps) */
  long bad;   /* sequences that came out wrong */
  pthread_t thread;
} job;

static void *worker(void *arg) {
  job *j = arg;
  for (long x = j->first; x <= j->top; x += j->stride) {
    long s = j->list ? list_collatz(x) : ivec_collatz(x);
    if (s < 0)
      j->bad++;
    else
      j->steps += s;
  }
  return NULL;
}

int collatz_run(int list, long top, int threads, long *steps, long *bad) {
  job *jobs = calloc((size_t)threads, sizeof *jobs);
  if (!jobs) return -1;
  int started = 0, rc = 0;
  for (int t = 0; t < threads; t++) {
    jobs[t] = (job){list, t + 1, threads, top, 0, 0, 0};
    if (pthread_create(&jobs[t].thread, NULL, worker, &jobs[t]) != 0) {
      rc = -1;
      break;
    }
    started++;
  }
  *steps = 0;
  *bad = 0;
  for (int t = 0; t < started; t++) {
    pthread_join(jobs[t].thread, NULL);
    *steps += jobs[t].steps;
    *bad += jobs[t].bad;
  }
  free(jobs);
  return rc;
}

long collatz_reference(long top) {
  long steps = 0;
  for (long x = 1; x <= top; x++)
    for (long y = x; y > 1; y = collatz_next(y)) steps++;
  return steps;
}
