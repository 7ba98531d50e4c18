#!/usr/bin/env bash
# The benchmark command (docs/benchmarks.md).
#
#   scripts/bench.sh                 every scenario, full run; tables and plots
#                                    go to results/ (commit them)
#   scripts/bench.sh seed001-arena   only the named scenario(s)
#   scripts/bench.sh --quick         short CI run (build-bench/bench/results-quick)
#   scripts/bench.sh --reps 5        options go to `ak_bench run` (--reps N,
#                                    --rounds N, --n N, --out DIR,
#                                    --allocators a,b, --cpu N|none,
#                                    --no-plot, --strict)
#
# Installs the missing Debian packages (scripts/deps.sh bench: jemalloc,
# tcmalloc, mimalloc, matplotlib), builds ak_bench in build-bench/ (Release)
# and runs it. Environment: BUILD_DIR (default build-bench), JOBS (default 2).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD_DIR:-$root/build-bench}
jobs=${JOBS:-2}

quick=()
names=()
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=(--quick) ;;
    --) shift; extra+=("$@"); break ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    --reps|--rounds|--n|--out|--allocators|--cpu) extra+=("$1" "${2:?$1 needs a value}"); shift ;;
    -*) extra+=("$1") ;;
    *) names+=("$1") ;;
  esac
  shift
done
[ ${#names[@]} -eq 0 ] && names=(all)

"$root/scripts/deps.sh" bench || echo "bench.sh: scripts/deps.sh bench failed; running with what is installed" >&2

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DAK_BUILD_TESTS=OFF -DAK_BUILD_BENCH=ON >/dev/null
cmake --build "$build" --target ak_bench -j "$jobs"

out=()
if [ ${#quick[@]} -eq 0 ]; then
  out=(--out "$root/results")
fi
status=0
"$build/bench/ak_bench" run "${names[@]}" "${quick[@]}" "${out[@]}" "${extra[@]}" || status=$?

# A full run refreshes the README's "Latest benchmark" section from
# results/README-table.md (between the bench-table markers).
if [ ${#quick[@]} -eq 0 ] && [ -f "$root/results/README-table.md" ] && grep -q 'bench-table:start' "$root/README.md"; then
  awk -v table="$root/results/README-table.md" '
    /<!-- bench-table:start -->/ { print; while ((getline line < table) > 0) print line; skip = 1; next }
    /<!-- bench-table:end -->/ { skip = 0 }
    !skip { print }
  ' "$root/README.md" >"$root/README.md.tmp" && mv "$root/README.md.tmp" "$root/README.md"
  echo "bench.sh: README.md benchmark section updated from results/README-table.md"
fi
exit $status
