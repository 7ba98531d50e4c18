// SPDX-License-Identifier: MIT
// malloc_badptr_test.cpp - pointers the malloc did not hand out, given to
// free, realloc and malloc_usable_size (and their ak_ names): every one
// ends with one message naming the call, the pointer and the reason, then
// abort() - in every build (release, checked, hardened), as glibc does;
// never a SIGSEGV from reading a segment header that is not there.
#include <arenakit/arenakit.h>
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {

char static_buffer[4096];

// The calls under test, each given the pointer to check; `name` is what
// the message calls it.
struct Call {
  const char *name;
  std::function<void(void *)> run;
};

const Call kCalls[] = {
    {"free", [](void *p) { ak_free(p); }},
    {"realloc", [](void *p) { (void)!ak_realloc(p, 100); }},
    {"malloc_usable_size", [](void *p) { (void)!ak_usable_size(p); }},
};

// A message for `call` on some pointer, for the reason `why` (a regex).
std::string message(const char *call, const char *why) {
  return std::string("arenakit: ") + call + "\\(0x[0-9a-f]+\\): invalid pointer \\((" + why + ")\\)";
}

// Each misuse in a fresh child (death tests fork): the pointer is made
// there, so its state is what the test says.
void expect_death_for_every_call(const std::function<void *()> &make, const char *why) {
  for (const Call &c : kCalls) {
    EXPECT_DEATH(c.run(make()), message(c.name, why)) << c.name;
  }
}

TEST(MallocBadPointerDeathTest, StackPointer) {
  char local[64];  // alive for the whole test, in the child too
  std::memset(local, 0, sizeof local);
  expect_death_for_every_call([&local] { return static_cast<void *>(local + 16); }, "not from arenakit");
  expect_death_for_every_call([&local] { return static_cast<void *>(local); }, "not from arenakit");
}

TEST(MallocBadPointerDeathTest, StaticPointer) {
  expect_death_for_every_call([] { return static_cast<void *>(static_buffer + 16); }, "not from arenakit");
  expect_death_for_every_call([] { return static_cast<void *>(static_buffer); }, "not from arenakit");
}

TEST(MallocBadPointerDeathTest, AnotherAllocatorsBlock) {
  expect_death_for_every_call([] { return std::malloc(100); }, "not from arenakit");
}

TEST(MallocBadPointerDeathTest, ForeignMapping) {
  expect_death_for_every_call(
      [] {
        void *m = mmap(nullptr, 8 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        // Its 4 MiB boundary, where a segment header would be, and a byte in.
        auto b = (reinterpret_cast<uintptr_t>(m) + (4 << 20) - 1) & ~uintptr_t{(4 << 20) - 1};
        return reinterpret_cast<void *>(b + 4096);
      },
      "not from arenakit");
}

TEST(MallocBadPointerDeathTest, UnmappedAddress) {
  expect_death_for_every_call(
      [] {
        void *m = mmap(nullptr, 8 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        munmap(m, 8 << 20);
        return static_cast<char *>(m) + (4 << 20) + 64;
      },
      "not from arenakit");
  expect_death_for_every_call([] { return reinterpret_cast<void *>(uintptr_t{0x1000}); },
                              "not from arenakit");
}

TEST(MallocBadPointerDeathTest, FreedLargeBlock) {
  expect_death_for_every_call(
      [] {
        void *p = ak_malloc(8 << 20);
        ak_free(p);
        return p;
      },
      "not from arenakit");
}

TEST(MallocBadPointerDeathTest, FreedHugeAlignedBlock) {
  expect_death_for_every_call(
      [] {
        void *p = ak_aligned_alloc(4 << 20, 4096);
        ak_free(p);
        return p;
      },
      "not from arenakit");
}

TEST(MallocBadPointerDeathTest, InteriorPointers) {
  // Into a small block: the free fast path itself must not take it.
  expect_death_for_every_call(
      [] {
        void *keep[4];
        for (void *&k : keep) k = ak_malloc(100);  // used > 1: the fast path's case
        return static_cast<void *>(static_cast<char *>(keep[1]) + 16);
      },
      "not the start of a block");
  expect_death_for_every_call([] { return static_cast<void *>(static_cast<char *>(ak_malloc(100)) + 8); },
                              "not the start of a block");
  // Into a solo block (64 KiB .. 4 MiB), a large block, past a large block's
  // first 4 MiB, and into a huge-aligned block.
  expect_death_for_every_call(
      [] { return static_cast<void *>(static_cast<char *>(ak_malloc(1 << 20)) + 4096); },
      "not the start of a block");
  expect_death_for_every_call(
      [] { return static_cast<void *>(static_cast<char *>(ak_malloc(8 << 20)) + 4096); },
      "inside a large block");
  expect_death_for_every_call(
      [] { return static_cast<void *>(static_cast<char *>(ak_malloc(16 << 20)) + (9 << 20)); },
      "not from arenakit");
  expect_death_for_every_call(
      [] { return static_cast<void *>(static_cast<char *>(ak_aligned_alloc(4 << 20, 8192)) + 4096); },
      "not from arenakit");
}

TEST(MallocBadPointerDeathTest, SegmentHeader) {
  // The first byte of a segment (its header) and a byte inside the header.
  expect_death_for_every_call(
      [] {
        auto seg = reinterpret_cast<uintptr_t>(ak_malloc(100)) & ~uintptr_t{(4 << 20) - 1};
        return reinterpret_cast<void *>(seg);
      },
      "not the start of a block|page not in use");
  expect_death_for_every_call(
      [] {
        void *keep[4];
        for (void *&k : keep) k = ak_malloc(100);
        auto seg = reinterpret_cast<uintptr_t>(keep[0]) & ~uintptr_t{(4 << 20) - 1};
        return reinterpret_cast<void *>(seg + 256);
      },
      "not the start of a block|page not in use");
}

TEST(MallocBadPointerDeathTest, DoubleFreeOfALargeBlock) {
  EXPECT_DEATH(
      {
        void *p = ak_malloc(8 << 20);
        ak_free(p);
        ak_free(p);
      },
      message("free", "not from arenakit"));
}

// The free fast path keeps the segment of the thread's last free (no map
// lookup for the next one into it). Once that segment goes back to the
// system (its blocks all freed, ak_collect(true)), a free into it is a
// pointer like any unmapped one: the message, not a SIGSEGV from reading a
// header that is gone.
TEST(MallocBadPointerDeathTest, FreeIntoTheLastFreesReleasedSegment) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process: no other thread's segments
  EXPECT_DEATH(
      {
        std::thread([] {
          // 12 MiB of blocks: the last ones lie in a segment mapped for them.
          std::vector<void *> blocks((12u << 20) / 1024);
          for (void *&b : blocks) b = ak_malloc(1024);
          void *p = blocks.back();
          for (void *b : blocks) ak_free(b);  // p last: its segment is the kept one
          ak_collect(true);                   // released and unmapped
          void *seg = reinterpret_cast<void *>(reinterpret_cast<uintptr_t>(p) & ~uintptr_t{(4 << 20) - 1});
          if (msync(seg, 4096, MS_ASYNC) == 0) {
            std::fprintf(stderr, "the segment is still mapped: the test proves nothing\n");
            std::_Exit(3);
          }
          ak_free(p);
        }).join();
      },
      message("free", "not from arenakit"));
}

// Valid pointers still work after the checks: every kind of block, freed
// by the fast and the slow path, resized, asked for its size.
TEST(MallocBadPointer, ValidBlocksPassTheChecks) {
  for (size_t n : {size_t{1}, size_t{100}, size_t{1000}, size_t{9000}, size_t{70000}, size_t{1} << 20,
                   size_t{6} << 20}) {
    void *blocks[64];
    for (void *&b : blocks) {
      b = ak_malloc(n);
      ASSERT_NE(b, nullptr);
      ASSERT_GE(ak_usable_size(b), n);
    }
    for (int i = 0; i < 64; i += 2) {
      blocks[i] = ak_realloc(blocks[i], n + 10);
      ASSERT_NE(blocks[i], nullptr);
    }
    for (void *b : blocks) ak_free(b);
  }
  for (size_t a : {size_t{32}, size_t{4096}, size_t{1} << 17, size_t{4} << 20}) {
    void *p = ak_aligned_alloc(a, 3000);
    ASSERT_NE(p, nullptr);
    ASSERT_GE(ak_usable_size(p), size_t{3000});
    p = ak_realloc(p, 5000);
    ASSERT_NE(p, nullptr);
    ak_free(p);
  }
}

}  // namespace
