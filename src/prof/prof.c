/* SPDX-License-Identifier: MIT */
/* prof.c - the heap profiler's state and public API: options (one table,
 * read from the environment once at load; default < environment <
 * ak_prof_option_set), start and stop (the generation word of sample.h),
 * dumps on demand, at exit and at intervals, the stats, fork.
 *
 * Fork: the prepare step takes ctl_mu, dump_mu and mu in their order, the
 * parent and the child release them. The child keeps the parent's profile:
 * its heap is a copy of the parent's, sampled blocks included, and their
 * frees in the child find their records. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/assert.h"
#include "common/error.h"
#include "prof/prof_internal.h"

_ak_prof_global _ak_prof_g = {
    .ctl_mu = PTHREAD_MUTEX_INITIALIZER,
    .dump_mu = PTHREAD_MUTEX_INITIALIZER,
/* Adaptive where glibc has it: a thread that finds `mu` held spins a
 * little before it sleeps. Its critical sections (a record, a forget) are
 * short, and threads that sample at the same rate meet on it. */
#ifdef PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP
    .mu = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP,
#else
    .mu = PTHREAD_MUTEX_INITIALIZER,
#endif
    .period = AK_PROF_DEFAULT_SAMPLE,
    .stack_method = AK_PROF_STACK_UNWIND,
};

static const struct {
  const char *env;
  long def, min, max;
} option_table[AK_PROF_OPTION_COUNT_] = {
    [AK_PROF_OPTION_SAMPLE] = {"AK_PROF_SAMPLE", AK_PROF_DEFAULT_SAMPLE, 1, AK_PROF_MAX_SAMPLE},
    [AK_PROF_OPTION_INTERVAL] = {"AK_PROF_INTERVAL", 0, 0, AK_PROF_MAX_SAMPLE * 1024},
    [AK_PROF_OPTION_STACK] = {"AK_PROF_STACK", AK_PROF_STACK_UNWIND, AK_PROF_STACK_UNWIND, AK_PROF_STACK_FP},
};

static long option_value[AK_PROF_OPTION_COUNT_] = {AK_PROF_DEFAULT_SAMPLE, 0, AK_PROF_STACK_UNWIND};

/* ---- the generation ------------------------------------------------------------- */

/* A new generation, on or off (under ctl_mu). */
static void bump_generation(bool on) {
  uint64_t g = __atomic_load_n(&_ak_prof_gen, __ATOMIC_RELAXED);
  __atomic_store_n(&_ak_prof_gen, ((g >> 1) + 1) << 1 | (on ? 1u : 0u), __ATOMIC_RELEASE);
}

/* ---- options ---------------------------------------------------------------------- */

static void apply_option(ak_prof_option o, long v) {
  __atomic_store_n(&option_value[o], v, __ATOMIC_RELAXED);
  switch (o) {
    case AK_PROF_OPTION_SAMPLE:
      __atomic_store_n(&_ak_prof_g.period, (uint64_t)v, __ATOMIC_RELAXED);
      bump_generation(_ak_prof_is_on());
      break;
    case AK_PROF_OPTION_INTERVAL:
      pthread_mutex_lock(&_ak_prof_g.mu);
      __atomic_store_n(&_ak_prof_g.interval, (uint64_t)v, __ATOMIC_RELAXED);
      __atomic_store_n(&_ak_prof_g.next_dump, _ak_prof_g.t.inuse_bytes + (uint64_t)v, __ATOMIC_RELAXED);
      pthread_mutex_unlock(&_ak_prof_g.mu);
      break;
    default: break; /* AK_PROF_OPTION_STACK: taken at the next start */
  }
}

long ak_prof_option_get(ak_prof_option o) {
  if ((unsigned)o >= AK_PROF_OPTION_COUNT_) {
    _ak_error(EINVAL, "ak_prof_option_get: unknown option %d", (int)o);
    return -1;
  }
  return __atomic_load_n(&option_value[o], __ATOMIC_RELAXED);
}

