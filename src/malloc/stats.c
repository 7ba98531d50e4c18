/* SPDX-License-Identifier: MIT */
/* stats.c - the general heap's statistics (the options are options.c's).
 *
 * Statistics: ak_malloc_stats_get fills the public struct (registry.c's
 * walk and counts); _ak_stats_extra_get adds what it does not hold (live
 * blocks of every kind, the spans' pages, the cumulative counts, the
 * caches, the kernel's resident-set figures), for the report and
 * ak_malloc_stat (stat_named.c) alike. One formatter
 * writes it in human units (or as JSON) into a buffer, which
 * ak_malloc_stats_print hands to a stdio stream and the AK_SHOW_STATS exit
 * report writes with write(2) (stdio may be closed or torn down at exit).
 *
 * Which processes report: every process that started the heap, once, at
 * its exit (a forked child that exits through exit() too, its header
 * saying which process it was forked from; one that execs reports as the
 * new program): a wrapper (`time prog`, a shell) and the program it runs
 * each print their own report, headed by their names.
 *
 * Where the report goes: the file of file:PATH / json:PATH ("%p" = the
 * pid), else stderr. A report that cannot be written there (stderr closed,
 * as `sort` closes it at exit, or not writable; the file not openable) is
 * never lost silently: it goes to arenakit-stats.<pid>.txt in the current
 * directory (else in $TMPDIR, else /tmp), and a line saying where goes to
 * the next channel that takes it: stderr, else the terminal (/dev/tty). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "common/error.h"
#include "malloc/malloc_internal.h"
#include "malloc/stats_internal.h"
#include "os/os_mem.h"

/* When and in which process the heap started (the exit report's header). */
static struct timespec heap_started;
static pid_t heap_pid;

/* Memory for the report's buffers, mapped when first needed and kept (no
 * malloc: they serve the exit report). NULL when the system has none. */
static void *report_map(size_t size) { return _ak_os_alloc(size, 1); }

void ak_malloc_stats_get(ak_malloc_stats *out) {
  if (!out) return;
  _ak_size_classes_init(); /* the class sizes below */
  memset(out, 0, sizeof *out);
  out->version = AK_MALLOC_STATS_VERSION;
  out->nclasses = AK_NCLS;
  for (unsigned c = 0; c < AK_NCLS; c++) out->class_size[c] = _ak_cls_size[c];
  out->allocated = _ak_allocated_walk(out);
  _ak_peak_sample();
  out->peak_allocated = _ak_peak_allocated();
  if (out->peak_allocated < out->allocated) out->peak_allocated = out->allocated;
  out->committed = atomic_load(&_ak_committed);
  out->peak_committed = atomic_load(&_ak_peak_committed);
  out->large_blocks = atomic_load(&_ak_large_count);
  out->large_bytes = atomic_load(&_ak_large_bytes);
  pthread_mutex_lock(&_ak_heaps_mu);
  out->heaps = _ak_heap_list.n;
  pthread_mutex_unlock(&_ak_heaps_mu);
  pthread_mutex_lock(&_ak_abandoned_mu);
  out->abandoned = _ak_abandoned.n;
  pthread_mutex_unlock(&_ak_abandoned_mu);
}

/* "Name:   123 kB" in the text of /proc/self/status: the bytes, or 0. */
static size_t status_kib(const char *text, const char *name) {
  const char *at = strstr(text, name);
  if (!at) return 0;
  return (size_t)strtoull(at + strlen(name), NULL, 10) * 1024;
}

/* The kernel's view of this process: resident set now (VmRSS) and its
 * high-water mark (VmHWM) from /proc/self/status, with getrusage's
 * ru_maxrss when that file cannot be read; the peak is never below the
 * current figure. 0 for what the system does not give. Allocates nothing. */
static void process_rss(size_t *rss, size_t *peak_rss) {
  *rss = 0;
  *peak_rss = 0;
  char text[4096];
  int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n > 0) {
      text[n] = '\0';
      *rss = status_kib(text, "\nVmRSS:");
      *peak_rss = status_kib(text, "\nVmHWM:");
    }
  }
  struct rusage ru;
  if (!*peak_rss && getrusage(RUSAGE_SELF, &ru) == 0) *peak_rss = (size_t)ru.ru_maxrss * 1024; /* KiB */
  if (*peak_rss < *rss) *peak_rss = *rss; /* the two reads are not one instant */
}

