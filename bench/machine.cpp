/* SPDX-License-Identifier: MIT */
// machine.cpp - what the figures were measured on, for the result files:
// the CPU, the OS, glibc, the allocators' packages, the compiler and the date.
#include <gnu/libc-version.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <ctime>
#include <fstream>
#include <string>
#include <vector>

#include "runner.h"

namespace akb {

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line, model, family, mod;
  bool hv = false;
  while (std::getline(f, line)) {
    auto val = [&]() { return trim(line.substr(line.find(':') + 1)); };
    if (model.empty() && line.rfind("model name", 0) == 0) model = val();
    if (family.empty() && line.rfind("cpu family", 0) == 0) family = val();
    if (mod.empty() && line.rfind("model\t", 0) == 0) mod = val();
    if (line.rfind("flags", 0) == 0 && line.find(" hypervisor") != std::string::npos) hv = true;
  }
  if (model.empty()) model = "unknown CPU";
  if (!family.empty()) model += " (family " + family + ", model " + mod + ")";
  if (hv) model += ", virtual machine";
  return model;
}

std::string machine_md(const std::vector<Allocator> &allocs) {
  std::string md;
  utsname u{};
  uname(&u);
  char date[64];
  std::time_t t = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&t));
  md += "- CPU: " + cpu_model() + ", " + std::to_string(sysconf(_SC_NPROCESSORS_ONLN)) + " cores online\n";
  md += std::string("- OS: ") + u.sysname + " " + u.release + " " + u.machine;
  std::string os = capture(". /etc/os-release && echo \"$PRETTY_NAME\"");
  if (!trim(os).empty()) md += " (" + trim(os) + ")";
  md += "\n";
  md += std::string("- glibc: ") + gnu_get_libc_version();
  for (const auto &a : allocs)
    if (a.label == "glibc" && !a.version.empty()) md += " (" + a.package + " " + a.version + ")";
  md += "\n";
  for (const auto &a : allocs) {
    if (a.label == "glibc") continue;
    md += "- " + a.label + ": " + (a.package.empty() ? "?" : a.package) + " " +
          (a.version.empty() ? "(version unknown)" : a.version) + " (`" + a.path + "`)\n";
  }
  md += std::string("- Compiler: gcc ") + __VERSION__ + ", " + date + "\n";
  return md;
}

}  // namespace akb
