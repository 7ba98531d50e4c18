/* SPDX-License-Identifier: MIT */
/* options.c - the general heap's run-time options: one table of names,
 * defaults and valid ranges; each is read once from the environment
 * variable of its name, when the heap starts (or at the first
 * ak_option_get, if that comes first). Precedence: built-in default <
 * environment < ak_option_set(). A value that is not valid (not a number,
 * out of range, trailing text) is reported on stderr with the variable and
 * the value, and the default is used. AK_PURGE_DELAY is the reclaim
 * policy's page delay (common/reclaim.h), stored there; AK_SHOW_STATS's
 * file:PATH / json:PATH gives the exit report's path (stats.c). Calls
 * only common/ and the OS layer. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/reclaim.h"
#include "malloc/malloc_internal.h"
#include "os/os_mem.h"

static const struct {
  const char *env;
  long def, min, max;
} option_table[AK_OPTION_COUNT_] = {
    [AK_OPTION_SHOW_STATS] = {"AK_SHOW_STATS", AK_SHOW_STATS_OFF, AK_SHOW_STATS_OFF, AK_SHOW_STATS_JSON},
    [AK_OPTION_VERBOSE] = {"AK_VERBOSE", 0, 0, 1},
    [AK_OPTION_PURGE_DELAY] = {"AK_PURGE_DELAY", AK_RECLAIM_PAGE_DELAY_MS, -1, 86400000},
};

atomic_long _ak_options[AK_OPTION_COUNT_];
static atomic_bool options_set_by_api[AK_OPTION_COUNT_];

/* AK_SHOW_STATS=file:PATH / json:PATH: where the exit report goes ("" =
 * stderr). Set when the options are read, before any report; its copy
 * lives in a mapping of its own (the OS layer's, no malloc: the options are
 * read before the heap exists), out of .bss, where it would spread the
 * small variables that every process touches over more pages (each a page
 * fault at start). */
static const char *report_path = "";
static pthread_once_t options_once = PTHREAD_ONCE_INIT;

/* A decimal integer with nothing after it, within [min, max]. */
static bool parse_long(const char *s, long min, long max, long *out) {
  char *end;
  errno = 0;
  long x = strtol(s, &end, 10);
  if (end == s || *end != '\0' || errno == ERANGE || x < min || x > max) return false;
  *out = x;
  return true;
}

/* The text of option i: a number in range, a switch word for on/off options,
 * and for AK_SHOW_STATS "json", "file:PATH" or "json:PATH". */
static bool parse_option(int i, const char *s, long *out) {
  if (parse_long(s, option_table[i].min, option_table[i].max, out)) return true;
  bool on = !strcmp(s, "true") || !strcmp(s, "yes") || !strcmp(s, "on");
  bool off = !strcmp(s, "false") || !strcmp(s, "no") || !strcmp(s, "off");
  if ((on || off) && option_table[i].min == 0 && option_table[i].max >= 1) {
    *out = on;
    return true;
  }
  if (i != AK_OPTION_SHOW_STATS) return false;
  if (!strcmp(s, "json")) {
    *out = AK_SHOW_STATS_JSON;
    return true;
  }
  long form = !strncmp(s, "file:", 5) ? AK_SHOW_STATS_TEXT : !strncmp(s, "json:", 5) ? AK_SHOW_STATS_JSON : 0;
  if (!form || !s[5] || strlen(s + 5) >= PATH_MAX) return false;
  if (strcmp(report_path, s + 5) != 0) { /* the same path again: the copy stays */
    char *copy = _ak_os_alloc(strlen(s + 5) + 1, 1);
    if (!copy) return false;
    strcpy(copy, s + 5);
    report_path = copy;
  }
  *out = form;
  return true;
}

/* What a valid value of option i looks like, for the rejection message. */
static const char *option_expected(int i) {
  switch (i) {
    case AK_OPTION_SHOW_STATS: return "0, 1, json, file:PATH or json:PATH";
    case AK_OPTION_VERBOSE: return "0 or 1";
    default: return "an integer from -1 to 86400000 (ms)";
  }
}

/* No malloc here: runs before the first heap exists (messages go out with
 * write(2) through _ak_warn). */
static void options_read(void) {
  for (int i = 0; i < AK_OPTION_COUNT_; i++) {
    if (atomic_load(&options_set_by_api[i])) continue;
    long v = option_table[i].def;
    const char *s = getenv(option_table[i].env);
    if (s && *s && !parse_option(i, s, &v))
      _ak_warn("%s=%s is not a valid value (expected %s); using the default, %ld", option_table[i].env, s,
               option_expected(i), option_table[i].def);
    if (i == AK_OPTION_PURGE_DELAY) { /* the reclaim policy's page delay: set there, only if given */
      if (s && *s) (void)ak_reclaim_set_page_delay(v);
      continue;
    }
    atomic_store(&_ak_options[i], v);
  }
  if (atomic_load(&_ak_options[AK_OPTION_VERBOSE]))
    _ak_warn("options: AK_SHOW_STATS=%ld%s%s AK_VERBOSE=%ld AK_PURGE_DELAY=%ld",
             atomic_load(&_ak_options[AK_OPTION_SHOW_STATS]), report_path[0] ? " to " : "", report_path,
             atomic_load(&_ak_options[AK_OPTION_VERBOSE]), ak_reclaim_get_page_delay());
}

void _ak_options_init(void) { pthread_once(&options_once, options_read); }

const char *_ak_options_report_path(void) { return report_path; }

long ak_option_get(ak_option o) {
  if ((unsigned)o >= AK_OPTION_COUNT_) {
    errno = EINVAL;
    return 0;
  }
  _ak_options_init();
  if (o == AK_OPTION_PURGE_DELAY) return ak_reclaim_get_page_delay(); /* stored by the reclaim policy */
  return atomic_load(&_ak_options[o]);
}

void ak_option_set(ak_option o, long value) {
  if ((unsigned)o >= AK_OPTION_COUNT_) {
    errno = EINVAL;
    return;
  }
  if (value < option_table[o].min || value > option_table[o].max) {
    _ak_error(EINVAL, "ak_option_set: %s = %ld is out of range (%ld to %ld); the option keeps its value",
              option_table[o].env, value, option_table[o].min, option_table[o].max);
    return;
  }
  atomic_store(&options_set_by_api[o], true);
  if (o == AK_OPTION_PURGE_DELAY)
    (void)ak_reclaim_set_page_delay(value); /* in range (above): the policy's page delay */
  else
    atomic_store(&_ak_options[o], value);
}
