/* SPDX-License-Identifier: MIT */
// cxx_standard_probe.cpp - compiled by the cxx14_error test: with -std=c++14
// it must fail with arenakit.hpp's one #error; with -std=c++17 it compiles.
#include <arenakit/arenakit.hpp>

int main() { return 0; }
