#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Same-run comparison of two builds of the drop-in malloc (docs/benchmarks.md,
# "Against an earlier build").
#
#   scripts/bench_baseline.sh REV            builds libarenakit-malloc.so of
#                                            git revision REV (Release) in
#                                            build-baseline-<rev>/, then runs
#                                            the malloc workload set with this
#                                            checkout's library and REV's in
#                                            the same glibc child, interleaved
#                                            (columns arenakit, arenakit-base)
#   scripts/bench_baseline.sh REV --reps 5   options go to `ak_bench run`
#
# Results: results/baseline-<rev>/malloc-workloads.md|csv, whose checks say
# whether the geometric mean time of the two builds is within 2 % and
# whether this build's peak RSS geometric mean is not higher. The other
# allocators are left out (their columns are in results/malloc-workloads.md).
# Takes about 10 minutes with 5 repetitions on 2 quiet cores. Environment:
# BUILD_DIR (this checkout's build, default build-bench), JOBS (default 2).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
case "${1:-}" in
  ""|-*) sed -n '3,${/^#/!q;s/^# \{0,1\}//;p}' "$0"; [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; exit $? ;;
esac
rev=$(git -C "$root" rev-parse --short=7 "$1^{commit}") || {
  echo "bench_baseline.sh: $1 is not a revision of this repository" >&2
  exit 2
}
shift
build=${BUILD_DIR:-$root/build-bench}
base=$root/build-baseline-$rev
jobs=${JOBS:-2}
started=$(date +%s)

"$root/scripts/deps.sh" bench
if [ ! -f "$base/libarenakit-malloc.so" ]; then
  echo "bench_baseline.sh: building $rev's libarenakit-malloc.so in $base"
  rm -rf "$base.src"
  mkdir -p "$base.src"
  git -C "$root" archive "$rev" | tar -x -C "$base.src"
  cmake -S "$base.src" -B "$base" -DCMAKE_BUILD_TYPE=Release -DAK_BUILD_TESTS=OFF >/dev/null
  cmake --build "$base" -j "$jobs" --target arenakit-malloc >/dev/null
fi
echo "bench_baseline.sh: building this checkout's ak_bench in $build"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DAK_BUILD_TESTS=OFF -DAK_BUILD_BENCH=ON >/dev/null
cmake --build "$build" -j "$jobs" --target ak_bench arenakit-malloc >/dev/null
out=$root/results/baseline-$rev
AK_BENCH_BASELINE="$base/libarenakit-malloc.so" \
  "$build/bench/ak_bench" run malloc-workloads --allocators glibc --reps 5 --out "$out" "$@"
echo "bench_baseline.sh: done in $(($(date +%s) - started)) s; results in $out"
