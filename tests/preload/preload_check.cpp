/* SPDX-License-Identifier: MIT */
// preload_check.cpp - a program that runs with libarenakit-malloc.so either
// preloaded (LD_PRELOAD) or linked, and checks that malloc and every
// operator new/delete form go to arenakit and behave as the standard says.
// Built without arenakit: it finds the allocator through the dynamic linker.
#include <dlfcn.h>
#include <malloc.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <string>
#include <thread>
#include <vector>

static int failures = 0;
#define CHECK(c)                                               \
  do {                                                         \
    if (!(c)) {                                                \
      std::fprintf(stderr, "preload_check: FAILED: %s\n", #c); \
      failures++;                                              \
    }                                                          \
  } while (0)

struct alignas(256) Wide {
  char b[300];
};

int main() {
  // The allocator in use is arenakit's: malloc resolves into its library.
  Dl_info info{};
  CHECK(dladdr(reinterpret_cast<void *>(&malloc), &info) != 0);
  CHECK(info.dli_fname && std::strstr(info.dli_fname, "arenakit-malloc") != nullptr);
  void *probe = std::malloc(100);
  CHECK(dlsym(RTLD_DEFAULT, "ak_usable_size") != nullptr);
  auto usable = reinterpret_cast<size_t (*)(const void *)>(dlsym(RTLD_DEFAULT, "ak_usable_size"));
  CHECK(usable && usable(probe) >= 100 && malloc_usable_size(probe) == usable(probe));
  std::free(probe);

  // C functions and their edge cases.
  void *z0 = std::malloc(0), *z1 = std::malloc(0);
  CHECK(z0 && z1 && z0 != z1);
  std::free(z0);
  std::free(z1);
  errno = 0;
  volatile size_t half = SIZE_MAX / 2;
  CHECK(std::calloc(half, 4) == nullptr && errno == ENOMEM);
  void *al = nullptr;
  CHECK(posix_memalign(&al, 4096, 10) == 0 && (reinterpret_cast<uintptr_t>(al) & 4095) == 0);
  std::free(al);
  CHECK(aligned_alloc(64, 128) != nullptr);
  void *m = memalign(32, 100);
  CHECK(m && (reinterpret_cast<uintptr_t>(m) & 31) == 0);
  std::free(m);
  void *v = valloc(10);
  CHECK(v && (reinterpret_cast<uintptr_t>(v) & 4095) == 0);
  std::free(v);
  void *pv = pvalloc(10);
  CHECK(pv && malloc_usable_size(pv) >= 4096);
  std::free(pv);
  void *r = std::realloc(nullptr, 10);
  CHECK(r != nullptr);
  r = std::realloc(r, 1 << 22);
  CHECK(r != nullptr);
  CHECK(std::realloc(r, 0) == nullptr);

  // Every operator new/delete form.
  int *i1 = new int(5);
  CHECK(usable(i1) >= sizeof(int));
  delete i1;
  int *ia = new int[100]();
  CHECK(ia[99] == 0);
  delete[] ia;
  Wide *w = new Wide;
  CHECK((reinterpret_cast<uintptr_t>(w) & 255) == 0);
  delete w;
  Wide *wa = new Wide[3];
  CHECK((reinterpret_cast<uintptr_t>(wa) & 255) == 0);
  delete[] wa;
  Wide *wn = new (std::nothrow) Wide;
  CHECK(wn && (reinterpret_cast<uintptr_t>(wn) & 255) == 0);
  delete wn;
  volatile size_t huge = SIZE_MAX / 4;
  CHECK(new (std::nothrow) char[huge] == nullptr);
  bool threw = false;
  try {
    char *never = new char[huge];
    delete[] never;
  } catch (const std::bad_alloc &) {
    threw = true;
  }
  CHECK(threw);
  ::operator delete(::operator new(48), 48);  // sized delete
  ::operator delete (::operator new (48, std::align_val_t{128}), std::align_val_t{128});

  // Containers and threads.
  std::vector<std::thread> th;
  for (int t = 0; t < 4; t++) {
    th.emplace_back([] {
      std::map<int, std::string> mp;
      for (int k = 0; k < 20000; k++) mp[k] = std::string(static_cast<size_t>(k % 50), 'x');
    });
  }
  for (auto &t : th) t.join();

  std::printf("preload_check: %s\n", failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}
