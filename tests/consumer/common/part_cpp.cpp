/* SPDX-License-Identifier: MIT */
// part_cpp.cpp - the C++ translation unit of the consumer program. It uses
// <arenakit/arenakit.hpp> when the build found that header at configure time
// (AK_CONSUMER_HAVE_HPP=1), else the C header; either way it calls the C API.
#if defined(AK_CONSUMER_HAVE_HPP) && AK_CONSUMER_HAVE_HPP
#include <arenakit/arenakit.hpp>
#endif
#include <arenakit/arenakit.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "consumer.h"

namespace {

struct alignas(64) CacheLine {
  unsigned char bytes[64];
};

struct Point {
  double x, y;
  long tag;
};

int run(ak_arena *a) {
  // The inline fast path, several alignments.
  for (std::size_t align : {1u, 8u, 16u, 256u, 8192u}) {
    void *p = ak_arena_alloc(a, 100, align);
    CONSUMER_CHECK(p != nullptr);
    CONSUMER_CHECK(reinterpret_cast<std::uintptr_t>(p) % align == 0);
    std::memset(p, 0xa5, 100);
    CONSUMER_CHECK(consumer_part_c_check(a, p, align) == 0);
  }
  // The typed macros.
  Point *pt = AK_ARENA_NEW(a, Point);
  CONSUMER_CHECK(pt != nullptr);
  pt->x = 1.5;
  pt->y = -2.0;
  pt->tag = 42;
  CONSUMER_CHECK(pt->x + pt->y == -0.5 && pt->tag == 42);
  CacheLine *lines = AK_ARENA_NEW_ZARRAY(a, CacheLine, 4);
  CONSUMER_CHECK(lines != nullptr);
  CONSUMER_CHECK(reinterpret_cast<std::uintptr_t>(lines) % 64 == 0);
  for (int i = 0; i < 4; ++i)
    for (unsigned char b : lines[i].bytes) CONSUMER_CHECK(b == 0);

  // Through the function pointer (an out-of-line copy in this unit).
  consumer_alloc_fn fn = consumer_alloc_addr_cpp();
  CONSUMER_CHECK(fn != nullptr);
  void *q = fn(a, 32, 32);
  CONSUMER_CHECK(q != nullptr && reinterpret_cast<std::uintptr_t>(q) % 32 == 0);

  // Strings.
  std::string text = "consumer in C++";
  char *s = ak_arena_strdup(a, text.c_str());
  CONSUMER_CHECK(s != nullptr && text == s && s != text.c_str());
  char *n = ak_arena_strndup(a, text.c_str(), 8);
  CONSUMER_CHECK(n != nullptr && std::string(n) == "consumer");

  errno = 0;
  CONSUMER_CHECK(ak_arena_alloc(a, 16, 0) == nullptr);
  CONSUMER_CHECK(errno == EINVAL);
  CONSUMER_CHECK(std::strlen(ak_last_error()) > 0);
  return 0;
}

}  // namespace

extern "C" int consumer_part_cpp(ak_arena *a) { return run(a); }

extern "C" consumer_alloc_fn consumer_alloc_addr_cpp(void) { return &ak_arena_alloc; }
