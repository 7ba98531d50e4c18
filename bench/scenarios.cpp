// scenarios.cpp - the registry of benchmark scenarios.
//
// To add a scenario: write bench/scenario_<name>.cpp defining
// `const akb::Scenario akb_scenario_<name>` (see bench.h), declare it below
// and add it to the list. `ak_bench run all` runs them in this order.
#include "bench.h"

extern const akb::Scenario akb_scenario_seed001;

namespace akb {

const std::vector<const Scenario *> &scenarios() {
  static const std::vector<const Scenario *> list = {
      &akb_scenario_seed001,
  };
  return list;
}

}  // namespace akb
