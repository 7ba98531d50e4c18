/* SPDX-License-Identifier: MIT */
// runner_util.cpp - small utilities of the runner: shell commands, quoting,
// files, number formatting.
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "runner.h"

namespace akb {

// Runs a shell command, returns its stdout ("" when it fails).
std::string capture(const std::string &cmd) {
  std::string out;
  FILE *f = popen((cmd + " 2>/dev/null").c_str(), "r");
  if (!f) return out;
  char buf[4096];
  std::size_t k;
  while ((k = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, k);
  pclose(f);
  return out;
}

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  std::size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) i++;
  return s.substr(i);
}

std::string shell_quote(const std::string &s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string fmt_num(double v, int precision) {
  if (std::isnan(v)) return "n/a";
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", precision, v);
  return b;
}

bool write_file(const fs::path &p, const std::string &text) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  if (!f) {
    std::fprintf(stderr, "ak_bench: cannot write %s\n", p.c_str());
    return false;
  }
  return true;
}

std::string read_file(const fs::path &p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace akb
