#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The benchmark command (docs/benchmarks.md).
#
#   scripts/bench.sh                 every scenario, full run (about 65 minutes
#                                    on 2 quiet cores): rewrites results/ (tables,
#                                    CSVs, plots; commit them) and the generated
#                                    tables of docs/benchmarks.md
#   scripts/bench.sh arena-bump      only the named scenario(s), same places
#   scripts/bench.sh --quick         short CI run: small sizes, figures not for
#                                    judging, written to
#                                    build-bench/bench/results-quick/ only; no
#                                    hardened build unless --hardened is given
#   scripts/bench.sh --reps 5        options go to `ak_bench run` (--reps N,
#                                    --rounds N, --n N, --out DIR,
#                                    --allocators a,b, --cpu N|none,
#                                    --no-plot, --strict, --hardened-reps N)
#
# Hardened build cost (docs/benchmarks.md): every full run also builds ak_bench
# with -DAK_HARDENED=ON in build-bench-hardened/ and reports, per scenario,
# arenakit's metrics normal against hardened (results/hardened-cost.md|csv,
# check: geometric-mean slowdown <= 1.10x).
#   --hardened LIST                  only these mitigations (comma-separated:
#                                    links, guards, shuffle, double-free; "all"
#                                    is the default), built in
#                                    build-bench-hardened-<a+b>/, reported in
#                                    results/hardened-cost-<a+b>.md|csv
#   --hardened-only                  only the hardened-cost report, not the
#                                    scenarios' own tables
#   --no-hardened                    no hardened build, no report
#
# Installs the missing Debian packages (scripts/deps.sh bench: jemalloc,
# tcmalloc, mimalloc, matplotlib), builds ak_bench in build-bench/ (Release)
# and runs it. Environment: BUILD_DIR (default build-bench), HARDENED_BUILD_DIR
# (default <BUILD_DIR>-hardened[-<a+b>]), JOBS (default 2).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD_DIR:-$root/build-bench}
jobs=${JOBS:-2}

quick=()
names=()
extra=()
hardened=all  # mitigations of the hardened build ("" : none, no report)
hardened_asked=0
hardened_only=0
started=$(date +%s)
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=(--quick) ;;
    --) shift; extra+=("$@"); break ;;
    -h|--help) sed -n '3,${/^#/!q;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    --hardened) hardened=${2:?$1 needs a value}; hardened_asked=1; shift ;;
    --hardened=*) hardened=${1#--hardened=}; hardened_asked=1 ;;
    --no-hardened) hardened= ;;
    --hardened-only) hardened_only=1; hardened_asked=1 ;;
    --reps|--rounds|--n|--out|--allocators|--cpu|--hardened-reps) extra+=("$1" "${2:?$1 needs a value}"); shift ;;
    -*) extra+=("$1") ;;
    *) names+=("$1") ;;
  esac
  shift
