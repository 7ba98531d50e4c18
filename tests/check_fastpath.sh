#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Counts the instructions of the arena fast path in an object file built
# from tests/fastpath_probe.c: for each probe, the instructions from the
# function's entry to its first `ret` (the hit path) must be at most 10
# (the ret excluded), with exactly one conditional branch.
# Usage: check_fastpath.sh OBJECT [--print]
set -euo pipefail
obj=$1
status=0
for fn in ak_probe_alloc_8_8 ak_probe_alloc_8_1 ak_probe_alloc_48_16; do
  body=$(objdump -d --no-show-raw-insn -M att "$obj" | awk -v f="<$fn>:" '$2 == f {on=1; next} on && /^$/ {exit} on {print}')
  hit=$(echo "$body" | awk '{sub(/^ *[0-9a-f]+:\t/, ""); print} /\tret|^ret/ {exit}' | sed -n '1,/ret/p')
  n=$(echo "$hit" | grep -vcE '^\s*ret')
  branches=$(echo "$hit" | grep -cE '^\s*j(a|ae|b|be|c|e|g|ge|l|le|na|nae|nb|nbe|nc|ne|ng|nge|nl|nle|no|np|ns|nz|o|p|pe|po|s|z)\b' || true)
  echo "$fn: $n instructions before ret, $branches conditional branch(es)"
  [ "${2:-}" = "--print" ] && echo "$body"
  if [ "$n" -gt 10 ] || [ "$branches" -ne 1 ]; then
    echo "FAIL: $fn exceeds 10 instructions / 1 conditional branch" >&2
    status=1
  fi
done
exit $status