int ak_prof_option_set(ak_prof_option o, long value) {
  if ((unsigned)o >= AK_PROF_OPTION_COUNT_) {
    _ak_error(EINVAL, "ak_prof_option_set: unknown option %d", (int)o);
    return -1;
  }
  if (value < option_table[o].min || value > option_table[o].max) {
    _ak_error(EINVAL, "ak_prof_option_set: %s = %ld is out of range [%ld, %ld]", option_table[o].env, value,
              option_table[o].min, option_table[o].max);
    return -1;
  }
  pthread_mutex_lock(&_ak_prof_g.ctl_mu);
  apply_option(o, value);
  pthread_mutex_unlock(&_ak_prof_g.ctl_mu);
  return 0;
}

/* A decimal integer in [min, max] and nothing else; AK_PROF_STACK also
 * takes "unwind" and "fp". */
static bool parse_option(ak_prof_option o, const char *s, long *out) {
  if (o == AK_PROF_OPTION_STACK && (strcmp(s, "unwind") == 0 || strcmp(s, "fp") == 0)) {
    *out = s[0] == 'f' ? AK_PROF_STACK_FP : AK_PROF_STACK_UNWIND;
    return true;
  }
  char *end;
  errno = 0;
  long x = strtol(s, &end, 10);
  if (end == s || *end != '\0' || errno == ERANGE || x < option_table[o].min || x > option_table[o].max)
    return false;
  *out = x;
  return true;
}

static void read_environment(void) {
  for (int o = 0; o < AK_PROF_OPTION_COUNT_; o++) {
    const char *s = getenv(option_table[o].env);
    long v;
    if (!s) continue;
    if (parse_option((ak_prof_option)o, s, &v))
      apply_option((ak_prof_option)o, v);
    else
      _ak_warn("%s=%s is not valid (a number in [%ld, %ld]%s); the default is kept", option_table[o].env, s,
               option_table[o].min, option_table[o].max, o == AK_PROF_OPTION_STACK ? ", unwind or fp" : "");
  }
  const char *dump = getenv("AK_PROF_DUMP");
  if (dump && ak_prof_set_dump_path(dump) != 0) _ak_warn("AK_PROF_DUMP: %s", ak_last_error());
}

/* ---- start, stop ------------------------------------------------------------------ */

int ak_prof_start(void) {
  pthread_mutex_lock(&_ak_prof_g.ctl_mu);
  _ak_prof_self.busy++; /* the unwinder's dlopen allocates */
  int method = _ak_prof_stack_setup((int)option_value[AK_PROF_OPTION_STACK]);
  _ak_prof_self.busy--;
  __atomic_store_n(&_ak_prof_g.stack_method, method, __ATOMIC_RELAXED);
  int rc = 0;
  pthread_mutex_lock(&_ak_prof_g.mu);
  if (!_ak_prof_g.t.ready) rc = _ak_prof_tables_init(&_ak_prof_g.t, &_ak_prof_g.limits);
  uint64_t next = _ak_prof_g.t.inuse_bytes + __atomic_load_n(&_ak_prof_g.interval, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&_ak_prof_g.mu);
  if (rc == 0) {
    __atomic_store_n(&_ak_prof_g.next_dump, next, __ATOMIC_RELAXED);
    _ak_prof_g.ever_started = true;
    bump_generation(true);
  }
  pthread_mutex_unlock(&_ak_prof_g.ctl_mu);
  if (rc != 0) _ak_error(ENOMEM, "ak_prof_start: no memory for the profiler's tables");
  return rc;
}

int ak_prof_stop(void) {
  pthread_mutex_lock(&_ak_prof_g.ctl_mu);
  if (_ak_prof_is_on()) bump_generation(false);
  pthread_mutex_unlock(&_ak_prof_g.ctl_mu);
  return 0;
}

bool ak_prof_active(void) { return _ak_prof_is_on(); }

/* ---- dumps ------------------------------------------------------------------------------ */

