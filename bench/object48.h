/* SPDX-License-Identifier: MIT */
// object48.h - the pool-newdelete benchmarks' 48-byte object, whose
// constructor and destructor do real stores (shared by the single- and
// multi-thread scenarios).
#ifndef AK_BENCH_OBJECT48_H
#define AK_BENCH_OBJECT48_H

#include <cstdint>

#include "bench.h"

namespace akb {

struct data_t {
  std::uint64_t id;
  double value;
  std::uint32_t flags;
  std::uint32_t refs;
  char tag[24];
  explicit data_t(std::uint64_t i) noexcept
      : id(i), value(static_cast<double>(i) * 0.5), flags(1), refs(1), tag{'d', 'a', 't', 'a', 0} {}
  ~data_t() {
    flags = 0;
    refs = 0;
    clobber();
  }
};
static_assert(sizeof(data_t) == 48, "data_t must be 48 bytes");

}  // namespace akb

#endif  // AK_BENCH_OBJECT48_H
