#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# collatz.sh - the Collatz list and array programs built as a user builds a
# program (`gcc -O2`, nothing of arenakit linked) and run under each malloc:
# glibc, mimalloc (if installed) and arenakit's drop-in as installed from a
# cmake build (`cmake --install` into <scratch>/prefix, then LD_PRELOAD of
# lib/libarenakit-malloc.so). Runs are interleaved (glibc, mimalloc,
# arenakit, glibc, ...); prints the best and the median of each, and
# arenakit's time over mimalloc's and glibc's (lower is better).
# Usage: collatz.sh <cmake build dir> <scratch dir> [TOP [THREADS [RUNS]]]
# (defaults: 100000, 4 threads - oversubscribed on a 2-core machine -, 3).
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 <cmake build dir> <scratch dir> [TOP [THREADS [RUNS]]]" >&2; exit 2; }
build=$1 scratch=$2 top=${3:-100000} threads=${4:-4} runs=${5:-3}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/consumer/install.sh
. "$here/install.sh"
ak_consumer_install "$build" "$scratch"
ak=$(find "$prefix" -name 'libarenakit-malloc.so' | head -n 1)
[ -n "$ak" ] || { echo "collatz.sh: no libarenakit-malloc.so under $prefix" >&2; exit 1; }
"${CC:-gcc}" -O2 -pthread -I"$here/.." "$here/collatz_main.c" "$here/../collatz.c" -o "$scratch/collatz"
unset LD_BIND_NOW LD_PRELOAD
declare -A lib=([glibc]="" [arenakit]="$ak")
names=(glibc)
mi=$(ls /usr/lib/*/libmimalloc.so.2 /usr/lib/*/libmimalloc.so 2>/dev/null | head -n 1 || true)
if [ -n "$mi" ]; then lib[mimalloc]=$mi; names+=(mimalloc); fi
names+=(arenakit)
echo "Collatz programs, TOP=$top, $threads threads ($(nproc) CPUs$([ "$threads" -gt "$(nproc)" ] && echo ': oversubscribed')), best and median of $runs interleaved runs, seconds"
echo "$(printf '%-8s' program)$(printf ' %-19s' "${names[@]}")  arenakit/mimalloc  arenakit/glibc"
for prog in list ivec; do
  declare -A times=()
  for ((r = 0; r < runs; r++)); do
    for n in "${names[@]}"; do
      out=$(LD_PRELOAD=${lib[$n]} "$scratch/collatz" "$prog" "$top" "$threads") ||
        { echo "collatz.sh: $prog under $n failed: $out" >&2; exit 1; }
      times[$n]+="${out%% *} "
    done
  done
  line=$(printf '%-8s' "$prog")
  declare -A best=()
  for n in "${names[@]}"; do
    read -r b m < <(echo "${times[$n]}" | tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {print v[1], v[int((NR+1)/2)]}')
    best[$n]=$b
    line+=$(printf ' %-19s' "$b (med $m)")
  done
  ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2fx", a / b}'; }
  [ -n "${best[mimalloc]:-}" ] && line+="  $(printf '%-19s' "$(ratio "${best[arenakit]}" "${best[mimalloc]}")")" || line+="  $(printf '%-19s' n/a)"
  line+="$(ratio "${best[arenakit]}" "${best[glibc]}")"
  echo "$line"
  unset times best
done
