/* SPDX-License-Identifier: MIT */
// mw_workloads.h - the workloads of malloc-workloads, one function each
// (bench/mw_workloads.cpp). What each one does, and what the scenario
// measures around it, is in the header comment of
// bench/scenario_malloc_workloads.cpp; this file is only the table from a
// workload's name to the function that runs it.
//
// A workload runs in the calling process (a sub-process of its own,
// mw_common.h) under whatever malloc is preloaded, with plain malloc, calloc,
// realloc and free calls. `scale` multiplies its size (1: the full run,
// 0.15: --quick); the parameters and random seeds are fixed, so that every
// allocator column runs the same sequence of requests (bar the order the
// threads are scheduled in). Every block carries a tag or a pattern that is
// checked before it is freed; a block that comes back altered is counted
// (corrupted_blocks()), not aborted on.
#ifndef AK_BENCH_MW_WORKLOADS_H
#define AK_BENCH_MW_WORKLOADS_H

#include <cstddef>
#include <cstdint>

namespace akmw {

struct Workload {
  const char *name;           // as in the tables and in `wl=<name>`
  void (*run)(double scale);  // runs it once, in this process
};

// Every workload, in table order.
extern const Workload kWorkloads[];
extern const std::size_t kNumWorkloads;

// The workload called `name`; nullptr if there is none.
const Workload *find_workload(const char *name);

// Blocks that came back altered so far, in this process (every workload).
std::uint64_t corrupted_blocks();

}  // namespace akmw

#endif  // AK_BENCH_MW_WORKLOADS_H
