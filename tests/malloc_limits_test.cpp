// SPDX-License-Identifier: MIT
// malloc_limits_test.cpp - the malloc's bounds: requests beyond what the
// system can commit fail fast with NULL + ENOMEM (no MAP_NORESERVE on
// memory handed out; RLIMIT_AS respected), no cap on the number of live
// blocks aligned to 4 MiB or more, and a stats printer that reports a
// failed write.
#include <arenakit/arenakit.h>
#include <errno.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr size_t kGiB = size_t{1} << 30;

// A /proc file's first number after `key` (kB in meminfo), or -1.
long long proc_value(const char *path, const std::string &key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (line.compare(0, key.size(), key) == 0) return std::stoll(line.substr(key.size()));
  return -1;
}

int overcommit_mode() {
  std::ifstream in("/proc/sys/vm/overcommit_memory");
  int m = -1;
  in >> m;
  return m;
}

// Why the system might give `n` bytes for real ("" if it cannot): more
// RAM + swap than that, or the kernel told to overcommit always.
std::string could_commit(size_t n) {
  long long ram = proc_value("/proc/meminfo", "MemTotal:"), swap = proc_value("/proc/meminfo", "SwapTotal:");
  if (ram < 0 || swap < 0) return "no /proc/meminfo";
  if (overcommit_mode() == 1) return "vm.overcommit_memory is 1 (always overcommit)";
  unsigned long long total = static_cast<unsigned long long>(ram + swap) * 1024;
  if (total >= n)
    return "RAM + swap (" + std::to_string(total >> 30) + " GiB) >= " + std::to_string(n >> 30) + " GiB";
  return "";
}

TEST(MallocLimits, BeyondRamAndSwapIsENOMEM) {
  for (size_t n : {64 * kGiB, 1024 * kGiB}) {
    std::string why = could_commit(n);
    if (!why.empty()) {
      std::printf("skipped %zu GiB: %s\n", n >> 30, why.c_str());
      continue;
    }
    errno = 0;
    void *p = ak_malloc(n);
    EXPECT_EQ(p, nullptr) << "malloc " << (n >> 30) << " GiB";
    EXPECT_EQ(errno, ENOMEM);
    ak_free(p);
    errno = 0;
    p = ak_calloc(n / 8, 8);
    EXPECT_EQ(p, nullptr) << "calloc " << (n >> 30) << " GiB";
    EXPECT_EQ(errno, ENOMEM);
    ak_free(p);
    errno = 0;
    p = ak_aligned_alloc(4 << 20, n);
    EXPECT_EQ(p, nullptr) << "aligned_alloc " << (n >> 30) << " GiB";
    EXPECT_EQ(errno, ENOMEM);
    ak_free(p);
    // realloc of a small and of a large block: NULL, the block intact.
    for (size_t from : {size_t{100}, size_t{8} << 20}) {
      auto *b = static_cast<unsigned char *>(ak_malloc(from));
      ASSERT_NE(b, nullptr);
      std::memset(b, 0x7b, from);
      errno = 0;
      void *q = ak_realloc(b, n);
      EXPECT_EQ(q, nullptr) << "realloc " << from << " -> " << (n >> 30) << " GiB";
      EXPECT_EQ(errno, ENOMEM);
      ak_free(q);
      EXPECT_EQ(b[0], 0x7b);
      EXPECT_EQ(b[from - 1], 0x7b);
      ak_free(b);
    }
  }
}

// RLIMIT_AS lowered (in a child, so the test process keeps its own):
// a request past it gets NULL + ENOMEM, smaller ones still succeed.
TEST(MallocLimits, RlimitAsIsRespected) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    long long vm_kb = proc_value("/proc/self/status", "VmSize:");
    if (vm_kb < 0) _exit(10);
    rlim_t limit = static_cast<rlim_t>(vm_kb) * 1024 + (rlim_t{256} << 20);
    struct rlimit rl = {limit, limit};
    if (setrlimit(RLIMIT_AS, &rl) != 0) _exit(11);
    void *small = ak_malloc(1000);
    if (!small) _exit(12);
    errno = 0;
    if (ak_malloc(kGiB) != nullptr) _exit(13);
    if (errno != ENOMEM) _exit(14);
    errno = 0;
    if (ak_calloc(kGiB / 16, 16) != nullptr) _exit(15);
    if (errno != ENOMEM) _exit(16);
    void *mid = ak_malloc(16 << 20);
    if (!mid) _exit(17);
    ak_free(mid);
    ak_free(small);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child's step that failed (see the test)";
}

// No cap on live blocks aligned to 4 MiB or more (there were 64).
TEST(MallocLimits, ManyLiveHugeAlignedBlocks) {
  constexpr int kN = 200;
  std::vector<std::pair<void *, size_t>> blocks;
  for (int i = 0; i < kN; i++) {
    size_t align = (i % 2 ? size_t{8} : size_t{4}) << 20;
    errno = 0;
    void *p = ak_aligned_alloc(align, 4096);
    ASSERT_NE(p, nullptr) << "block " << i << ": errno " << errno;
    ASSERT_EQ(reinterpret_cast<uintptr_t>(p) & (align - 1), 0u) << i;
    ASSERT_GE(ak_usable_size(p), size_t{4096});
    std::memset(p, i & 0xff, 4096);
    blocks.emplace_back(p, align);
  }
  std::shuffle(blocks.begin(), blocks.end(), std::mt19937(17));
  for (size_t i = 0; i < blocks.size(); i++) {
    auto *b = static_cast<unsigned char *>(blocks[i].first);
    EXPECT_EQ(b[0], b[4095]);
    ak_free(b);
  }
  void *p = ak_aligned_alloc(4 << 20, 4096);  // the registry still works once emptied
  ASSERT_NE(p, nullptr);
  ak_free(p);
}

// A zero-byte block with an alignment of 4 MiB or more: its address lies
// inside its own mapping and it is a block of arenakit for every call (it
// once sat one past the mapping's end, where another segment could be
// mapped, and its usable size of 0 read as "not arenakit's").
TEST(MallocLimits, ZeroByteHugeAlignedBlockIsABlock) {
  for (size_t align : {size_t{4} << 20, size_t{8} << 20}) {
    void *p = ak_aligned_alloc(align, 0);
    ASSERT_NE(p, nullptr);
    ASSERT_EQ(reinterpret_cast<uintptr_t>(p) & (align - 1), 0u);
    ASSERT_GE(ak_usable_size(p), size_t{1});
    static_cast<volatile char *>(p)[0] = 1;  // inside the mapping
    void *q = ak_realloc(p, 6);
    ASSERT_NE(q, nullptr);
    ak_free(q);
  }
}

TEST(MallocLimits, StatsPrintToAFullDeviceFails) {
  FILE *f = std::fopen("/dev/full", "w");
  if (!f) GTEST_SKIP() << "no /dev/full";
  void *p = ak_malloc(100);  // something to print
  errno = 0;
  EXPECT_EQ(ak_malloc_stats_print(f), -1);
  EXPECT_EQ(errno, ENOSPC);
  EXPECT_NE(std::strstr(ak_last_error(), "ak_malloc_stats_print"), nullptr) << ak_last_error();
  std::fclose(f);
  ak_free(p);
  // A stream that takes the bytes: 0, errno untouched.
  FILE *ok = std::fopen("/dev/null", "w");
  ASSERT_NE(ok, nullptr);
  errno = 1234;
  EXPECT_EQ(ak_malloc_stats_print(ok), 0);
  EXPECT_EQ(errno, 1234);
  std::fclose(ok);
}

}  // namespace
