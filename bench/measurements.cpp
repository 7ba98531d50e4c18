/* SPDX-License-Identifier: MIT */
// measurements.cpp - the measurements: emitted by the children (key=value
// lines on stdout), gathered by the runner into RunData (medians over the
// repetitions).
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench.h"

namespace akb {

double now_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

void emit(const std::string &key, double value) {
  std::printf("%s=%.9g\n", key.c_str(), value);
  std::fflush(stdout);
}

void emit_str(const std::string &key, const std::string &value) {
  std::printf("%s=%s\n", key.c_str(), value.c_str());
  std::fflush(stdout);
}

std::uint64_t param_u64(const Params &p, const std::string &key, std::uint64_t def) {
  auto it = p.find(key);
  if (it == p.end()) return def;
  return std::strtoull(it->second.c_str(), nullptr, 10);
}

// ---- RunData -------------------------------------------------------------------

static const std::vector<double> *find_samples(const RunData &d, const std::string &alloc,
                                               const std::string &key) {
  auto a = d.samples.find(alloc);
  if (a == d.samples.end()) return nullptr;
  auto k = a->second.find(key);
  if (k == a->second.end() || k->second.empty()) return nullptr;
  return &k->second;
}

bool RunData::has(const std::string &alloc, const std::string &key) const {
  return find_samples(*this, alloc, key) != nullptr;
}

double median_of(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

double RunData::median(const std::string &alloc, const std::string &key) const {
  const std::vector<double> *s = find_samples(*this, alloc, key);
  return s ? median_of(*s) : NAN;
}

double RunData::median_ratio(const std::string &alloc, const std::string &num, const std::string &den) const {
  const std::vector<double> *a = find_samples(*this, alloc, num), *b = find_samples(*this, alloc, den);
  if (!a || !b || a->size() != b->size()) return NAN;
  std::vector<double> r;
  for (std::size_t i = 0; i < a->size(); i++) r.push_back((*a)[i] / (*b)[i]);
  return median_of(r);
}

double RunData::max(const std::string &alloc, const std::string &key) const {
  const std::vector<double> *s = find_samples(*this, alloc, key);
  return s ? *std::max_element(s->begin(), s->end()) : NAN;
}

double RunData::min(const std::string &alloc, const std::string &key) const {
  const std::vector<double> *s = find_samples(*this, alloc, key);
  return s ? *std::min_element(s->begin(), s->end()) : NAN;
}

}  // namespace akb
