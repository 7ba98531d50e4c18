/* SPDX-License-Identifier: MIT */
// scenarios.cpp - the registry of benchmark scenarios.
//
// To add a scenario: write bench/scenario_<name>.cpp ending in
// AKB_SCENARIO(<id>, ...) (bench.h) and add the id to the list below.
// `ak_bench run all` runs them in this order.
#include <string>

#include "bench.h"

// Every scenario, in `run all` order.
#define AKB_SCENARIO_IDS(X) \
  X(arena_bump)             \
  X(pool_newdelete_st)      \
  X(pool_newdelete_mt)      \
  X(pool_linkedlist)        \
  X(pool_stress)            \
  X(pool_churn)             \
  X(pool_random) X(malloc_collatz) X(malloc_workloads) X(malloc_idle) X(arena_rivals) X(pool_rivals)

#define AKB_DECLARE(id) extern const akb::Scenario akb_scenario_##id;
AKB_SCENARIO_IDS(AKB_DECLARE)
#undef AKB_DECLARE

namespace akb {

const std::vector<const Scenario *> &scenarios() {
#define AKB_ADDRESS(id) &akb_scenario_##id,
  static const std::vector<const Scenario *> list = {AKB_SCENARIO_IDS(AKB_ADDRESS)};
#undef AKB_ADDRESS
  return list;
}

const Scenario *find_scenario(const std::string &name) {
  for (const Scenario *s : scenarios())
    if (name == s->name) return s;
  return nullptr;
}

}  // namespace akb