/* What the public struct does not hold: live blocks of every kind (solo
 * spans included) and the bytes of the spans in use, small segments only. */
static void walk_spans(uint64_t *live, uint64_t *span_bytes) {
  uint64_t n = 0, bytes = 0;
  pthread_mutex_lock(&_ak_seg_mu);
  for (_ak_dnode *d = _ak_seg_list.head; d; d = d->next) {
    _ak_segment *s = _ak_seg_gat(d);
    if (s->kind != AK_SEG_SMALL) continue;
    for (uint64_t m = _ak_seg_carved(s); m; m &= m - 1) {
      _ak_page *pg = &s->pages[__builtin_ctzll(m)];
      /* Owners change these without our lock: relaxed atomic reads. */
      if (__atomic_load_n(&pg->head_off, __ATOMIC_RELAXED) ||
          !__atomic_load_n(&pg->block_size, __ATOMIC_RELAXED))
        continue;
      n += _ak_used(pg);
      bytes += (uint64_t)__atomic_load_n(&pg->span, __ATOMIC_RELAXED) * AK_PAGE_SIZE;
    }
  }
  pthread_mutex_unlock(&_ak_seg_mu);
  *live = n;
  *span_bytes = bytes;
}

void _ak_stats_extra_get(const ak_malloc_stats *s, _ak_stats_extra *x) {
  uint64_t live_small, span_bytes;
  walk_spans(&live_small, &span_bytes);
  _ak_heap_totals(&x->allocations, &x->bytes_allocated);
  _ak_large_cache_bytes(&x->cached, &x->cached_committed);
  _ak_segment_spare_bytes(&x->spare, &x->spare_committed);
  process_rss(&x->rss, &x->peak_rss);
  x->live_blocks = live_small + s->large_blocks;
  /* other threads' counts lag (as of their last slow path): never below 0 */
  x->frees = x->allocations > x->live_blocks ? x->allocations - x->live_blocks : 0;
  x->active = span_bytes + s->large_bytes;
  x->mapped = (uint64_t)s->segments * AK_SEG_SIZE + x->spare + s->large_bytes + x->cached;
}

/* ---- the report ----------------------------------------------------------------- */

/* Appends to a fixed buffer; text past its end is cut (len stays <= cap-1). */
typedef struct report {
  char *buf;
  size_t len, cap;
} report;

AK_PRINTF(2, 3) static void put(report *r, const char *fmt, ...) {
  if (r->len + 1 >= r->cap) return;
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(r->buf + r->len, r->cap - r->len, fmt, ap);
  va_end(ap);
  if (k > 0) r->len += (size_t)k < r->cap - r->len ? (size_t)k : r->cap - r->len - 1;
}

/* The kernel's view of this process: resident set now and at its peak
 * (VmRSS, VmHWM: process_rss), minor and major faults (getrusage). */
typedef struct process_mem {
  size_t rss, peak_rss;
  long minor_faults, major_faults;
} process_mem;

static void process_mem_get(process_mem *m, const _ak_stats_extra *x) {
  memset(m, 0, sizeof *m);
  m->rss = x->rss;
  m->peak_rss = x->peak_rss;
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) == 0) {
    m->minor_faults = ru.ru_minflt;
    m->major_faults = ru.ru_majflt;
  }
}