bool _ak_prof_expand_path(const char *pattern, char *out, size_t cap) {
  size_t n = 0;
  for (const char *p = pattern; *p; p++) {
    char pid[24];
    const char *add = p;
    size_t len = 1;
    if (p[0] == '%' && p[1] == 'p') {
      len = (size_t)snprintf(pid, sizeof pid, "%d", (int)getpid());
      add = pid;
      p++;
    }
    if (n + len >= cap) return false;
    memcpy(out + n, add, len);
    n += len;
  }
  out[n] = '\0';
  return true;
}

int ak_prof_dump(const char *path) {
  char full[AK_PROF_PATH_MAX];
  if (!path || !*path || !_ak_prof_expand_path(path, full, sizeof full)) {
    _ak_error(EINVAL, "ak_prof_dump: %s", !path || !*path ? "no path" : "the path is too long");
    return -1;
  }
  return _ak_prof_write("ak_prof_dump", full);
}

int ak_prof_set_dump_path(const char *path) {
  if (path && (!*path || strlen(path) >= AK_PROF_PATH_MAX)) {
    _ak_error(EINVAL, "ak_prof_set_dump_path: %s", *path ? "the path is too long" : "empty path");
    return -1;
  }
  pthread_mutex_lock(&_ak_prof_g.ctl_mu);
  strcpy(_ak_prof_g.dump_path, path ? path : "");
  pthread_mutex_unlock(&_ak_prof_g.ctl_mu);
  return 0;
}

/* Writes a dump to the dump path (or the default pattern) with `suffix`
 * (e.g. ".0003"); failures are counted and the first one reported. */
static void dump_to_path(const char *what, const char *suffix) {
  static bool warned;
  char pattern[AK_PROF_PATH_MAX + 16], full[AK_PROF_PATH_MAX];
  pthread_mutex_lock(&_ak_prof_g.ctl_mu);
  snprintf(pattern, sizeof pattern, "%s%s", _ak_prof_g.dump_path[0] ? _ak_prof_g.dump_path : "ak-heap.%p.pb",
           suffix);
  pthread_mutex_unlock(&_ak_prof_g.ctl_mu);
  int saved = errno;
  if (!_ak_prof_expand_path(pattern, full, sizeof full) || _ak_prof_write(what, full) != 0) {
    __atomic_add_fetch(&_ak_prof_g.dump_errors, 1, __ATOMIC_RELAXED);
    if (!__atomic_exchange_n(&warned, true, __ATOMIC_RELAXED)) _ak_warn("%s", ak_last_error());
  }
  errno = saved;
}

void _ak_prof_interval_check(uint64_t inuse) {
  uint64_t interval = __atomic_load_n(&_ak_prof_g.interval, __ATOMIC_RELAXED);
  uint64_t next = __atomic_load_n(&_ak_prof_g.next_dump, __ATOMIC_RELAXED);
  if (interval == 0 || inuse < next) return;
  if (!__atomic_compare_exchange_n(&_ak_prof_g.next_dump, &next, inuse + interval, false, __ATOMIC_RELAXED,
                                   __ATOMIC_RELAXED))
    return; /* another thread writes this one */
  char suffix[16];
  snprintf(suffix, sizeof suffix, ".%04u", __atomic_add_fetch(&_ak_prof_g.dump_seq, 1, __ATOMIC_RELAXED));
  dump_to_path("AK_PROF_INTERVAL dump", suffix);
}

/* ---- stats ---------------------------------------------------------------------------------- */

