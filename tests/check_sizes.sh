#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Size budgets that keep the code readable (CONTRIBUTING.md):
# no file of src/ over 700 lines (a file does one thing), no function of
# src/ over 80 lines (signature to closing brace: one that does more is
# split into named steps), the public
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
# Functions: a definition starts at column 0 with a name and a parenthesis
# (clang-format's layout), opens its body with `{` at the end of that line
# or of a continuation line, and closes it with a `}` alone at column 0; a
# definition on one line is skipped.
# shellcheck disable=SC2016 # an awk program: its $0 and $ are awk's
fn_awk='
FNR == 1 { cand = 0; infn = 0 }
!infn && !cand && /^[A-Za-z_][A-Za-z0-9_ *,]*[A-Za-z0-9_]+\(/ && !/^(typedef|struct|union|enum)/ { cand = FNR; name = $0 }
cand && !infn && /[;}][ \t]*(\/\*.*\*\/)?[ \t]*$/ { cand = 0 }
cand && !infn && /\{[ \t]*$/ { infn = 1 }
infn && /^\}[ \t]*$/ {
  if (FNR - cand + 1 > max) {
    sub(/\(.*/, "", name)
    printf "check_sizes: %s:%d: %s has %d lines (budget: at most %d)\n", FILENAME, cand, name, FNR - cand + 1, max
    bad = 1
  }
  cand = 0; infn = 0
}
END { exit bad }'
mapfile -t csrc < <(find "$root/src" -type f \( -name '*.c' -o -name '*.h' \) | sort)
if [ ${#csrc[@]} -gt 0 ] && ! out=$(awk -v max=80 "$fn_awk" "${csrc[@]}"); then
  echo "${out//"$root"\//}"
  bad=1
fi
[ -f "$root/include/arenakit/pool.h" ] && over "$root/include/arenakit/pool.h" 250
[ -f "$root/bench/main.cpp" ] && over "$root/bench/main.cpp" 300
if [ "$bad" -ne 0 ]; then exit 1; fi
n=$(find "$root/src" -type f \( -name '*.c' -o -name '*.h' -o -name '*.S' \) | wc -l)
echo "check_sizes: $n files of src/ within 700 lines and their functions within 80, pool.h under 250," \
  "bench/main.cpp under 300"
