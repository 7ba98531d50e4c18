#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/heap_profile.sh end to end:
#   1. on tests/prof_prog (which calls the profiler's hooks itself), with
#      --lib none: the table names its three sites, the largest (60 % of
#      the bytes) first, and the call graph is written when dot is there;
#   2. with the drop-in preloaded (MALLOC_SO given) on /bin/true: a profile
#      is written and the report says that it holds no samples.
# Exits 77 (skipped) when neither pprof nor go is installed.
#   prof_script_test.sh HEAP_PROFILE_SH PROF_PROG [MALLOC_SO]
set -uo pipefail
script=${1:?usage: prof_script_test.sh HEAP_PROFILE_SH PROF_PROG [MALLOC_SO]}
prog=${2:?prof_prog path}
malloc_so=${3:-}
if ! command -v pprof >/dev/null 2>&1 && ! command -v go >/dev/null 2>&1; then
  echo "prof_script_test: skipped: neither pprof nor go is installed (scripts/deps.sh test installs golang-go)"
  exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0
report=$("$script" --lib none --out "$dir/a" --sample 65536 -- "$prog" 32 2>"$dir/a.err")
rc=$?
echo "$report"
[ $rc -eq 0 ] || { echo "FAIL: heap_profile.sh exited $rc: $(cat "$dir/a.err")"; fail=1; }
sites=$(grep -oE 'prog_site_(sessions|cache|parse)' <<<"$report" | tr '\n' ' ')
[ "$sites" = "prog_site_sessions prog_site_cache prog_site_parse " ] ||
  { echo "FAIL: the table lists '$sites', not the three sites largest first"; fail=1; }
if command -v dot >/dev/null 2>&1; then
  grep -q '<svg' "$dir/a/heap.svg" 2>/dev/null || { echo "FAIL: no call graph in $dir/a/heap.svg"; fail=1; }
fi
if [ -n "$malloc_so" ]; then
  "$script" --lib "$malloc_so" --out "$dir/b" -- /bin/true >"$dir/b.out" 2>&1
  rc=$?
  cat "$dir/b.out"
  [ $rc -eq 0 ] || { echo "FAIL: heap_profile.sh on /bin/true exited $rc"; fail=1; }
  ls "$dir"/b/heap.*.pb >/dev/null 2>&1 || { echo "FAIL: no profile from the preloaded /bin/true"; fail=1; }
  grep -q "holds no samples" "$dir/b.out" || { echo "FAIL: the empty profile was not reported as empty"; fail=1; }
fi
[ $fail -eq 0 ] && echo "prof_script_test: passed"
exit $fail
