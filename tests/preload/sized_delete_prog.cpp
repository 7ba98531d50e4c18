/* SPDX-License-Identifier: MIT */
// sized_delete_prog.cpp - a C++ program that knows nothing of arenakit,
// run by introspect_test under LD_PRELOAD: sized operator delete with the
// right size ("right": every size up to 70000, exits 0), or with a size that is not the object's
// ("wrong", "wrong-array", "wrong-aligned"), which the hardened drop-in ends
// with a message naming the operator; the other builds free the block.
#include <cstdio>
#include <cstring>
#include <new>

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "right";
  void *p = ::operator new(48);
  if (!std::strcmp(mode, "right")) {
    ::operator delete(p, 48);
    ::operator delete[](::operator new[](1000), 1000);
    ::operator delete (::operator new (100, std::align_val_t{128}), 100, std::align_val_t{128});
    ::operator delete(::operator new(70000), 70000);
    for (std::size_t n = 0; n <= 70000; n++) {  // every size up to the solo spans: no false alarm
      ::operator delete(::operator new(n), n);
      ::operator delete[](::operator new[](n), n);
    }
    for (std::size_t n = 1; n <= 5000; n += 7)
      ::operator delete (::operator new (n, std::align_val_t{64}), n, std::align_val_t{64});
  } else if (!std::strcmp(mode, "wrong")) {
    ::operator delete(p, 4096);  // a 4 KiB object's size for a 48-byte block
    p = nullptr;
  } else if (!std::strcmp(mode, "wrong-array")) {
    ::operator delete[](::operator new[](1000), 16);  // a smaller class than the block's
  } else if (!std::strcmp(mode, "wrong-aligned")) {
    ::operator delete (::operator new (100, std::align_val_t{128}), 100000, std::align_val_t{128});
  }
  if (p && std::strcmp(mode, "right")) ::operator delete(p, 48);
  std::printf("done\n");
  return 0;
}
