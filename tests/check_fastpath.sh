#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Counts the instructions of the inline fast paths in an object file built
# from tests/fastpath_probe.c: for each probe, the instructions from the
# function's entry to its first `ret` (the hit path), the ret excluded.
# Arena: at most 10, with exactly one conditional branch. Pool: at most the
# counts the hit paths had when the probes were added (gcc -O2; clang's are
# lower), with at most as many conditional branches; --hardened: the probe
# was compiled with -DAK_CONFIG_HARDENED=9 (links encoded and checked, the
# double-free check), whose pool paths have budgets of their own.
# Usage: check_fastpath.sh OBJECT [--hardened] [--print]
set -euo pipefail
obj=$1
status=0
# Disassembled once, and read from a string: awk stops early, and a pipe
# from objdump would then die of SIGPIPE (a failure under pipefail).
dis=$(objdump -d --no-show-raw-insn -M att "$obj")

# probe FUNCTION MAX_INSTRUCTIONS MAX_BRANCHES [MIN_BRANCHES]
probe() {
  local fn=$1 max=$2 maxbr=$3 minbr=${4:-0} body hit n branches
  body=$(awk -v f="<$fn>:" '$2 == f {on=1; next} on && /^$/ {exit} on {print}' <<<"$dis")
  hit=$(awk '{sub(/^ *[0-9a-f]+:\t/, ""); print} /\tret|^ret/ {exit}' <<<"$body" | sed -n '1,/ret/p')
  n=$(grep -vcE '^\s*ret' <<<"$hit" || true)
  branches=$(grep -cE '^\s*j(a|ae|b|be|c|e|g|ge|l|le|na|nae|nb|nbe|nc|ne|ng|nge|nl|nle|no|np|ns|nz|o|p|pe|po|s|z)\b' <<<"$hit" || true)
  echo "$fn: $n instructions before ret (at most $max), $branches conditional branch(es) ($minbr to $maxbr)"
  if [ "${PRINT:-}" = 1 ]; then echo "$body"; fi
  if [ -z "$body" ] || [ "$n" -gt "$max" ] || [ "$branches" -gt "$maxbr" ] || [ "$branches" -lt "$minbr" ]; then
    echo "FAIL: $fn exceeds $max instructions or has not $minbr to $maxbr conditional branches (or is missing)" >&2
    status=1
  fi
}
hardened=0
for arg in "${@:2}"; do
  case $arg in
  --print) PRINT=1 ;;
  --hardened) hardened=1 ;;
  *) echo "check_fastpath.sh: unknown option $arg" >&2; exit 2 ;;
  esac
done

# The arena: ak_arena_alloc for constant size and alignment.
probe ak_probe_alloc_8_8 10 1 1
probe ak_probe_alloc_8_1 10 1 1
probe ak_probe_alloc_48_16 10 1 1

# The pool's hit paths (AK_SYNC_NONE; AK_SYNC_THREADS past the pool's own
# empty current slab). Hardened, the first return of an allocation is the
# pop of a list with more than one slot (its link checked against the
# slab's bounds); a free checks the slot grid and the slot's first word.
if [ $hardened = 1 ]; then
  probe ak_probe_pool_alloc_none 16 3
  probe ak_probe_pool_free_none 29 5
  probe ak_probe_pool_alloc_threads 27 4
  probe ak_probe_pool_free_threads 39 6
else
  probe ak_probe_pool_alloc_none 6 1
  probe ak_probe_pool_free_none 10 2
  probe ak_probe_pool_alloc_threads 17 2
  probe ak_probe_pool_free_threads 21 3
  # SPINLOCK and LOCKFREE: the thread's magazine (the hardened headers
  # leave it to the library, which checks its links). The owner's mark
  # (busy read and set, taken tested, busy cleared: plain moves and one
  # branch) stands where an atomic exchange would; the read of busy (a
  # signal handler's call nested in the owner's) is paid for by the
  # thread-cache key, whose entry offset is one mask.
  probe ak_probe_pool_alloc_magazine 24 3
  probe ak_probe_pool_free_magazine 34 7
fi
exit $status