/* The totals in human units, each line saying what its figure is. */
static void format_totals(report *r, const ak_malloc_stats *s, const _ak_stats_extra *x,
                          const process_mem *m) {
  char a[AK_BYTES_TEXT], b[AK_BYTES_TEXT], c[AK_BYTES_TEXT], d[AK_BYTES_TEXT];
  put(r, "  allocated     %-10s (peak %s) in live blocks\n", _ak_format_bytes(a, s->allocated),
      _ak_format_bytes(b, s->peak_allocated));
  put(r, "  committed     %-10s (peak %s) mapped and not given back to the OS\n",
      _ak_format_bytes(a, s->committed), _ak_format_bytes(b, s->peak_committed));
  put(r, "  resident      %-10s of arenakit's segments in RAM (as mincore(2) reports)\n",
      _ak_format_bytes(a, s->resident));
  if (m->rss)
    put(r, "  process RSS   %-10s (peak %s, kernel)\n", _ak_format_bytes(a, m->rss),
        _ak_format_bytes(b, m->peak_rss));
  else
    put(r, "  process RSS   peak %s (kernel)\n", _ak_format_bytes(b, m->peak_rss));
  put(r, "  page faults   %ld minor, %ld major\n", m->minor_faults, m->major_faults);
  put(r, "  allocations   %llu (%s asked for), frees %llu, live blocks %llu\n",
      (unsigned long long)x->allocations, _ak_format_bytes(a, (size_t)x->bytes_allocated),
      (unsigned long long)x->frees, (unsigned long long)x->live_blocks);
  put(r, "  segments %zu (%s), spare %s, large blocks %zu (%s), large cache %s\n", s->segments,
      _ak_format_bytes(a, s->segments * AK_SEG_SIZE), _ak_format_bytes(b, x->spare), s->large_blocks,
      _ak_format_bytes(c, s->large_bytes), _ak_format_bytes(d, x->cached));
  put(r, "  thread heaps %zu, abandoned segments %zu (%s)\n", s->heaps, s->abandoned,
      _ak_format_bytes(a, s->abandoned * AK_SEG_SIZE));
}

/* The statistics in human units: totals, the kernel's figures, one line
 * per size class in use, then a legend of the words above. */
static void format_text(report *r, const ak_malloc_stats *s, const _ak_stats_extra *x, const process_mem *m) {
  char a[AK_BYTES_TEXT], b[AK_BYTES_TEXT];
  format_totals(r, s, x, m);
  bool any = false;
  for (size_t c = 0; c < s->nclasses; c++) {
    if (!s->class_pages[c]) continue;
    if (!any) put(r, "  size class  block size  live blocks  spans  span memory\n");
    any = true;
    put(r, "  %10zu  %10s  %11zu  %5zu  %11s\n", c, _ak_format_bytes(a, s->class_size[c]), s->class_blocks[c],
        s->class_pages[c], _ak_format_bytes(b, s->class_pages[c] * _ak_cls_span[c] * AK_PAGE_SIZE));
  }
  put(r,
      "  (segment: 4 MiB of address space cut into 64 KiB pages; span: 1 to %d such pages holding blocks of\n"
      "  one size class; spare: empty segments kept for reuse; large blocks: above ~4 MiB, mapped one by "
      "one;\n"
      "  abandoned segments: those of threads that exited, with live blocks, until a thread adopts them)\n",
      AK_SPAN_PAGES_MAX);
}

/* The program's name as a JSON string body (quotes and controls escaped). */
static void put_json_string(report *r, const char *t) {
  put(r, "\"");
  for (; *t; t++) {
    unsigned char ch = (unsigned char)*t;
    if (ch == '"' || ch == '\\')
      put(r, "\\%c", ch);
    else if (ch < 0x20)
      put(r, "\\u%04x", ch);
    else
      put(r, "%c", ch);
  }
  put(r, "\"");
}

/* The same figures as one JSON object on one line; bytes are plain
 * integers (docs/stats.md lists the keys). */
static void format_json(report *r, const ak_malloc_stats *s, const _ak_stats_extra *x, const process_mem *m,
                        double elapsed) {
  put(r, "{\"program\":");
  put_json_string(r, program_invocation_short_name);
  put(r,
      ",\"pid\":%ld,\"elapsed_s\":%.6f,\"allocated\":%zu,\"peak_allocated\":%zu,\"committed\":%zu,"
      "\"peak_committed\":%zu,\"resident\":%zu,\"process_rss\":%zu,\"process_peak_rss\":%zu,"
      "\"minor_faults\":%ld,\"major_faults\":%ld,\"segments\":%zu,\"large_blocks\":%zu,\"large_bytes\":%zu,"
      "\"heaps\":%zu,\"abandoned_segments\":%zu,",
      (long)getpid(), elapsed, s->allocated, s->peak_allocated, s->committed, s->peak_committed, s->resident,
      m->rss, m->peak_rss, m->minor_faults, m->major_faults, s->segments, s->large_blocks, s->large_bytes,
      s->heaps, s->abandoned);
  put(r,
      "\"allocations\":%llu,\"frees\":%llu,\"bytes_allocated\":%llu,\"live_blocks\":%llu,\"active\":%llu,"
      "\"mapped\":%llu,\"spare_segments_bytes\":%zu,\"large_cached\":%zu,\"classes\":[",
      (unsigned long long)x->allocations, (unsigned long long)x->frees,
      (unsigned long long)x->bytes_allocated, (unsigned long long)x->live_blocks,
      (unsigned long long)x->active, (unsigned long long)x->mapped, x->spare, x->cached);
  const char *sep = "";
  for (size_t c = 0; c < s->nclasses; c++) {
    if (!s->class_pages[c]) continue;
    put(r, "%s{\"class\":%zu,\"block_size\":%zu,\"live_blocks\":%zu,\"pages\":%zu,\"span_bytes\":%zu}", sep,
        c, s->class_size[c], s->class_blocks[c], s->class_pages[c],
        s->class_pages[c] * _ak_cls_span[c] * AK_PAGE_SIZE);
    sep = ",";
  }
  put(r, "]}\n");
}

