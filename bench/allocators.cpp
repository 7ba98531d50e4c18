/* SPDX-License-Identifier: MIT */
// allocators.cpp - which mallocs the runner measures: glibc (no preload) and,
// where installed, tcmalloc, mimalloc and jemalloc, found through the
// dynamic linker's cache or the usual directories (AK_BENCH_<NAME>=path
// overrides), with the Debian package and version that provide them.
#include <gnu/libc-version.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "runner.h"

#ifndef AKB_MULTIARCH
#define AKB_MULTIARCH ""
#endif

namespace akb {

namespace {

struct KnownMalloc {
  const char *label;
  std::vector<const char *> sonames;  // in order of preference
  const char *package;                // Debian package that provides it
};

const std::vector<KnownMalloc> &known_mallocs() {
  // Column order of the source benchmark's table.
  static const std::vector<KnownMalloc> k = {
      {"glibc", {}, "libc6"},
      {"tcmalloc", {"libtcmalloc_minimal.so.4", "libtcmalloc.so.4"}, "libtcmalloc-minimal4"},
      {"mimalloc", {"libmimalloc.so.2", "libmimalloc.so"}, "libmimalloc2.0"},
      {"jemalloc", {"libjemalloc.so.2", "libjemalloc.so"}, "libjemalloc2"},
  };
  return k;
}

// Where the dynamic linker would find `soname`: ldconfig's cache first
// (entries for this architecture), then the usual directories.
std::string find_library(const std::string &soname) {
  std::string cache = capture("/sbin/ldconfig -p || /usr/sbin/ldconfig -p || ldconfig -p");
  std::istringstream in(cache);
  std::string line;
#if defined(__x86_64__)
  const char *arch_tag = "x86-64";
#elif defined(__aarch64__)
  const char *arch_tag = "AArch64";
#else
  const char *arch_tag = "";
#endif
  while (std::getline(in, line)) {
    std::string t = trim(line);
    if (t.compare(0, soname.size() + 1, soname + " ") != 0) continue;
    if (*arch_tag && t.find(arch_tag) == std::string::npos) continue;
    std::size_t arrow = t.find("=> ");
    if (arrow == std::string::npos) continue;
    std::string path = t.substr(arrow + 3);
    // merged /usr: prefer the /usr/lib name that dpkg knows
    if (path.rfind("/lib", 0) == 0 && access(("/usr" + path).c_str(), R_OK) == 0) path = "/usr" + path;
    if (access(path.c_str(), R_OK) == 0) return path;
  }
  std::vector<std::string> dirs;
  if (*AKB_MULTIARCH) {
    dirs.push_back(std::string("/usr/lib/") + AKB_MULTIARCH);
    dirs.push_back(std::string("/lib/") + AKB_MULTIARCH);
  }
  for (const char *d : {"/usr/lib64", "/usr/lib", "/usr/local/lib", "/lib64", "/lib"}) dirs.push_back(d);
  for (const auto &d : dirs) {
    std::string path = d + "/" + soname;
    if (access(path.c_str(), R_OK) == 0) return path;
  }
  return "";
}

// The Debian package owning `path`, and its version ("" when unknown).
void package_of(const std::string &path, std::string &pkg, std::string &ver) {
  std::string owner;
  for (const std::string &p : {path, fs::weakly_canonical(path).string()}) {
    owner = trim(capture("dpkg-query -S " + shell_quote(p)));
    if (!owner.empty()) break;
  }
  std::size_t colon = owner.find(": ");
  if (colon != std::string::npos) {
    pkg = owner.substr(0, colon);
    std::size_t comma = pkg.find(',');
    if (comma != std::string::npos) pkg = pkg.substr(0, comma);
  }
  if (!pkg.empty()) ver = trim(capture("dpkg-query -W -f='${Version}' " + shell_quote(pkg)));
}

std::string env_name(const std::string &label) {
  std::string e = "AK_BENCH_";
  for (char c : label) e += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return e;  // e.g. AK_BENCH_JEMALLOC=/path/to/libjemalloc.so
}

}  // namespace

std::string libc_package_version() { return trim(capture("dpkg-query -W -f='${Version}' libc6")); }

std::vector<Allocator> detect_allocators(const std::vector<std::string> &wanted,
                                         std::vector<std::string> &missing) {
  std::vector<Allocator> out;
  for (const auto &k : known_mallocs()) {
    if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), k.label) == wanted.end()) continue;
    Allocator a;
    a.label = k.label;
    if (a.label == "glibc") {
      a.package = "libc6";
      a.version = libc_package_version();
      if (a.version.empty()) a.version = gnu_get_libc_version();
      out.push_back(a);
      continue;
    }
    const char *override_path = std::getenv(env_name(k.label).c_str());
    if (override_path && *override_path) {
      a.path = override_path;
    } else {
      for (const char *so : k.sonames) {
        a.path = find_library(so);
        if (!a.path.empty()) break;
      }
    }
    if (a.path.empty() || access(a.path.c_str(), R_OK) != 0) {
      missing.push_back(std::string(k.label) + ": not installed (Debian: sudo apt-get install " + k.package +
                        ", or scripts/deps.sh bench; or set " + env_name(k.label) + "=/path/to/lib.so)");
      continue;
    }
    package_of(a.path, a.package, a.version);
    out.push_back(a);
  }
  return out;
}

}  // namespace akb
