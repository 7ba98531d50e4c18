#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# background_start.sh PRELOAD_LIB PROGRAM [RUNS]: runs
# tests/preload/background_start.c under LD_PRELOAD with the default
# background mode, RUNS times (200); exits 1 at the first run that hangs
# (killed after 10 s), fails or does not print "ok". A start of the
# background thread that waits for itself hung about one run in twenty.
set -u
lib=$1
prog=$2
runs=${3:-200}
for ((i = 1; i <= runs; i++)); do
  out=$(env -u AK_BACKGROUND LD_PRELOAD="$lib" timeout 10 "$prog" 2>&1)
  rc=$?
  if [ "$rc" -eq 124 ]; then
    echo "FAIL: run $i of $runs hung (killed after 10 s)"
    exit 1
  fi
  if [ "$rc" -ne 0 ] || [ "$out" != ok ]; then
    echo "FAIL: run $i of $runs: exit $rc, output: $out"
    exit 1
  fi
done
echo "ok: $runs runs, none hung"
