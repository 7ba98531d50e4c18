#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs the Debian packages arenakit's tests and benchmarks use, when
# they are missing. Usage: scripts/deps.sh [test|bench|all]  (default all).
# Needs root (or sudo) only when something is missing.
set -euo pipefail
what=${1:-all}
# test: the native stages (golang-go: `go tool pprof` reads the heap
# profiler's dumps; graphviz: scripts/heap_profile.sh's call graph;
# python3.11-dbg: a real program with symbols for the profiler's preload
# test), then
# the platform stages (aarch64: cross compilers, GoogleTest's sources to
# build for aarch64, qemu-user; musl: musl-tools).
test_pkgs=(cmake g++ make googletest libgtest-dev valgrind clang libclang-rt-14-dev pkgconf binutils git
  golang-go graphviz python3.11-dbg gcc-aarch64-linux-gnu g++-aarch64-linux-gnu qemu-user musl-tools)
bench_pkgs=(libjemalloc-dev libgoogle-perftools-dev libmimalloc-dev python3-matplotlib libboost-dev)
realprog_pkgs=(python3 libpython3.11-testsuite git sqlite3 gcc coreutils)
case "$what" in
  test) pkgs=("${test_pkgs[@]}") ;;
  bench) pkgs=("${test_pkgs[@]}" "${bench_pkgs[@]}") ;;
  realprog) pkgs=("${realprog_pkgs[@]}") ;;
  all) pkgs=("${test_pkgs[@]}" "${bench_pkgs[@]}" "${realprog_pkgs[@]}") ;;
  *) echo "usage: $0 [test|bench|all]" >&2; exit 2 ;;
esac
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "deps.sh: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
