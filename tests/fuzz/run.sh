#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/fuzz/run.sh - builds the libFuzzer targets with clang and fuzzes
# each component for a bounded time.
#
#   tests/fuzz/run.sh [SECONDS_PER_TARGET]      (default 60)
#   env: BUILD_DIR (default build-fuzz), FUZZ_TARGETS ("arena pool malloc"),
#        FUZZ_VARIANTS ("asan fast"), FUZZ_PARALLEL (targets fuzzed side by
#        side, default AK_JOBS or 2), FUZZ_JOBS (parallel libFuzzer jobs per
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
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# Fuzzes target $1, its variants one after the other (the second starts
# from the corpus the first grew); its output goes to $work/$1.out, its
# summary lines to $work/$1.summary; returns 1 if a variant failed.
fuzz_target() {
  local t=$1 v status=0
  local corpus="$work/corpus-$t" # shared by the variants: the second starts from what the first found
  local reg="tests/fuzz/regressions/$t"
  mkdir -p "$corpus"
  cp tests/fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null || true
  for v in $variants; do
    local bin="$(dir_of "$v")/tests/fuzz/fuzz_$t"
    local art="$work/artifacts-$t-$v/"
    mkdir -p "$art"
    local dirs=("$corpus")
    [ -d "$reg" ] && dirs+=("$reg")
    local log="$work/$t-$v.log"
    echo "==== fuzz: $t ($v) for ${vsecs}s (corpus $(ls "$corpus" | wc -l) files)"
    local extra=()
    [ "$jobs" -gt 1 ] && extra=(-jobs="$jobs" -workers="$jobs")
    "$bin" -max_total_time="$vsecs" -timeout="$tmo" -rss_limit_mb="$rss" -artifact_prefix="$art" \
      -print_final_stats=1 "${extra[@]}" "${dirs[@]}" >"$log" 2>&1
    local rc=$?
    [ "$jobs" -gt 1 ] && cat fuzz-*.log >>"$log" 2>/dev/null && rm -f fuzz-*.log
    local execs cov ft found
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
      echo "fuzz $t ($v): ${execs} execs, cov ${cov:-?}, ft ${ft:-?}, FAILED (inputs in $reg/)" >>"$work/$t.summary"
    else
      echo "fuzz $t ($v): ${execs} execs in ${vsecs}s, cov ${cov:-?}, ft ${ft:-?}, ok" >>"$work/$t.summary"
    fi
  done
  return $status
}

# The targets run side by side, FUZZ_PARALLEL at a time (default AK_JOBS,
# else 2: a libFuzzer process uses one core); their outputs are printed in
# order once each is done. With FUZZ_JOBS > 1 (libFuzzer's workers write
# fuzz-N.log in the current directory) one target at a time.
par=${FUZZ_PARALLEL:-${AK_JOBS:-2}}
case "$par" in '' | *[!0-9]* | 0) par=1 ;; esac
[ "$jobs" -gt 1 ] && par=1
status=0
declare -A pid_of=()
running=()
for t in $targets; do
  while [ ${#running[@]} -ge "$par" ]; do
    wait -n 2>/dev/null || true
    still=()
    for r in "${running[@]}"; do kill -0 "${pid_of[$r]}" 2>/dev/null && still+=("$r"); done
    running=("${still[@]}")
  done
  fuzz_target "$t" >"$work/$t.out" 2>&1 &
  pid_of[$t]=$!
  running+=("$t")
done
summary=()
for t in $targets; do
  wait "${pid_of[$t]}" || status=1
  cat "$work/$t.out"
  while IFS= read -r line; do summary+=("$line"); done <"$work/$t.summary"
done
printf '%s\n' "${summary[@]}"
if [ "$status" -ne 0 ]; then
  echo "fuzz: FAILED - reproduce with $build[-fast]/tests/fuzz/fuzz_<component> <input>; the inputs now run in fuzz_replay_<component>"
fi
exit "$status"
