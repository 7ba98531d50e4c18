#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The heap profiler's stack-capture measurements (docs/profiling.md, "Stacks"):
#   1. stack_cost: ns per capture by the unwinder (its fast walk of the
#      CFI), by libgcc's unwinder alone and by frame pointers at stack
#      depths 5..60 (a program built with frame pointers);
#   2. stack_probe: the methods inside programs we did not build - Debian's
#      python3 (no frame pointers) on a small workload, and any program
#      given after "--" - compared frame by frame.
# Usage: bench/prof/run.sh [BUILD_DIR] [-- PROGRAM ARGS...]
#   BUILD_DIR: a configured and built arenakit tree (default build-test);
#   its libarenakit.a is linked in. Writes its programs to BUILD_DIR/prof-bench.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-test}
[ $# -gt 0 ] && shift
[ -f "$build/libarenakit.a" ] || { echo "run.sh: no $build/libarenakit.a (build arenakit_static first)" >&2; exit 2; }
out=$build/prof-bench
mkdir -p "$out"
flags=(-O2 -g -fno-omit-frame-pointer -I src -I include -I "$build/include")
cc "${flags[@]}" bench/prof/stack_cost.c "$build/libarenakit.a" -lpthread -o "$out/stack_cost"
cc "${flags[@]}" -fPIC -shared bench/prof/stack_probe.c "$build/libarenakit.a" -lpthread -o "$out/stack_probe.so"

echo "== capture cost (ns per capture, fastest of 10 batches; frames returned), 20000 captures per cell"
"$out/stack_cost" 20000

workload='import json, re, collections
d = {}
for i in range(60000):
    d[str(i)] = {"k": [i, str(i) * 3, {"x": i / 3}]}
s = json.dumps(d)
for _ in range(3):
    json.loads(s)
words = re.findall(r"\w+", s)
print(len(collections.Counter(words)))'
echo "== python3 ($(readlink -f /usr/bin/python3)): the unwinder, frame pointers, the fast walk, libgcc"
LD_PRELOAD=$(readlink -f "$out/stack_probe.so") /usr/bin/python3 -c "$workload" >/dev/null
if [ $# -gt 0 ] && [ "$1" = "--" ]; then
  shift
  echo "== $*"
  LD_PRELOAD=$(readlink -f "$out/stack_probe.so") "$@" >/dev/null
fi
