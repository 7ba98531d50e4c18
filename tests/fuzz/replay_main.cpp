/* SPDX-License-Identifier: MIT */
/* replay_main.cpp - a main() for the fuzz targets in builds without
 * libFuzzer (gcc, sanitizer and TSan builds): runs LLVMFuzzerTestOneInput
 * once on every file named on the command line, or on every regular file
 * in each directory named (sorted by name, not recursive), so the seed
 * corpora and every kept crash input run as ordinary tests.
 *
 * Usage: fuzz_<component>_replay [--allow-missing] PATH...
 * A directory that does not exist is skipped with --allow-missing (an
 * empty regressions directory is not kept by git); exits 1 if no input
 * was run at all, 0 otherwise (a failing input aborts in the target). */
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

namespace fs = std::filesystem;

static void run_file(const fs::path &p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) {
    std::fprintf(stderr, "replay: cannot read %s\n", p.c_str());
    std::exit(1);
  }
  std::vector<uint8_t> data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  /* A private copy of exactly the input's size, as libFuzzer gives it. */
  std::vector<uint8_t> copy(data);
  LLVMFuzzerTestOneInput(copy.empty() ? nullptr : copy.data(), copy.size());
}

int main(int argc, char **argv) {
  bool allow_missing = false;
  size_t runs = 0;
  for (int i = 1; i < argc; i++) {
    if (std::strcmp(argv[i], "--allow-missing") == 0) {
      allow_missing = true;
      continue;
    }
    fs::path p(argv[i]);
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      std::vector<fs::path> files;
      for (const auto &e : fs::directory_iterator(p))
        if (e.is_regular_file() && e.path().filename().string()[0] != '.') files.push_back(e.path());
      std::sort(files.begin(), files.end());
      for (const auto &f : files) {
        run_file(f);
        runs++;
      }
      std::printf("replay: %zu inputs from %s\n", files.size(), p.c_str());
    } else if (fs::is_regular_file(p, ec)) {
      run_file(p);
      runs++;
    } else if (!allow_missing) {
      std::fprintf(stderr, "replay: %s does not exist\n", p.c_str());
      return 1;
    }
  }
  if (runs == 0) {
    std::fprintf(stderr, "replay: no input was run\n");
    return 1;
  }
  std::printf("replay: %zu inputs passed\n", runs);
  return 0;
}