/* One report at a time: the snapshot and the text are big (not on the stack
 * of an exiting thread) and shared, mapped at the first report
 * (report_map). */
static pthread_mutex_t report_mu = PTHREAD_MUTEX_INITIALIZER;
typedef struct report_bufs {
  ak_malloc_stats stats;
  _ak_stats_extra extra;
  char text[16384];
} report_bufs;
static report_bufs *report_bufs_ptr;

/* Under report_mu: the report's buffers (NULL, errno ENOMEM, if they
 * cannot be mapped). */
static report_bufs *report_bufs_get(void) {
  if (!report_bufs_ptr) report_bufs_ptr = report_map(sizeof(report_bufs));
  return report_bufs_ptr;
}

int ak_malloc_stats_print(FILE *f) {
  if (!f) {
    errno = EINVAL;
    return -1;
  }
  pthread_mutex_lock(&report_mu);
  report_bufs *b = report_bufs_get();
  if (!b) {
    pthread_mutex_unlock(&report_mu);
    _ak_error(ENOMEM, "ak_malloc_stats_print: no memory for the report's buffers");
    return -1;
  }
  ak_malloc_stats_get(&b->stats);
  _ak_stats_extra_get(&b->stats, &b->extra);
  process_mem m;
  process_mem_get(&m, &b->extra);
  report r = {b->text, 0, sizeof b->text};
  put(&r, "arenakit malloc:\n");
  format_text(&r, &b->stats, &b->extra, &m);
  int saved = errno;
  errno = 0; /* what stdio sets below is the failure's cause */
  size_t wrote = fwrite(r.buf, 1, r.len, f);
  pthread_mutex_unlock(&report_mu);
  /* A buffered stream fails only when it is flushed (a full disk,
   * /dev/full): flush, then ask the stream whether any write failed. */
  if (wrote == r.len && fflush(f) == 0 && !ferror(f)) {
    errno = saved;
    return 0;
  }
  int err = errno ? errno : EIO;
  _ak_error(err, "ak_malloc_stats_print: writing the statistics failed: %s", strerror(err));
  return -1;
}

/* The report's path (AK_SHOW_STATS=file:PATH / json:PATH, options.c) with
 * each "%p" replaced by the pid (one file per process). */
static void expand_path(char *out, size_t cap, long pid) {
  report r = {out, 0, cap};
  for (const char *t = _ak_options_report_path(); *t; t++) {
    if (t[0] == '%' && t[1] == 'p') {
      put(&r, "%ld", pid);
      t++;
    } else {
      put(&r, "%c", *t);
    }
  }
}

/* True if `fd` is open for writing. */
static bool fd_writable(int fd) {
  int fl = fcntl(fd, F_GETFL);
  return fl >= 0 && (fl & O_ACCMODE) != O_RDONLY;
}

/* Writes the report to `fd`; SIGPIPE (a reader that went away) is held
 * back and discarded, so a failed write is a return value, not the end of
 * the process. 0, or -1 with errno. */