void ak_prof_stats_get(ak_prof_stats *out) {
  if (!out) {
    _ak_error(EINVAL, "ak_prof_stats_get: out is NULL");
    return;
  }
  memset(out, 0, sizeof *out);
  out->version = AK_PROF_STATS_VERSION;
  out->active = _ak_prof_is_on();
  out->stack_method = __atomic_load_n(&_ak_prof_g.stack_method, __ATOMIC_RELAXED);
  out->sample_bytes = __atomic_load_n(&_ak_prof_g.period, __ATOMIC_RELAXED);
  out->dumps = __atomic_load_n(&_ak_prof_g.dumps, __ATOMIC_RELAXED);
  out->dump_errors = __atomic_load_n(&_ak_prof_g.dump_errors, __ATOMIC_RELAXED);
  pthread_mutex_lock(&_ak_prof_g.mu);
  const _ak_prof_tables *t = &_ak_prof_g.t;
  out->samples = t->samples;
  out->live_samples = t->live;
  out->stacks = t->stacks;
  out->frames = t->frames.n ? t->frames.n - 1 : 0;
  out->nodes = t->nodes.n ? t->nodes.n - 1 : 0;
  out->labels = t->nlabels;
  out->dropped_stacks = t->dropped_stacks;
  out->dropped_live = t->dropped_live;
  out->dropped_labels = t->dropped_labels;
  out->unknown_frees = t->unknown_frees;
  out->inuse_bytes = t->inuse_bytes;
  out->alloc_bytes = t->alloc_bytes;
  out->memory = _ak_prof_mapped() + _ak_prof_cfi_memory();
  pthread_mutex_unlock(&_ak_prof_g.mu);
}

/* ---- fork, load, exit ------------------------------------------------------------------------- */

static void fork_prepare(void) {
  pthread_mutex_lock(&_ak_prof_g.ctl_mu);
  pthread_mutex_lock(&_ak_prof_g.dump_mu);
  pthread_mutex_lock(&_ak_prof_g.mu);
}

static void fork_release(void) {
  pthread_mutex_unlock(&_ak_prof_g.mu);
  pthread_mutex_unlock(&_ak_prof_g.dump_mu);
  pthread_mutex_unlock(&_ak_prof_g.ctl_mu);
}

__attribute__((constructor(AK_CTOR_PROF))) static void prof_load(void) {
  (void)pthread_atfork(fork_prepare, fork_release, fork_release);
  read_environment();
  const char *on = getenv("AK_PROF");
  if (on && strcmp(on, "1") == 0) {
    if (ak_prof_start() != 0) _ak_warn("AK_PROF=1: %s", ak_last_error());
  } else if (on && strcmp(on, "0") != 0 && *on) {
    _ak_warn("AK_PROF=%s is not valid (0 or 1); the profiler stays off", on);
  }
}

/* The exit dump (AK_PROF_DUMP), by every process that started the
 * profiler. A destructor: it runs at exit() and never at dlclose (the
 * library is never unloaded). */
__attribute__((destructor)) static void prof_exit(void) {
  if (!_ak_prof_g.ever_started || !_ak_prof_g.dump_path[0]) return;
  dump_to_path("AK_PROF_DUMP", "");
}

/* ---- tests --------------------------------------------------------------------------------------- */

void _ak_prof_reset(const _ak_prof_limits *limits) {
  static const _ak_prof_limits defaults;
  fork_prepare();
  bump_generation(false);
  _ak_prof_tables_fini(&_ak_prof_g.t);
  _ak_prof_g.limits = limits ? *limits : defaults;
  for (int o = 0; o < AK_PROF_OPTION_COUNT_; o++)
    __atomic_store_n(&option_value[o], option_table[o].def, __ATOMIC_RELAXED);
  __atomic_store_n(&_ak_prof_g.period, AK_PROF_DEFAULT_SAMPLE, __ATOMIC_RELAXED);
  __atomic_store_n(&_ak_prof_g.interval, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&_ak_prof_g.dump_seq, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&_ak_prof_g.dumps, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&_ak_prof_g.dump_errors, 0, __ATOMIC_RELAXED);
  _ak_prof_g.dump_path[0] = '\0';
  fork_release();
}

void _ak_prof_check(void) {
  pthread_mutex_lock(&_ak_prof_g.mu);
  if (_ak_prof_g.t.ready) {
    _ak_prof_check_stacks(&_ak_prof_g.t);
    _ak_prof_check_live(&_ak_prof_g.t);
  }
  pthread_mutex_unlock(&_ak_prof_g.mu);
}
