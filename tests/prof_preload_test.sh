#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The heap profiler on a real program under the drop-in preload: Python
# (Debian's python3.11-dbg, the interpreter built with its symbols, so
# that `go tool pprof` names its functions) builds a dict of 300,000
# strings and, with the dict live, writes a profile through ak_prof_dump
# (ctypes). pprof's -top must name Python's own allocation functions
# (_PyMem_RawMalloc and kin: the callers of malloc) as the top in-use
# frames, holding at least 80 % of the in-use bytes.
# Exits 77 (skipped) without go or python3.11-dbg (scripts/deps.sh test
# installs both).
#   prof_preload_test.sh MALLOC_SO
set -uo pipefail
so=${1:?usage: prof_preload_test.sh MALLOC_SO}
py=$(command -v python3.11-dbg || true)
if ! command -v go >/dev/null 2>&1 || [ -z "$py" ]; then
  echo "prof_preload_test: skipped: needs go and python3.11-dbg (scripts/deps.sh test installs them)"
  exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
AK_PROF=1 AK_PROF_SAMPLE=65536 LD_PRELOAD="$so" "$py" - "$dir/heap.pb" <<'PY'
import ctypes, sys
d = {i: ("x%d" % i) * 20 for i in range(300000)}
sys.exit(ctypes.CDLL(None).ak_prof_dump(sys.argv[1].encode()))
PY
rc=$?
[ $rc -eq 0 ] || { echo "FAIL: python under the preload exited $rc (no profile)"; exit 1; }
top=$(go tool pprof -top -sample_index=inuse_space "$dir/heap.pb" 2>/dev/null)
echo "$top" | sed -n '1,16p'
# The rows after the header: flat flat% sum% cum cum% name.
share=$(awk '/flat%/ {t = 1; next} t && $6 ~ /^_?Py(Mem|Object)_(Raw)?(Malloc|Calloc|Realloc)$/ {
  sub(/%/, "", $2); s += $2 } END { printf "%.0f", s }' <<<"$top")
first=$(awk '/flat%/ {getline; print $6; exit}' <<<"$top")
fail=0
[[ "$first" =~ ^_?Py(Mem|Object)_ ]] || { echo "FAIL: the top in-use frame is '$first', not Python's allocator"; fail=1; }
[ "${share:-0}" -ge 80 ] || { echo "FAIL: Python's allocation functions hold ${share:-0} % of the in-use bytes (want >= 80)"; fail=1; }
[ $fail -eq 0 ] && echo "prof_preload_test: passed (Python's allocation functions hold $share % in use)"
exit $fail
