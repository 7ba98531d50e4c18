// SPDX-License-Identifier: MIT
// pprof_run.h - running `go tool pprof` from a test and reading its -top
// table: the heap profiler's tests check what pprof itself reads from a
// dump, not what the project's own decoder reads.
#ifndef AK_TESTS_PPROF_RUN_H
#define AK_TESTS_PPROF_RUN_H

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <sstream>
#include <string>

namespace pprofrun {

// `go` on PATH, or "".
inline std::string find_go() {
  const char *path = getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  for (std::string d; std::getline(dirs, d, ':');)
    if (!d.empty() && access((d + "/go").c_str(), X_OK) == 0) return d + "/go";
  return "";
}

// The running test program's path.
inline std::string self_exe() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, size_t(n)) : "";
}

// Runs `go tool pprof -top -sample_index=inuse_space ARGS EXE PROFILE` (EXE
// empty: the profile's own mappings) and returns the flat % of each
// function it lists.
inline std::map<std::string, double> top(const std::string &go, const std::string &profile,
                                         const std::string &args = "", const std::string &exe = self_exe()) {
  std::string cmd = "'" + go + "' tool pprof -top -sample_index=inuse_space " + args + " " +
                    (exe.empty() ? "" : "'" + exe + "' ") + "'" + profile + "' 2>/dev/null";
  std::map<std::string, double> flat;
  FILE *f = popen(cmd.c_str(), "r");
  if (!f) return flat;
  char line[1024];
  bool table = false;
  while (fgets(line, sizeof line, f)) {
    std::string s(line);
    if (s.find("flat%") != std::string::npos) {
      table = true;  // the header; rows follow: flat flat% sum% cum cum% name
      continue;
    }
    if (!table) continue;
    std::istringstream row(s);
    std::string v, pct, sum, cum, cum_pct, name;
    if (!(row >> v >> pct >> sum >> cum >> cum_pct) || pct.empty() || pct.back() != '%') continue;
    std::getline(row >> std::ws, name);
    flat[name] += std::stod(pct.substr(0, pct.size() - 1));
  }
  pclose(f);
  return flat;
}

}  // namespace pprofrun

#endif  // AK_TESTS_PPROF_RUN_H
