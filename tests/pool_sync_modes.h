// SPDX-License-Identifier: MIT
// pool_sync_modes.h - the four pool sync modes as GoogleTest parameters,
// with readable test names (Threads, None, Spinlock, Lockfree).
#ifndef AK_TESTS_POOL_SYNC_MODES_H
#define AK_TESTS_POOL_SYNC_MODES_H

#include <gtest/gtest.h>

#include <string>

#include "arenakit/pool.h"

// INSTANTIATE_TEST_SUITE_P(AllModes, Suite, AK_ALL_SYNC_MODES, ak_sync_mode_name);
#define AK_ALL_SYNC_MODES ::testing::Values(AK_SYNC_NONE, AK_SYNC_THREADS, AK_SYNC_SPINLOCK, AK_SYNC_LOCKFREE)

inline std::string ak_sync_mode_name(const ::testing::TestParamInfo<ak_sync> &i) {
  switch (i.param) {
    case AK_SYNC_NONE: return "None";
    case AK_SYNC_THREADS: return "Threads";
    case AK_SYNC_SPINLOCK: return "Spinlock";
    default: return "Lockfree";
  }
}

#endif  // AK_TESTS_POOL_SYNC_MODES_H
