#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The benchmark checks that the committed reports fail, listed in the
# README from the reports themselves, so that the README never names a
# check that passes or misses one that fails (results/ is the one source
# of every figure; the README's list is generated from it).
#
#   scripts/open_checks.sh           prints the list: one line per `- FAIL:`
#                                    line of results/<scenario>.md, linked
#                                    to its report ("- none" if none fails)
#   scripts/open_checks.sh --write   replaces the README's list (between
#                                    the open-checks markers) with it
#   scripts/open_checks.sh --check   exits 1, naming the difference, when
#                                    the README's list is not that one
#
# scripts/bench.sh runs --write after a full run into results/; a ctest
# (open_checks_current) runs --check. ROOT (default: this checkout) names
# the tree to read and write.
set -euo pipefail
root=${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
readme=$root/README.md
start='<!-- open-checks:start -->'
end='<!-- open-checks:end -->'

# The list, from the reports: results/<scenario>.md only (not the tables
# of one report, *.table.md, nor the baselines' subdirectories).
generate() {
  local f name any=0
  for f in "$root"/results/*.md; do
    name=$(basename "$f" .md)
    case "$name" in *.table | headline-tables) continue ;; esac
    while IFS= read -r line; do
      any=1
      printf -- '- [%s](results/%s.md): %s\n' "$name" "$name" "${line#- FAIL: }"
    done < <(grep -E '^- FAIL: ' "$f" || true)
  done
  [ $any -eq 1 ] || echo "- none"
}

# The README's current list (between the markers, exclusive).
current() {
  awk -v s="$start" -v e="$end" '$0 == e { on = 0 } on { print } $0 == s { on = 1 }' "$readme"
}

markers_ok() {
  if [ "$(grep -cxF -- "$start" "$readme")" != 1 ] || [ "$(grep -cxF -- "$end" "$readme")" != 1 ]; then
    echo "open_checks.sh: $readme needs one '$start' line and one '$end' line" >&2
    return 1
  fi
}

case "${1:-}" in
  "")
    generate
    ;;
  --write)
    markers_ok
    list=$(mktemp)
    trap 'rm -f "$list" "$readme.tmp"' EXIT
    generate >"$list"
    awk -v s="$start" -v e="$end" -v list="$list" '
      $0 == s { print; while ((getline line < list) > 0) print line; skip = 1; next }
      $0 == e { skip = 0 }
      !skip { print }
    ' "$readme" >"$readme.tmp"
    mv "$readme.tmp" "$readme"
    echo "open_checks.sh: README.md lists $(generate | grep -vcxF -- '- none') failing check(s) of results/"
    ;;
  --check)
    markers_ok
    if diff <(current) <(generate) >/dev/null; then
      echo "open_checks.sh: README.md lists the failing checks of results/ ($(generate | grep -vcxF -- '- none'))"
    else
      echo "open_checks.sh: README.md's list of failing checks is not that of results/" \
        "(run scripts/open_checks.sh --write); README (<) against results (>):" >&2
      diff <(current) <(generate) >&2 || true
      exit 1
    fi
    ;;
  *)
    echo "usage: $0 [--write | --check]" >&2
    exit 2
    ;;
esac
