#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run.sh - the soak stage: builds ak_soak in a release tree and a hardened
# tree (only that target) and runs both at the same time for SECONDS
# (default 60; SOAK_SERIAL=1 runs them one after the other). Exits non-zero
# if either build or either run fails; prints one summary line per build.
#
# Usage: tests/soak/run.sh [SECONDS]
# Env:   BUILD_DIR    release tree (default build-soak); the hardened tree is
#                     ${BUILD_DIR}-hardened
#        SOAK_THREADS worker threads (default 4)
#        SOAK_SEED    seed (default: the date, printed, so a failure can be replayed)
#        SOAK_ARGS    more ak_soak options (e.g. --verbose)
#        JOBS         build parallelism (default 2)
set -u
seconds=${1:-60}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 2
build=${BUILD_DIR:-build-soak}
threads=${SOAK_THREADS:-4}
seed=${SOAK_SEED:-$(date +%Y%m%d)}
jobs=${JOBS:-2}
summaries=()
status=0

built=()
build_tree() { # name dir cmake-args...: configures and builds ak_soak
  local name=$1 dir=$2
  shift 2
  echo "==== soak: building $name ($dir)"
  mkdir -p "$dir"
  if ! cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAK_BUILD_TESTS=ON -DAK_BUILD_BENCH=OFF -DAK_WERROR=ON "$@" \
    >"$dir/configure.log" 2>&1; then
    tail -20 "$dir/configure.log"
    summaries+=("soak $name: FAIL (configure; see $dir/configure.log)")
    status=1
    return
  fi
  if ! cmake --build "$dir" --target ak_soak -j"$jobs"; then
    summaries+=("soak $name: FAIL (build)")
    status=1
    return
  fi
  built+=("$name:$dir")
}

run_soak() { # name dir: runs the soak, output to dir/soak.log, exit code to dir/soak.rc
  local name=$1 dir=$2
  echo "==== soak: $name build ($dir), $seconds s, $threads threads, seed $seed"
  # shellcheck disable=SC2086
  "$dir/tests/soak/ak_soak" --seconds "$seconds" --threads "$threads" --seed "$seed" ${SOAK_ARGS:-} \
    >"$dir/soak.log" 2>&1
  echo $? >"$dir/soak.rc"
}

collect() { # name dir: the summary line of a finished run
  local name=$1 dir=$2 log="$2/soak.log" rc
  rc=$(cat "$dir/soak.rc" 2>/dev/null || echo 99)
  echo "---- soak $name output"
  cat "$log"
  local line
  line=$(grep -E '^ak_soak: summary: ' "$log" | sed -E 's/^ak_soak: summary: //')
  if [ "$rc" -eq 0 ] && [ -n "$line" ]; then
    summaries+=("soak $name: $line")
  else
    summaries+=("soak $name: FAIL (exit $rc, seed $seed, log $log): $(grep -m1 'FAIL' "$log" || echo "${line:-no summary}")")
    status=1
  fi
}

build_tree release "$build"
build_tree hardened "$build-hardened" -DAK_HARDENED=ON
pids=()
for b in "${built[@]}"; do
  if [ "${SOAK_SERIAL:-0}" = 1 ]; then
    run_soak "${b%%:*}" "${b#*:}"
  else
    run_soak "${b%%:*}" "${b#*:}" &
    pids+=($!)
  fi
done
[ ${#pids[@]} -gt 0 ] && wait "${pids[@]}"
for b in "${built[@]}"; do collect "${b%%:*}" "${b#*:}"; done

echo "==== soak summary"
printf '%s\n' "${summaries[@]}"
exit $status
