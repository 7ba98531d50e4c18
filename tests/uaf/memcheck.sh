#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# memcheck.sh - proves that Valgrind memcheck reports a user's use after
# free inside an arena and inside a pool (every sync mode): runs
# tests/uaf/arena_uaf and pool_uaf from the build tree under memcheck and
# checks that the invalid write and the invalid read are reported at the
# source lines marked UAF-WRITE and UAF-READ, with memcheck's error exit
# code, and that the same programs run with "control" (no bad access) are
# clean (exit 0, no error, no leak).
#
# Usage: tests/uaf/memcheck.sh <build-dir>     (ctest: uaf_memcheck)
# Env:   VALGRIND (default: valgrind)
set -u
build=${1:?usage: memcheck.sh <build-dir>}
here=$(cd "$(dirname "$0")" && pwd)
vg=${VALGRIND:-valgrind}
bin="$build/tests/uaf"
errcode=99
failures=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail() {
  echo "memcheck.sh: FAIL: $*" >&2
  failures=$((failures + 1))
}

command -v "$vg" >/dev/null || { echo "memcheck.sh: FAIL: valgrind not found" >&2; exit 1; }
for p in arena_uaf pool_uaf; do
  [ -x "$bin/$p" ] || { echo "memcheck.sh: FAIL: $bin/$p not built" >&2; exit 1; }
done
if [ "${AK_HAVE_VALGRIND_H-unset}" != unset ] && [ -z "${AK_HAVE_VALGRIND_H}" ]; then
  echo "memcheck.sh: FAIL: the library was built without <valgrind/memcheck.h> (AK_HAVE_VALGRIND unset):" \
    "arenas and pools cannot tell memcheck what is free" >&2
  exit 1
fi

# line_of FILE MARKER: the line number of MARKER in tests/uaf/FILE.
line_of() { grep -n "$2" "$here/$1" | head -1 | cut -d: -f1; }

# run NAME LOG ARGS...: the program under memcheck; prints its exit status.
run() {
  local log=$2
  shift 2
  "$vg" --tool=memcheck --error-exitcode=$errcode --leak-check=full --errors-for-leak-kinds=definite,indirect \
    --log-file="$log" "$@" >"$log.out" 2>&1
  echo $?
}

# reported LOG KIND FILE LINE: true if memcheck reported "KIND of size N"
# with the top frame at FILE:LINE.
reported() {
  awk -v kind="$2" -v where="$3:$4)" '
    index($0, kind " of size") { want = 1; next }
    want && / at 0x/ { if (index($0, where)) found = 1; want = 0 }
    END { exit found ? 0 : 1 }' "$1"
}

# check NAME SRC PROGRAM ARGS...: the buggy run and the control run.
check() {
  local name=$1 src=$2
  shift 2
  local lw lr rc log
  lw=$(line_of "$src" "/\* UAF-WRITE \*/")
  lr=$(line_of "$src" "/\* UAF-READ \*/")
  log="$tmp/$name.bug"
  rc=$(run "$name" "$log" "$@")
  local ok=1
  [ "$rc" = $errcode ] || { fail "$name: memcheck exit status $rc, expected $errcode (errors found)"; ok=0; }
  reported "$log" "Invalid write" "$src" "$lw" ||
    { fail "$name: no 'Invalid write' reported at $src:$lw"; ok=0; }
  reported "$log" "Invalid read" "$src" "$lr" ||
    { fail "$name: no 'Invalid read' reported at $src:$lr"; ok=0; }
  grep -q "ERROR SUMMARY: 2 errors from 2 contexts" "$log" ||
    { fail "$name: expected exactly the 2 errors, got: $(grep 'ERROR SUMMARY' "$log")"; ok=0; }
  [ $ok = 1 ] || { echo "---- memcheck log of $name:"; cat "$log" "$log.out"; }
  log="$tmp/$name.control"
  rc=$(run "$name" "$log" "$@" control)
  if [ "$rc" != 0 ] || ! grep -q "ERROR SUMMARY: 0 errors" "$log"; then
    fail "$name control (no bug): exit status $rc, $(grep 'ERROR SUMMARY' "$log")"
    echo "---- memcheck log of $name control:"
    cat "$log" "$log.out"
    ok=0
  fi
  [ $ok = 1 ] && echo "memcheck.sh: ok: $name: invalid write at $src:$lw and read at $src:$lr reported; control clean"
}

check arena arena_uaf.c "$bin/arena_uaf"
for mode in none spinlock lockfree threads; do
  check "pool-$mode" pool_uaf.c "$bin/pool_uaf" "$mode"
done

if [ $failures -ne 0 ]; then
  echo "memcheck.sh: $failures check(s) failed" >&2
  exit 1
fi
echo "memcheck.sh: all use-after-free reports present"
