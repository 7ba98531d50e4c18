/* SPDX-License-Identifier: MIT */
// cli.cpp - the command line of `ak_bench run`: options and scenario names.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "runner.h"

#ifndef AKB_SOURCE_DIR
#define AKB_SOURCE_DIR "."
#endif
#ifndef AKB_BINARY_DIR
#define AKB_BINARY_DIR "."
#endif

namespace akb {

void usage() {
  std::fprintf(
      stderr,
      "usage: ak_bench list\n"
      "       ak_bench run <scenario|all> [<scenario>...] [--quick] [--reps N] [--rounds N] [--n N]\n"
      "                [--out DIR] [--allocators glibc,tcmalloc,...] [--cpu N|none] [--no-plot] "
      "[--strict]\n"
      "                [--hardened-exe PATH [--hardened-only] [--hardened-reps N] [--hardened-tag TAG]]\n"
      "       ak_bench info\n");
}

int parse_run_args(int argc, char **argv, RunRequest &req) {
  Options &opts = req.opts;
  HardenedOptions &hardened = req.hardened;
  std::vector<std::string> names;
  for (int i = 2; i < argc; i++) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "ak_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--quick") {
      opts.quick = true;
    } else if (a == "--reps") {
      opts.reps = std::atoi(value().c_str());
    } else if (a == "--rounds") {
      opts.rounds = std::atoi(value().c_str());
    } else if (a == "--n") {
      opts.n = std::strtoull(value().c_str(), nullptr, 10);
    } else if (a == "--out") {
      opts.out_dir = value();
    } else if (a == "--allocators") {
      std::stringstream ss(value());
      std::string x;
      while (std::getline(ss, x, ',')) req.wanted.push_back(x);
    } else if (a == "--cpu") {
      std::string v = value();
      opts.cpu = v == "none" ? -1 : std::atoi(v.c_str());
    } else if (a == "--no-plot") {
      req.plot = false;
    } else if (a == "--strict") {
      opts.strict = true;
    } else if (a == "--hardened-exe") {
      hardened.exe = fs::absolute(value()).lexically_normal().string();
    } else if (a == "--hardened-only") {
      hardened.only = true;
    } else if (a == "--hardened-reps") {
      hardened.reps = std::atoi(value().c_str());
    } else if (a == "--hardened-tag") {
      hardened.tag = value();
    } else if (!a.empty() && a[0] == '-') {
      usage();
      return 2;
    } else {
      names.push_back(a);
    }
  }
  if (hardened.only && hardened.exe.empty()) {
    std::fprintf(stderr, "ak_bench: --hardened-only needs --hardened-exe PATH\n");
    return 2;
  }
  if (!hardened.exe.empty() && access(hardened.exe.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "ak_bench: --hardened-exe %s: not an executable\n", hardened.exe.c_str());
    return 2;
  }
  if (opts.out_dir.empty())
    opts.out_dir = opts.quick ? std::string(AKB_BINARY_DIR) + "/results-quick"
                              : std::string(AKB_SOURCE_DIR) + "/results";
  if (names.empty() || std::find(names.begin(), names.end(), "all") != names.end()) {
    req.todo = scenarios();
  } else {
    for (const auto &n : names) {
      const Scenario *f = find_scenario(n);
      if (!f) {
        std::fprintf(stderr, "ak_bench: unknown scenario '%s' (ak_bench list)\n", n.c_str());
        return 2;
      }
      req.todo.push_back(f);
    }
  }
  return 0;
}

}  // namespace akb
