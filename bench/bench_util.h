/* SPDX-License-Identifier: MIT */
// bench_util.h - small helpers shared by the scenarios (formatting, thread
// lists, CPU affinity). Header-only; include after bench.h.
#ifndef AK_BENCH_UTIL_H
#define AK_BENCH_UTIL_H

#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "bench.h"

namespace akb {

// printf-style formatting of one number.
inline std::string fmt(const char *f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// "1,2,4" -> {1, 2, 4}.
inline std::vector<int> parse_list(const std::string &s) {
  std::vector<int> v;
  std::stringstream ss(s);
  std::string x;
  while (std::getline(ss, x, ',')) v.push_back(std::atoi(x.c_str()));
  return v;
}

// A thread-count row label; counts above `cores` are oversubscribed.
inline std::string thread_label(int t, int cores) {
  return std::to_string(t) + (t > cores ? " (oversubscribed)" : "");
}

// Binds the calling thread (and the threads it creates afterwards) to CPU
// `c`: true, or false with errno set (the affinity is then unchanged).
inline bool pin_to_cpu(int c) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(c, &set);
  return sched_setaffinity(0, sizeof set, &set) == 0;
}

// The CPUs the calling thread may run on, in increasing order.
inline std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; c++)
      if (CPU_ISSET(c, &set)) out.push_back(c);
  return out;
}

// The runner pins children to one CPU; multi-threaded scenarios widen the
// affinity back to every online CPU and emit how many they got ("cpus"),
// which the report's method line quotes.
inline void widen_affinity() {
  cpu_set_t set;
  CPU_ZERO(&set);
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  for (long i = 0; i < n && i < CPU_SETSIZE; i++) CPU_SET(static_cast<int>(i), &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0) std::perror("ak_bench: sched_setaffinity");
  cpu_set_t got;
  CPU_ZERO(&got);
  sched_getaffinity(0, sizeof got, &got);
  emit("cpus", CPU_COUNT(&got));
}

// A Markdown table from string cells (first column left-aligned, the others right-aligned).
inline std::string md_table(const std::vector<std::string> &head,
                            const std::vector<std::vector<std::string>> &rows) {
  std::vector<std::size_t> w(head.size(), 3);
  for (std::size_t c = 0; c < head.size(); c++) {
    w[c] = std::max(w[c], head[c].size());
    for (const auto &r : rows) w[c] = std::max(w[c], r[c].size());
  }
  auto line = [&](const std::vector<std::string> &cells, bool right) {
    std::string s = "|";
    for (std::size_t c = 0; c < cells.size(); c++) {
      std::string pad(w[c] - cells[c].size(), ' ');
      s += " " + (right && c ? pad + cells[c] : cells[c] + pad) + " |";
    }
    return s + "\n";
  };
  std::string s = line(head, false);
  std::string sep = "|";
  for (std::size_t c = 0; c < head.size(); c++)
    sep += (c ? " " + std::string(w[c] - 1, '-') + ": |" : " " + std::string(w[c], '-') + " |");
  s += sep + "\n";
  for (const auto &r : rows) s += line(r, true);
  return s;
}

// An array of `n` T outside the allocators under test (its own mapping,
// zeroed: resident before any timing); exits on failure.
template <class T>
T *map_array(std::uint64_t n) {
  std::size_t bytes = static_cast<std::size_t>(n) * sizeof(T);
  void *m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    std::perror("ak_bench: mmap");
    std::exit(2);
  }
  std::memset(m, 0, bytes);
  return static_cast<T *>(m);
}

}  // namespace akb

#endif  // AK_BENCH_UTIL_H
