#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# No measured figures in the library's sources (CONTRIBUTING.md): comments
# state the mechanism and the invariant; measurements, CPU models and
# history go to results/ and commit messages, where they are dated and
# kept once. A figure in a comment goes stale with the next change and
# contradicts the table that measured it. This check finds the usual
# forms of one in src/, include/ and docs/design.md: a median or a comparison with a
# number on each side ("13 ms against 65"), a ratio to another allocator
# ("1.2x mimalloc's", "1.5x the page faults"), a share ("8 % more"), a
# count of page faults against another, a number of runs, a CPU model. Constants and the units of parameters ("delay in ms") pass.
#   check_figures.sh SOURCE_DIR
set -uo pipefail
root=${1:?usage: check_figures.sh SOURCE_DIR}
[ -d "$root/src" ] || { echo "check_figures: no src/ in $root" >&2; exit 2; }
dirs=("$root/src")
[ -d "$root/include" ] && dirs+=("$root/include")
pattern='medians? (of|over) [0-9]|[0-9][0-9.,]*k? (minor )?(page )?faults against|'
pattern+='[0-9][0-9.]*x (mimalloc|glibc|tcmalloc|jemalloc)|'
pattern+='[0-9][0-9.,]* ?(ns|us|ms|s|MiB|GiB|KiB|%) (against|vs\.?) [0-9]|'
pattern+='[0-9] ?% (more|less|fewer|of the [a-z]+.s)|[0-9]x the (page faults|peak)|'
pattern+='[0-9]+ (interleaved )?runs[:,)]|EPYC|Xeon|family [0-9]+ model [0-9]+'
hits=$(grep -rnIE --include='*.c' --include='*.h' --include='*.hpp' --include='*.S' "$pattern" "${dirs[@]}")
if [ -f "$root/docs/design.md" ] && d=$(grep -nHE "$pattern" "$root/docs/design.md"); then
  hits+="${hits:+$'\n'}$d"
fi
if [ -n "$hits" ]; then
  echo "check_figures: measured figures in the sources (move them to results/ or the commit message):"
  echo "${hits//"$root"\//}"
  exit 1
fi
echo "check_figures: no measured figures in src/, include/ and docs/design.md"
