#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Counts the instructions of the inline fast paths in an object file built
# from tests/fastpath_probe.c: for each probe, the instructions from the
# function's entry to its first `ret` (the hit path), the ret excluded.
# Arena: at most 10, with exactly one conditional branch. Pool: at most the
# counts the hit paths had when the probes were added (gcc -O2), with at
# most as many conditional branches.
# Usage: check_fastpath.sh OBJECT [--print]
set -euo pipefail
obj=$1
status=0
# Disassembled once, and read from a string: awk stops early, and a pipe
# from objdump would then die of SIGPIPE (a failure under pipefail).
dis=$(objdump -d --no-show-raw-insn -M att "$obj")
for fn in ak_probe_alloc_8_8 ak_probe_alloc_8_1 ak_probe_alloc_48_16; do
  body=$(awk -v f="<$fn>:" '$2 == f {on=1; next} on && /^$/ {exit} on {print}' <<<"$dis")
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
# The pool's hit paths: probe, most instructions, most conditional branches.
while read -r fn max maxbr; do
  body=$(awk -v f="<$fn>:" '$2 == f {on=1; next} on && /^$/ {exit} on {print}' <<<"$dis")
  hit=$(echo "$body" | awk '{sub(/^ *[0-9a-f]+:\t/, ""); print} /\tret|^ret/ {exit}' | sed -n '1,/ret/p')
  n=$(echo "$hit" | grep -vcE '^\s*ret')
  branches=$(echo "$hit" | grep -cE '^\s*j(a|ae|b|be|c|e|g|ge|l|le|na|nae|nb|nbe|nc|ne|ng|nge|nl|nle|no|np|ns|nz|o|p|pe|po|s|z)\b' || true)
  echo "$fn: $n instructions before ret (at most $max), $branches conditional branch(es) (at most $maxbr)"
  [ "${2:-}" = "--print" ] && echo "$body"
  if [ -z "$body" ] || [ "$n" -gt "$max" ] || [ "$branches" -gt "$maxbr" ]; then
    echo "FAIL: $fn exceeds $max instructions / $maxbr conditional branches (or is missing)" >&2
    status=1
  fi
done <<'LIMITS'
ak_probe_pool_alloc_none 6 1
ak_probe_pool_free_none 10 2
ak_probe_pool_alloc_threads 17 2
ak_probe_pool_free_threads 21 3
LIMITS
exit $status