done
[ ${#names[@]} -eq 0 ] && names=(all)
# A quick run measures nothing for judging: no second (hardened) tree to
# build unless asked for.
[ ${#quick[@]} -ne 0 ] && [ $hardened_asked -eq 0 ] && hardened=

# The hardened tree: all mitigations (AK_HARDEN's default) or the named ones.
hardened_cmake=()
hardened_args=()
hbuild=
if [ -n "$hardened" ]; then
  if [ "$hardened" = all ]; then
    hbuild=${HARDENED_BUILD_DIR:-$build-hardened}
    hardened_cmake=(-UAK_HARDEN)
  else
    tag=
    IFS=, read -r -a mitigations <<<"$hardened"
    for m in "${mitigations[@]}"; do
      case "$m" in
        links|guards|shuffle|double-free) ;;
        *) echo "bench.sh: --hardened: unknown mitigation '$m' (links, guards, shuffle, double-free, or all)" >&2; exit 2 ;;
      esac
      tag+=${tag:++}$m
    done
    [ -n "$tag" ] || { echo "bench.sh: --hardened needs a list of mitigations" >&2; exit 2; }
    hbuild=${HARDENED_BUILD_DIR:-$build-hardened-$tag}
    hardened_cmake=("-DAK_HARDEN=${tag//+/;}")
    hardened_args=(--hardened-tag "$tag")
  fi
  hardened_args+=(--hardened-exe "$hbuild/bench/ak_bench")
  [ $hardened_only -eq 1 ] && hardened_args+=(--hardened-only)
elif [ $hardened_only -eq 1 ]; then
  echo "bench.sh: --hardened-only and --no-hardened exclude each other" >&2
  exit 2
fi

# Where the figures go, said before anything runs (an --out in the options
# wins over both defaults).
out_dir=$root/results
[ ${#quick[@]} -eq 0 ] || out_dir=$build/bench/results-quick
for ((i = 0; i < ${#extra[@]}; i++)); do
  [ "${extra[$i]}" = --out ] && out_dir=${extra[$((i + 1))]}
done
if [ ${#quick[@]} -ne 0 ]; then
  echo "bench.sh: --quick: a short smoke run at small sizes; its figures are not for judging and its"
  echo "bench.sh: acceptance checks are printed as 'not judged'. Writes $out_dir/ only"
  echo "bench.sh: (results/ and docs/benchmarks.md are not touched)."
else
  echo "bench.sh: full run of ${names[*]}: writes tables, CSVs and plots to $out_dir/"
  [ "$out_dir" = "$root/results" ] &&
    echo "bench.sh: and refreshes the generated tables of docs/benchmarks.md (between the bench-table markers)" &&
    echo "bench.sh: and the README's list of failing checks (scripts/open_checks.sh)."
  [ "${names[*]}" = all ] && echo "bench.sh: every scenario: about 65 minutes on 2 quiet cores."
  echo "bench.sh: commit what it rewrote afterwards."
fi
"$root/scripts/deps.sh" bench || echo "bench.sh: scripts/deps.sh bench failed; running with what is installed" >&2

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DAK_BUILD_TESTS=OFF -DAK_BUILD_BENCH=ON >/dev/null
cmake --build "$build" --target ak_bench -j "$jobs"
if [ -n "$hbuild" ]; then
  # Only what ak_bench needs: arenakit_static, arenakit-malloc (the drop-in
  # its malloc scenarios preload), ak_simple_malloc and ak_bench itself.
  echo "bench.sh: hardened build ($hardened) in $hbuild"
  cmake -S "$root" -B "$hbuild" -DCMAKE_BUILD_TYPE=Release -DAK_BUILD_TESTS=OFF -DAK_BUILD_BENCH=ON \
    -DAK_HARDENED=ON "${hardened_cmake[@]}" >/dev/null
  cmake --build "$hbuild" --target ak_bench -j "$jobs" ||
    { echo "bench.sh: the hardened build failed (--no-hardened skips it)" >&2; exit 1; }
fi

out=()
if [ ${#quick[@]} -eq 0 ]; then
  out=(--out "$root/results")
fi
status=0
"$build/bench/ak_bench" run "${names[@]}" "${quick[@]}" "${out[@]}" "${hardened_args[@]}" "${extra[@]}" || status=$?

# A full run into results/ redraws the README's summary chart from the
# malloc workload set, and refreshes the generated tables of
# docs/benchmarks.md from results/headline-tables.md (between the bench-table
# markers).
doc=$root/docs/benchmarks.md
if [ ${#quick[@]} -eq 0 ] && [ "$out_dir" = "$root/results" ] && [ -f "$root/results/headline-tables.md" ] &&
  grep -q 'bench-table:start' "$doc"; then
  awk -v table="$root/results/headline-tables.md" '
    /<!-- bench-table:start -->/ { print; while ((getline line < table) > 0) print line; skip = 1; next }
    /<!-- bench-table:end -->/ { skip = 0 }
    !skip { print }
  ' "$doc" >"$doc.tmp" && mv "$doc.tmp" "$doc"
  echo "bench.sh: docs/benchmarks.md tables updated from results/headline-tables.md"
fi
# A full run into results/ also rewrites the README's list of the checks
# the reports fail (scripts/open_checks.sh; a test compares the two).
if [ ${#quick[@]} -eq 0 ] && [ "$out_dir" = "$root/results" ]; then
  ROOT=$root "$root/scripts/open_checks.sh" --write ||
    echo "bench.sh: the README's list of failing checks was not rewritten (see above)" >&2
fi
if [ ${#quick[@]} -eq 0 ] && [ "$out_dir" = "$root/results" ] && [ -f "$root/results/malloc-workloads.csv" ]; then
  py=python3
  [ -x /usr/bin/python3 ] && py=/usr/bin/python3 # Debian's, with matplotlib
  "$py" "$root/bench/plot.py" --summary "$root/results/malloc-workloads.csv" "$root/results/summary.svg" ||
    echo "bench.sh: the summary chart was not redrawn (see above)" >&2
fi
echo "bench.sh: done in $(($(date +%s) - started)) s; results in $out_dir/"
exit $status
