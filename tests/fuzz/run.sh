#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/fuzz/run.sh - builds the libFuzzer targets with clang and fuzzes
# each component for a bounded time.
#
#   tests/fuzz/run.sh [SECONDS_PER_TARGET]      (default 60)
#   env: BUILD_DIR (default build-fuzz), FUZZ_TARGETS ("arena pool malloc"),
#        FUZZ_VARIANTS ("asan fast"), FUZZ_JOBS (parallel libFuzzer jobs per
#        target, default 1), FUZZ_RSS_MB (default 2048), FUZZ_TIMEOUT
#        (seconds per input, default 10)
#
# Two builds (variants), which share each target's time equally:
#   asan  $BUILD_DIR: library and targets with ASan+UBSan. The arena and
#         pools see ASan and take their annotated (tracked) paths, so a
#         touch of memory they released is reported.
#   fast  $BUILD_DIR-fast: UBSan only, so the inline fast paths (arena bump,
#         AK_SYNC_NONE pool) that ASan builds never take are fuzzed too;
#         the model's checks catch what ASan would.
#
# Each target runs on a temporary copy of tests/fuzz/corpus/<component>/
# (the committed seeds are never rewritten; new inputs can be merged in
# with -merge=1, see docs/testing.md) plus the kept regressions, with
# artifacts going to a temporary directory. A crash, leak, timeout or
# out-of-memory input is copied into tests/fuzz/regressions/<component>/
# (it then runs in every ctest build as part of fuzz_replay_<component>)
# and the script exits 1. One summary line per target: executions,
# coverage, result.
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
secs=${1:-60}
build=${BUILD_DIR:-build-fuzz}
targets=${FUZZ_TARGETS:-arena pool malloc}
jobs=${FUZZ_JOBS:-1}
rss=${FUZZ_RSS_MB:-2048}
tmo=${FUZZ_TIMEOUT:-10}
case "$secs" in '' | *[!0-9]*) echo "usage: $0 [SECONDS_PER_TARGET]" >&2; exit 2 ;; esac

scripts/deps.sh test || { echo "fuzz: could not install dependencies" >&2; exit 1; }

variants=${FUZZ_VARIANTS:-asan fast}
nv=$(echo $variants | wc -w)
vsecs=$(((secs + nv - 1) / nv))
[ "$vsecs" -ge 1 ] || vsecs=1
bt=()
for t in $targets; do bt+=(--target "fuzz_$t"); done
dir_of() { case "$1" in asan) echo "$build" ;; fast) echo "$build-fast" ;; esac; }
for v in $variants; do
  case "$v" in
    asan) san=address,undefined ;;
    fast) san=undefined ;;
    *) echo "fuzz: unknown variant '$v' (asan fast)" >&2; exit 2 ;;
  esac
  d=$(dir_of "$v")
  echo "==== fuzz: building the libFuzzer targets in $d (clang, -fsanitize=$san)"
  if ! CC=clang CXX=clang++ cmake -S "$root" -B "$d" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAK_BUILD_TESTS=ON -DAK_BUILD_BENCH=OFF \
    -DAK_WERROR=ON -DAK_SANITIZE="$san" -DAK_FUZZ=ON >/dev/null; then
    echo "fuzz: cmake configure of $d failed" >&2
    exit 1
  fi
  if ! cmake --build "$d" -j"${AK_JOBS:-2}" "${bt[@]}"; then
    echo "fuzz: build in $d failed" >&2
    exit 1
  fi
done

work=$(mktemp -d "${TMPDIR:-/tmp}/akfuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
status=0
summary=()
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
for t in $targets; do
  for v in $variants; do
    bin="$(dir_of "$v")/tests/fuzz/fuzz_$t"
    corpus="$work/corpus-$t" # shared by the variants: the second starts from what the first found
    art="$work/artifacts-$t-$v/"
    reg="tests/fuzz/regressions/$t"
    if [ ! -d "$corpus" ]; then
      mkdir -p "$corpus"
      cp tests/fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null || true
    fi
    mkdir -p "$art"
    dirs=("$corpus")
    [ -d "$reg" ] && dirs+=("$reg")
    log="$work/$t-$v.log"
    echo "==== fuzz: $t ($v) for ${vsecs}s (corpus $(ls "$corpus" | wc -l) files)"
    extra=()
    [ "$jobs" -gt 1 ] && extra=(-jobs="$jobs" -workers="$jobs")
    "$bin" -max_total_time="$vsecs" -timeout="$tmo" -rss_limit_mb="$rss" -artifact_prefix="$art" \
      -print_final_stats=1 "${extra[@]}" "${dirs[@]}" >"$log" 2>&1
    rc=$?
    [ "$jobs" -gt 1 ] && cat fuzz-*.log >>"$log" 2>/dev/null && rm -f fuzz-*.log
    execs=$(grep -E '^stat::number_of_executed_units:' "$log" | awk '{s += $2} END {print s + 0}')
    cov=$(grep -E '#[0-9]+.*cov: ' "$log" | tail -1 | sed -E 's/.*cov: ([0-9]+).*/\1/')
    ft=$(grep -E '#[0-9]+.*ft: ' "$log" | tail -1 | sed -E 's/.*ft: ([0-9]+).*/\1/')
    found=$(find "$art" -type f | head -20)
    if [ "$rc" -ne 0 ] || [ -n "$found" ]; then
      status=1
      mkdir -p "$reg"
      for f in $found; do cp "$f" "$reg/"; done
      grep -E 'check failed|ERROR|SUMMARY' "$log" | head -5
      echo "fuzz: $t ($v) FAILED (exit $rc); input(s) kept in $reg/: $(for f in $found; do basename "$f"; done | tr '\n' ' ')"
      echo "fuzz: log tail:"
      tail -40 "$log"
      summary+=("fuzz $t ($v): ${execs} execs, cov ${cov:-?}, ft ${ft:-?}, FAILED (inputs in $reg/)")
    else
      summary+=("fuzz $t ($v): ${execs} execs in ${vsecs}s, cov ${cov:-?}, ft ${ft:-?}, ok")
    fi
  done
done
printf '%s\n' "${summary[@]}"
if [ "$status" -ne 0 ]; then
  echo "fuzz: FAILED - reproduce with $build[-fast]/tests/fuzz/fuzz_<component> <input>; the inputs now run in fuzz_replay_<component>"
fi
exit "$status"
