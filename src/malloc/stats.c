/* SPDX-License-Identifier: MIT */
/* stats.c - the general heap's run-time options and statistics.
 *
 * Options: one table of names and defaults; each is read once from the
 * environment variable of its name when the heap starts. Precedence:
 * built-in default < environment < ak_option_set(). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#include "malloc/malloc_internal.h"
#include "os/os_mem.h"

static const struct {
  const char *env;
  long def;
} option_table[AK_OPTION_COUNT_] = {
    [AK_OPTION_SHOW_STATS] = {"AK_SHOW_STATS", 0},
    [AK_OPTION_VERBOSE] = {"AK_VERBOSE", 0},
    [AK_OPTION_PURGE_DELAY] = {"AK_PURGE_DELAY", 10},
};

atomic_long _ak_options[AK_OPTION_COUNT_];
static atomic_bool options_set_by_api[AK_OPTION_COUNT_];

/* No malloc here: runs before the first heap exists. */
void _ak_options_init(void) {
  for (int i = 0; i < AK_OPTION_COUNT_; i++) {
    if (atomic_load(&options_set_by_api[i])) continue;
    long v = option_table[i].def;
    const char *s = getenv(option_table[i].env);
    if (s && *s) {
      char *end;
      long x = strtol(s, &end, 10);
      if (*end == '\0')
        v = x;
      else if (!strcmp(s, "true") || !strcmp(s, "yes") || !strcmp(s, "on"))
        v = 1;
      else if (!strcmp(s, "false") || !strcmp(s, "no") || !strcmp(s, "off"))
        v = 0;
    }
    atomic_store(&_ak_options[i], v);
  }
  if (atomic_load(&_ak_options[AK_OPTION_VERBOSE])) {
    char buf[200];
    int n =
        snprintf(buf, sizeof buf, "arenakit: options: AK_SHOW_STATS=%ld AK_VERBOSE=%ld AK_PURGE_DELAY=%ld\n",
                 atomic_load(&_ak_options[0]), atomic_load(&_ak_options[1]), atomic_load(&_ak_options[2]));
    if (n > 0) (void)!write(2, buf, (size_t)n);
  }
}

long ak_option_get(ak_option o) {
  if ((unsigned)o >= AK_OPTION_COUNT_) {
    errno = EINVAL;
    return 0;
  }
  _ak_malloc_tables_init();
  return atomic_load(&_ak_options[o]);
}

void ak_option_set(ak_option o, long value) {
  if ((unsigned)o >= AK_OPTION_COUNT_) {
    errno = EINVAL;
    return;
  }
  atomic_store(&options_set_by_api[o], true);
  atomic_store(&_ak_options[o], value);
}

static atomic_size_t peak_allocated;
static atomic_size_t small_sampled; /* small-block bytes at the last walk */

/* Live bytes in small segments plus large blocks (walks the registry). */
static size_t allocated_now(ak_malloc_stats *out) {
  size_t total = 0;
  pthread_mutex_lock(&_ak_seg_mu);
  for (ak_segment *s = _ak_seg_list; s; s = s->gnext) {
    if (s->kind != SEG_SMALL) continue; /* large blocks are counted apart */
    if (out) out->segments++;
    for (unsigned i = 0; i < NPAGES; i++) {
      ak_page *pg = &s->pages[i];
      /* Owners change these without our lock: relaxed atomic reads. */
      uint32_t bs = __atomic_load_n(&pg->block_size, __ATOMIC_RELAXED);
      if (__atomic_load_n(&pg->head_off, __ATOMIC_RELAXED) || !bs) continue;
      unsigned cls = __atomic_load_n(&pg->cls, __ATOMIC_RELAXED);
      size_t live = _ak_used(pg);
      total += live * bs;
      if (out && cls < NCLS) {
        out->class_blocks[cls] += live;
        out->class_pages[cls]++;
      }
    }
    if (out) out->resident += _ak_os_resident(s, SEG_SIZE);
  }
  pthread_mutex_unlock(&_ak_seg_mu);
  return total + atomic_load(&_ak_large_bytes);
}

