#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bad_free.sh PRELOAD_LIB PROGRAM: runs tests/preload/bad_free.c under
# LD_PRELOAD for each call and kind of pointer; each run must die of SIGABRT
# with one message naming the call ("arenakit: free(0x...): invalid
# pointer ..."). Prints a line per case; exits 1 if any case fails.
set -u
lib=$1
prog=$2
status=0
for call in free realloc malloc_usable_size; do
  for kind in static stack freed-large unmapped; do
    err=$(LD_PRELOAD=$lib "$prog" "$call" "$kind" 2>&1 >/dev/null)
    rc=$?
    if [ "$rc" -eq 134 ] && printf '%s\n' "$err" | grep -qE "^arenakit: $call\(0x[0-9a-f]+\): invalid pointer"; then
      echo "ok: $call of a $kind pointer: $err"
    else
      echo "FAIL: $call of a $kind pointer: exit $rc, stderr: $err"
      status=1
    fi
  done
done
exit $status
