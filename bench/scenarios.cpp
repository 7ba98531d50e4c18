/* SPDX-License-Identifier: MIT */
// scenarios.cpp - the registry of benchmark scenarios.
//
// To add a scenario: write bench/scenario_<name>.cpp defining
// `const akb::Scenario akb_scenario_<name>` (see bench.h), declare it below
// and add it to the list. `ak_bench run all` runs them in this order.
#include "bench.h"

extern const akb::Scenario akb_scenario_seed001;
extern const akb::Scenario akb_scenario_seed000_st;
extern const akb::Scenario akb_scenario_seed000_mt;
extern const akb::Scenario akb_scenario_seed002;
extern const akb::Scenario akb_scenario_seed004;
extern const akb::Scenario akb_scenario_churn;
extern const akb::Scenario akb_scenario_collatz;
extern const akb::Scenario akb_scenario_workloads;

namespace akb {

const std::vector<const Scenario *> &scenarios() {
  static const std::vector<const Scenario *> list = {
      &akb_scenario_seed001, &akb_scenario_seed000_st, &akb_scenario_seed000_mt, &akb_scenario_seed002,
      &akb_scenario_seed004, &akb_scenario_churn,      &akb_scenario_collatz,    &akb_scenario_workloads,
  };
  return list;
}

}  // namespace akb