static void peak_raise(size_t now) {
  size_t peak = atomic_load(&peak_allocated);
  while (now > peak && !atomic_compare_exchange_weak(&peak_allocated, &peak, now)) {
  }
}

void _ak_peak_sample(void) {
  size_t large = atomic_load(&_ak_large_bytes);
  size_t now = allocated_now(NULL);
  atomic_store_explicit(&small_sampled, now > large ? now - large : 0, memory_order_relaxed);
  peak_raise(now);
}

void _ak_peak_note_large(void) {
  peak_raise(atomic_load_explicit(&small_sampled, memory_order_relaxed) +
             atomic_load_explicit(&_ak_large_bytes, memory_order_relaxed));
}

void ak_malloc_stats_get(ak_malloc_stats *out) {
  if (!out) return;
  _ak_malloc_tables_init();
  memset(out, 0, sizeof *out);
  out->version = AK_MALLOC_STATS_VERSION;
  out->nclasses = NCLS;
  for (unsigned c = 0; c < NCLS; c++) out->class_size[c] = _ak_cls_size[c];
  out->allocated = allocated_now(out);
  _ak_peak_sample();
  out->peak_allocated = atomic_load(&peak_allocated);
  if (out->peak_allocated < out->allocated) out->peak_allocated = out->allocated;
  out->committed = atomic_load(&_ak_committed);
  out->peak_committed = atomic_load(&_ak_peak_committed);
  out->large_blocks = atomic_load(&_ak_large_count);
  out->large_bytes = atomic_load(&_ak_large_bytes);
  pthread_mutex_lock(&_ak_heaps_mu);
  for (ak_mheap *h = _ak_heap_list; h; h = h->gnext) out->heaps++;
  pthread_mutex_unlock(&_ak_heaps_mu);
  pthread_mutex_lock(&_ak_abandoned_mu);
  for (ak_segment *s = _ak_abandoned; s; s = s->next) out->abandoned++;
  pthread_mutex_unlock(&_ak_abandoned_mu);
}

int ak_malloc_stats_print(FILE *f) {
  if (!f) {
    errno = EINVAL;
    return -1;
  }
  static ak_malloc_stats s; /* big: not on the stack of an exiting thread */
  ak_malloc_stats_get(&s);
  int saved = errno;
  errno = 0; /* what stdio sets below is the failure's cause */
  int rc = fprintf(f,
                   "arenakit malloc: allocated %zu B (peak %zu), committed %zu B (peak %zu), resident %zu B\n"
                   "  segments %zu, large blocks %zu (%zu B), heaps %zu, abandoned segments %zu\n"
                   "  class    size      blocks   pages\n",
                   s.allocated, s.peak_allocated, s.committed, s.peak_committed, s.resident, s.segments,
                   s.large_blocks, s.large_bytes, s.heaps, s.abandoned);
  for (size_t c = 0; rc >= 0 && c < s.nclasses; c++)
    if (s.class_pages[c])
      rc = fprintf(f, "  %5zu %7zu %11zu %7zu\n", c, s.class_size[c], s.class_blocks[c], s.class_pages[c]);
  /* A buffered stream fails only when it is flushed (a full disk,
   * /dev/full): flush, then ask the stream whether any write failed. */
  if (rc >= 0 && fflush(f) == 0 && !ferror(f)) {
    errno = saved;
    return 0;
  }
  int err = errno ? errno : EIO;
  _ak_error(err, "ak_malloc_stats_print: writing the statistics failed: %s", strerror(err));
  return -1;
}

static void print_at_exit(void) {
  if (atomic_load(&_ak_options[AK_OPTION_SHOW_STATS])) (void)ak_malloc_stats_print(stderr);
}

void _ak_stats_at_exit(void) { (void)atexit(print_at_exit); }