static int write_report(int fd, const char *buf, size_t n) {
  sigset_t pipe_only, old;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
  int rc = _ak_write_all(fd, buf, n);
  int e = errno;
  if (rc != 0 && e == EPIPE && !sigismember(&old, SIGPIPE)) {
    struct timespec none = {0, 0};
    (void)sigtimedwait(&pipe_only, NULL, &none); /* the one this write raised */
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  errno = e;
  return rc;
}

/* The fallback: arenakit-stats.<pid>.txt in the current directory, else
 * $TMPDIR, else /tmp. The descriptor (its path in `path`), or -1. */
static int open_fallback(char *path, size_t cap, long pid) {
  const char *tmp = getenv("TMPDIR");
  const char *dirs[] = {".", tmp && *tmp ? tmp : "/tmp", "/tmp"};
  for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
    report r = {path, 0, cap};
    put(&r, "%s/arenakit-stats.%ld.txt", dirs[i], pid);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) return fd;
  }
  return -1;
}

/* A line to the first channel that takes it: stderr, else the terminal. */
static void tell(const char *line, size_t n) {
  if (fd_writable(2) && write_report(2, line, n) == 0) return;
  int tty = open("/dev/tty", O_WRONLY | O_NOCTTY | O_CLOEXEC);
  if (tty < 0) return;
  (void)write_report(tty, line, n);
  close(tty);
}

/* Under report_mu: writes the finished report to where it was asked for
 * (see the top of this file), or to the fallback file. */
static void deliver(const char *text, size_t n, long pid) {
  char path[PATH_MAX];
  if (_ak_options_report_path()[0]) {
    expand_path(path, sizeof path, pid);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
      _ak_warn("AK_SHOW_STATS: cannot open %s: %s; the report goes to stderr", path, strerror(errno));
    } else {
      int rc = write_report(fd, text, n);
      int e = errno;
      close(fd);
      if (rc == 0) return;
      _ak_warn("AK_SHOW_STATS: cannot write %s: %s; the report goes to stderr", path, strerror(e));
    }
  }
  if (fd_writable(2) && write_report(2, text, n) == 0) return;
  int fd = open_fallback(path, sizeof path, pid);
  if (fd < 0) return; /* nowhere left to write */
  int rc = write_report(fd, text, n);
  close(fd);
  char line[PATH_MAX + 96];
  report r = {line, 0, sizeof line};
  if (rc == 0)
    put(&r, "arenakit: AK_SHOW_STATS: stderr is closed; the report of pid %ld is in %s\n", pid, path);
  else
    put(&r, "arenakit: AK_SHOW_STATS: stderr is closed and %s cannot be written\n", path);
  tell(r.buf, r.len);
}

/* The AK_SHOW_STATS report of this process (see the top of this file),
 * headed by the program's name and pid. */
static void print_at_exit(void) {
  long form = atomic_load(&_ak_options[AK_OPTION_SHOW_STATS]);
  if (form == AK_SHOW_STATS_OFF) return;
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  double elapsed =
      (double)(now.tv_sec - heap_started.tv_sec) + (double)(now.tv_nsec - heap_started.tv_nsec) / 1e9;
  long pid = (long)getpid();
  pthread_mutex_lock(&report_mu);
  report_bufs *b = report_bufs_get();
  if (!b) {
    pthread_mutex_unlock(&report_mu);
    _ak_warn("AK_SHOW_STATS: no memory for the report's buffers; no report");
    return;
  }
  ak_malloc_stats_get(&b->stats);
  _ak_stats_extra_get(&b->stats, &b->extra);
  process_mem m;
  process_mem_get(&m, &b->extra);
  report r = {b->text, 0, sizeof b->text};
  if (form == AK_SHOW_STATS_JSON) {
    format_json(&r, &b->stats, &b->extra, &m, elapsed);
  } else {
    put(&r, "arenakit: %s (pid %ld", program_invocation_short_name, pid);
    if (pid != (long)heap_pid) put(&r, ", forked from pid %ld", (long)heap_pid);
    put(&r, "): heap statistics at exit, %.3f s after the heap started\n", elapsed);
    format_text(&r, &b->stats, &b->extra, &m);
  }
  deliver(r.buf, r.len, pid);
  pthread_mutex_unlock(&report_mu);
}

void _ak_stats_at_exit(void) {
  clock_gettime(CLOCK_MONOTONIC, &heap_started);
  heap_pid = getpid();
  (void)atexit(print_at_exit);
}
