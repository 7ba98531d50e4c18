/* SPDX-License-Identifier: MIT */
/* prof_pprof_sites.c - the three call sites of prof_pprof_test.cpp, as a
 * component's allocation path calls the profiler's hooks: the countdown,
 * then the record with the stack captured there. In C on purpose:
 * `go tool pprof` symbolizes C and C++ from DWARF alone, and its line-table
 * lookup (Go's debug/dwarf LineReader.SeekPC) gives up on a compile unit
 * whose first line sequence starts above the address looked up, which a
 * C++ unit with inline functions of its own sections has; a C unit with
 * these functions alone has one sequence. noinline and no tail call: each
 * site is a frame of its own. */
#include <stdbool.h>
#include <stddef.h>

#include "prof/prof.h"

bool pprof_site_sixty(void *block, size_t n);
bool pprof_site_thirty(void *block, size_t n);
bool pprof_site_ten(void *block, size_t n);

__attribute__((noinline)) bool pprof_site_sixty(void *block, size_t n) {
  bool kept = _ak_prof_sample_due(n) && _ak_prof_record(block, n, "pool", "sessions");
  __asm__ volatile("" ::: "memory");
  return kept;
}

__attribute__((noinline)) bool pprof_site_thirty(void *block, size_t n) {
  bool kept = _ak_prof_sample_due(n) && _ak_prof_record(block, n, "pool", "cache");
  __asm__ volatile("" ::: "memory");
  return kept;
}

__attribute__((noinline)) bool pprof_site_ten(void *block, size_t n) {
  bool kept = _ak_prof_sample_due(n) && _ak_prof_record(block, n, "arena", "parse");
  __asm__ volatile("" ::: "memory");
  return kept;
}
