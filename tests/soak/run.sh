#!/usr/bin/env bash
# run.sh - the soak stage: builds ak_soak in a release tree and a hardened
# tree (only that target) and runs it in each for SECONDS (default 60).
# Exits non-zero if either build or either run fails; prints one summary
# line per build.
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

soak() { # name dir cmake-args...
  local name=$1 dir=$2
  shift 2
  echo "==== soak: $name build ($dir), $seconds s, $threads threads, seed $seed"
  mkdir -p "$dir"
  if ! cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAK_BUILD_BENCH=OFF -DAK_WERROR=ON "$@" \
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
  local log="$dir/soak.log" rc
  # shellcheck disable=SC2086
  "$dir/tests/soak/ak_soak" --seconds "$seconds" --threads "$threads" --seed "$seed" ${SOAK_ARGS:-} 2>&1 |
    tee "$log"
  rc=${PIPESTATUS[0]}
  local line
  line=$(grep -E '^ak_soak: summary: ' "$log" | sed -E 's/^ak_soak: summary: //')
  if [ "$rc" -eq 0 ] && [ -n "$line" ]; then
    summaries+=("soak $name: $line")
  else
    summaries+=("soak $name: FAIL (exit $rc, seed $seed, log $log): $(grep -m1 'FAIL' "$log" || echo "${line:-no summary}")")
    status=1
  fi
}

soak release "$build"
soak hardened "$build-hardened" -DAK_HARDENED=ON

echo "==== soak summary"
printf '%s\n' "${summaries[@]}"
exit $status
