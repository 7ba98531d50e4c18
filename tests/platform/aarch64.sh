#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# aarch64.sh - builds the aarch64 half of scripts/test.sh's aarch64 stage
# (docs/platforms.md): GoogleTest for aarch64 from Debian's source package
# (/usr/src/googletest, no network) and arenakit with every test suite,
# both with the cross compilers of cmake/toolchains/aarch64-linux-gnu.cmake.
# ctest then runs the programs under qemu-user (the toolchain's
# CMAKE_CROSSCOMPILING_EMULATOR); scripts/test.sh does that and counts.
#
# Usage: aarch64.sh <arenakit source dir> <build dir>
#   <build dir>/gtest-prefix   GoogleTest, built once and kept
#   <build dir>/arenakit       the arenakit build (ctest runs here)
# Environment: AK_JOBS (default: nproc), GTEST_SOURCE (default
# /usr/src/googletest). Exits non-zero if a build failed.
set -uo pipefail
[ $# -eq 2 ] || { echo "usage: $0 <arenakit source dir> <build dir>" >&2; exit 2; }
src=$(cd "$1" && pwd) || exit 2
mkdir -p "$2" && build=$(cd "$2" && pwd) || exit 2
jobs=${AK_JOBS:-$(nproc)}
gtest_src=${GTEST_SOURCE:-/usr/src/googletest}
toolchain=$src/cmake/toolchains/aarch64-linux-gnu.cmake
for tool in aarch64-linux-gnu-gcc aarch64-linux-gnu-g++ qemu-aarch64; do
  command -v $tool >/dev/null ||
    { echo "aarch64: $tool not found (Debian: gcc-aarch64-linux-gnu g++-aarch64-linux-gnu qemu-user)" >&2; exit 1; }
done

# GoogleTest for aarch64, once (its sources do not change between runs).
gtest_prefix=$build/gtest-prefix
if [ ! -f "$gtest_prefix/lib/cmake/GTest/GTestConfig.cmake" ]; then
  [ -f "$gtest_src/CMakeLists.txt" ] || { echo "aarch64: no GoogleTest sources in $gtest_src (Debian: googletest)" >&2; exit 1; }
  echo "aarch64: building GoogleTest from $gtest_src"
  glog=$build/gtest-build.log
  if ! cmake -S "$gtest_src" -B "$build/gtest" -DCMAKE_TOOLCHAIN_FILE="$toolchain" -DBUILD_GMOCK=OFF \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$gtest_prefix" >"$glog" 2>&1 ||
    ! cmake --build "$build/gtest" -j"$jobs" >>"$glog" 2>&1 ||
    ! cmake --install "$build/gtest" >>"$glog" 2>&1; then
    tail -30 "$glog"
    echo "aarch64: building GoogleTest failed (log: $glog)" >&2
    exit 1
  fi
fi

# arenakit: a release build with assertions (-O2, no -g: the cross build is
# only here to run), warnings as errors, every test suite.
echo "aarch64: building arenakit and its tests in $build/arenakit"
cmake -S "$src" -B "$build/arenakit" -DCMAKE_TOOLCHAIN_FILE="$toolchain" -DAK_BUILD_TESTS=ON \
  -DAK_BUILD_BENCH=OFF -DAK_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -DGTest_DIR="$gtest_prefix/lib/cmake/GTest" >/dev/null &&
  cmake --build "$build/arenakit" -j"$jobs"
