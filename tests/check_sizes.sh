#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Size budgets that keep the code readable (CONTRIBUTING.md):
# no file of src/ over 700 lines (a file does one thing), the public
# include/arenakit/pool.h under 250 (API only: what the inline paths need
# lives in include/arenakit/detail/) and bench/main.cpp under 300 (the
# runner's parts live in files of their own). A file past its budget is
# split by role, not squeezed.
#   check_sizes.sh SOURCE_DIR
set -uo pipefail
root=${1:?usage: check_sizes.sh SOURCE_DIR}
[ -d "$root/src" ] || { echo "check_sizes: no src/ in $root" >&2; exit 2; }
bad=0
over() { # file limit: fails if the file has `limit` lines or more
  local n
  n=$(wc -l <"$1")
  if [ "$n" -ge "$2" ]; then
    echo "check_sizes: ${1#"$root"/} has $n lines (budget: under $2)"
    bad=1
  fi
}
while IFS= read -r f; do over "$f" 701; done < <(find "$root/src" -type f \( -name '*.c' -o -name '*.h' -o -name '*.S' \))
[ -f "$root/include/arenakit/pool.h" ] && over "$root/include/arenakit/pool.h" 250
[ -f "$root/bench/main.cpp" ] && over "$root/bench/main.cpp" 300
if [ "$bad" -ne 0 ]; then exit 1; fi
n=$(find "$root/src" -type f \( -name '*.c' -o -name '*.h' -o -name '*.S' \) | wc -l)
echo "check_sizes: $n files of src/ within 700 lines, pool.h under 250, bench/main.cpp under 300"
