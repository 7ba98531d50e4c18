#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A heap profile of a program, as people read it: runs PROGRAM with
# arenakit's malloc preloaded and its sampled heap profiler on
# (AK_PROF=1, AK_PROF_DUMP), then prints pprof's table of the sites that
# hold the most memory and writes the call graph as SVG.
#
#   scripts/heap_profile.sh [OPTIONS] [--] PROGRAM [ARGS...]
#
# Options:
#   --lib PATH      the libarenakit-malloc.so to preload (default: $AK_MALLOC_LIB,
#                   else the newest build*/libarenakit-malloc.so of this
#                   checkout); "none": preload nothing, for a program that
#                   links arenakit itself
#   --out DIR       where the profiles and the graph go (default:
#                   ./heap-profile.<pid of this script>)
#   --sample BYTES  mean bytes between samples (AK_PROF_SAMPLE, default 524288)
#   --index TYPE    inuse_space (default), inuse_objects, alloc_space, alloc_objects
#   --top N         rows of the table (default 25)
# Other AK_PROF_* variables set in the environment pass through
# (AK_PROF_INTERVAL adds numbered profiles during the run).
#
# Writes DIR/heap.<pid>.pb for every process that started the profiler
# (the program, and the programs it runs that inherit the preload) and
# DIR/heap.svg for the program's own process (needs graphviz's dot).
# Reads the profile with the standalone pprof (github.com/google/pprof)
# when it is on PATH: it symbolizes through binutils, from symbol tables as
# well as debug info; else with `go tool pprof` (Debian: golang-go), which
# names C and C++ functions from DWARF debug info only (build with -g; for
# distribution binaries install their -dbgsym packages or use pprof).
# Exits with the program's status when it failed, else 0 once the report
# is written (1 when no profile or no pprof, 2 on bad usage).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
lib=${AK_MALLOC_LIB:-}
out=""
sample=""
index=inuse_space
top=25
usage() {
  sed -n '3,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
}
while [ $# -gt 0 ]; do
  case "$1" in
    --lib) lib=${2:?--lib needs a path}; shift 2 ;;
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    --sample) sample=${2:?--sample needs bytes}; shift 2 ;;
    --index) index=${2:?--index needs a sample type}; shift 2 ;;
    --top) top=${2:?--top needs a number}; shift 2 ;;
    --) shift; break ;;
    -h|--help) usage ;;
    -*) echo "heap_profile.sh: unknown option $1" >&2; usage ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || usage
case "$index" in inuse_space|inuse_objects|alloc_space|alloc_objects) ;; *) echo "heap_profile.sh: --index $index: not a sample type" >&2; exit 2 ;; esac

if [ -z "$lib" ]; then
  lib=$(ls -t "$root"/build*/libarenakit-malloc.so 2>/dev/null | head -1)
  [ -n "$lib" ] || { echo "heap_profile.sh: no libarenakit-malloc.so in $root/build*/: build it or pass --lib" >&2; exit 1; }
fi
if [ "$lib" != none ]; then
  [ -f "$lib" ] || { echo "heap_profile.sh: $lib: no such library" >&2; exit 1; }
  lib=$(cd "$(dirname "$lib")" && pwd)/$(basename "$lib")
fi
if command -v pprof >/dev/null 2>&1; then
  pprof=(pprof)
elif command -v go >/dev/null 2>&1; then
  pprof=(go tool pprof)
else
  echo "heap_profile.sh: needs pprof or go (Debian: apt-get install golang-go; scripts/deps.sh installs it)" >&2
  exit 1
fi
out=${out:-heap-profile.$$}
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)

# The program runs in the foreground (its terminal and stdin stay its own)
# in a subshell that records its own pid, then becomes the program.
env_args=(AK_PROF=1 "AK_PROF_DUMP=$out/heap.%p.pb")
[ -n "$sample" ] && env_args+=("AK_PROF_SAMPLE=$sample")
[ "$lib" != none ] && env_args+=("LD_PRELOAD=$lib${LD_PRELOAD:+:$LD_PRELOAD}")
rm -f "$out/pid"
(echo "$BASHPID" >"$out/pid" && exec env "${env_args[@]}" "$@")
status=$?
pid=$(cat "$out/pid" 2>/dev/null)
rm -f "$out/pid"
[ "$status" -eq 0 ] || echo "heap_profile.sh: $1 exited with status $status" >&2

profile=$out/heap.$pid.pb
if [ ! -f "$profile" ]; then
  others=$(ls "$out"/heap.*.pb 2>/dev/null)
  if [ -z "$others" ]; then
    echo "heap_profile.sh: no profile was written: the program did not start the profiler" \
      "(was $lib preloaded, or does it link arenakit?) or did not exit through exit()" >&2
    exit 1
  fi
  profile=$(ls -t "$out"/heap.*.pb | head -1)
  echo "heap_profile.sh: $1 (pid $pid) wrote no profile; showing the newest: $profile" >&2
fi
binary=$(command -v "$1" 2>/dev/null || true)
[ -f "$binary" ] || binary=""

echo "== heap profile of: $*"
echo "== profiles: $(cd "$out" && ls heap.*.pb | tr '\n' ' ')"
report=$("${pprof[@]}" -top -nodecount="$top" -sample_index="$index" $binary "$profile" 2>"$out/pprof.err")
rc=$?
echo "$report"
if [ $rc -ne 0 ]; then
  cat "$out/pprof.err" >&2
  exit 1
fi
if grep -q "accounting for 0, 0% of 0 total" <<<"$report"; then
  echo "heap_profile.sh: the profile holds no samples: nothing was sampled (the program allocated" \
    "less than a sampling period, or its allocator does not call the profiler's hooks yet)" >&2
fi
if command -v dot >/dev/null 2>&1; then
  if "${pprof[@]}" -svg -sample_index="$index" -output "$out/heap.svg" $binary "$profile" 2>>"$out/pprof.err"; then
    echo "== call graph: $out/heap.svg"
  else
    echo "heap_profile.sh: pprof -svg failed: $(tail -1 "$out/pprof.err")" >&2
  fi
else
  echo "heap_profile.sh: no call graph: graphviz's dot is not installed (apt-get install graphviz)" >&2
fi
[ "$status" -eq 0 ] || exit "$status"
exit 0
