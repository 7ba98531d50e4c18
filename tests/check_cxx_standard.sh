#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check_cxx_standard.sh CXX INCLUDE_DIR GENERATED_INCLUDE_DIR PROBE.cpp
# arenakit.hpp under an older C++: compiling PROBE with -std=c++14 must fail
# with the header's "needs C++17" #error as the only error (no error from
# C++17 names such as std::bool_constant after it); with -std=c++17 it must
# compile. Prints what went wrong and exits 1, else exits 0.
set -uo pipefail
cxx=$1 inc=$2 gen=$3 probe=$4
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if "$cxx" -std=c++14 -fsyntax-only -I"$inc" -I"$gen" "$probe" >"$log" 2>&1; then
  echo "check_cxx_standard: -std=c++14 compiled arenakit.hpp; expected the C++17 #error"
  exit 1
fi
if ! grep -q 'arenakit.hpp needs C++17' "$log"; then
  echo "check_cxx_standard: -std=c++14 failed without the C++17 message:"
  cat "$log"
  exit 1
fi
errors=$(grep -c ': error' "$log")
if [ "$errors" -ne 1 ]; then
  echo "check_cxx_standard: -std=c++14 gave $errors error lines, expected the #error alone:"
  cat "$log"
  exit 1
fi
if ! "$cxx" -std=c++17 -fsyntax-only -I"$inc" -I"$gen" "$probe" >"$log" 2>&1; then
  echo "check_cxx_standard: -std=c++17 does not compile arenakit.hpp:"
  cat "$log"
  exit 1
fi
echo "check_cxx_standard: -std=c++14 stops at the #error alone; -std=c++17 compiles"
