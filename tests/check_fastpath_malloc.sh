#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Counts the instructions of the general heap's hit paths in a library or
# object file that holds src/malloc/alloc.c (built optimised): the
# shortest way through the function from its entry to a `ret`, following
# taken and untaken branches inside it; a jump out of the function (a tail
# call to a slow path) is not a way to `ret`. For ak_malloc that is the
# small-size hit (the byte countdown, class table, the class's first page,
# pop its free list, the thread's allocation count);
# for ak_free the local free, into the thread's cached segment, of a block
# that is not its page's last (cached segment, owner, page flags, block
# start, push). Each must stay within its
# budget (the `ret` not counted); the budgets are the counts of the code
# they were set on, so a change that lengthens a hit path fails here.
# Usage: check_fastpath_malloc.sh FILE [--print]
set -euo pipefail
file=$1
print=${2:-}
status=0
check() { # function budget
  local fn=$1 budget=$2 out n branches
  out=$(objdump -dr --no-show-raw-insn -M att "$file" | awk -v f="<$fn>:" '
    $2 == f { on = 1; next }
    on && /^$/ { on = 0; next }
    on && /R_X86_64_/ { if (n > 0) ext[n - 1] = 1; next }
    on && /^ *[0-9a-f]+:\t/ {
      line = $0; sub(/^ */, "", line)
      split(line, parts, "\t"); a = parts[1]; sub(/:$/, "", a)
      ins = parts[2]; sub(/^0+/, "", a); text[n] = ins; idx[a] = n
      split(ins, w, " "); mn[n] = w[1]; tgt[n] = ""
      if (mn[n] ~ /^j/ && w[2] ~ /^[0-9a-f]+$/) { t = w[2]; sub(/^0+/, "", t); tgt[n] = t }
      n++
    }
    END {
      # breadth first from the entry: dist = instructions before this one
      for (i = 0; i < n; i++) dist[i] = -1
      q[0] = 0; dist[0] = 0; head = 0; tail = 1; goal = -1
      while (head < tail) {
        i = q[head++]
        if (mn[i] ~ /^ret/) { goal = i; break }
        nx = 0
        if (mn[i] == "jmp") {
          if (!ext[i] && (tgt[i] in idx)) succ[nx++] = idx[tgt[i]]
        } else {
          if (i + 1 < n) succ[nx++] = i + 1
          if (mn[i] ~ /^j/ && !ext[i] && (tgt[i] in idx)) succ[nx++] = idx[tgt[i]]
        }
        for (k = 0; k < nx; k++) if (dist[succ[k]] < 0) { dist[succ[k]] = dist[i] + 1; from[succ[k]] = i; q[tail++] = succ[k] }
      }
      if (goal < 0) { print "none"; exit }
      m = 0; for (i = goal; i != 0; i = from[i]) path[m++] = i
      path[m++] = 0
      br = 0
      for (k = m - 1; k >= 0; k--) { i = path[k]; if (mn[i] ~ /^j/ && mn[i] != "jmp") br++; lines = lines "\n  " text[i] }
      print dist[goal], br lines
    }')
  if [ "$out" = none ] || [ -z "$out" ]; then
    echo "FAIL: $fn: no path from the entry to a ret in $file" >&2
    status=1
    return
  fi
  read -r n branches <<<"$(echo "$out" | head -1)"
  echo "$fn: $n instructions before ret on the hit path (budget $budget), $branches conditional branch(es)"
  if [ "$print" = "--print" ]; then echo "$out" | tail -n +2; fi
  if [ "$n" -gt "$budget" ]; then
    echo "FAIL: $fn's hit path is $n instructions, over its budget of $budget" >&2
    echo "$out" | tail -n +2 >&2
    status=1
  fi
}
check ak_malloc 21
check ak_free 32
exit $status
