#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs real programs twice, without and with LD_PRELOAD of a malloc
# replacement (the two runs side by side), and fails unless every preloaded
# run gives exactly the output of the plain run:
#   preload      malloc, free, calloc, realloc, ... bind to the library
#                (LD_DEBUG=bindings), not to libc
#   python-*     Debian's /usr/bin/python3 -m test -v MODULE for a set of
#                standard-library test modules; compared: the "Ran N tests",
#                "OK"/"FAILED (...)", "FAIL:"/"ERROR:" lines, regrtest's
#                result line and the exit status (a module that fails
#                without the preload must fail the same way with it)
#   git          ~300 generated commits, log --stat, blame, gc, fsck --full
#   sqlite3      200k inserts in transactions, indexes, aggregates, a join
#   gcc          a generated 50-file C program built with -O2 -g and run
#   sort         ~300 MB of generated lines, external merge passes
# For git, sqlite3, gcc and sort stdout, stderr and exit status are compared
# byte for byte.  Every preloaded run starts with a check that the library
# is mapped into the process (/proc/PID/maps), so an ignored preload fails.
# Each run has a time limit; a hang fails.
#
# Usage: tests/realprog/run.sh PRELOAD_LIBRARY.so [WORKDIR]
# WORKDIR (default: a new directory under ${TMPDIR:-/tmp}) needs about 1 GB;
# it is removed after a passing run when it was created here, and kept
# otherwise.  Installs nothing: scripts/deps.sh realprog does.
# Environment: REALPROG_ONLY="git sort ..." runs a subset (names as
# printed, python-* matches all python modules); REALPROG_SORT_MB (300),
# REALPROG_COMMITS (300), REALPROG_ORDERS (200000) scale the workloads;
# REALPROG_TIMEOUT (400) and REALPROG_TIMEOUT_PYTHON (300) are the time
# limits in seconds of one run of a program / of a python test module.
set -uo pipefail

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 PRELOAD_LIBRARY.so [WORKDIR]" >&2
  exit 2
fi
if [ ! -f "$1" ]; then
  echo "realprog: no such library: $1" >&2
  exit 2
fi
lib=$(readlink -f -- "$1")
here=$(cd "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
py=/usr/bin/python3
modules=(test_dict test_list test_set test_unicode test_json test_threading test_re)
sort_mb=${REALPROG_SORT_MB:-300}
commits=${REALPROG_COMMITS:-300}
orders=${REALPROG_ORDERS:-200000}
only=${REALPROG_ONLY:-}
limit_python=${REALPROG_TIMEOUT_PYTHON:-300} # seconds per module and run
limit_prog=${REALPROG_TIMEOUT:-400}           # seconds per other program and run

for tool in "$py" /usr/bin/git /usr/bin/sqlite3 /usr/bin/gcc /usr/bin/sort \
  /usr/bin/timeout /usr/bin/sha256sum /usr/bin/cmp /usr/bin/diff; do
  if [ ! -x "$tool" ]; then
    echo "realprog: missing $tool (run scripts/deps.sh realprog)" >&2
    exit 2
  fi
done
if ! "$py" -c 'import test.test_dict, test.libregrtest' 2>/dev/null; then
  echo "realprog: $py has no test suite (run scripts/deps.sh realprog)" >&2
  exit 2
fi

created=0
if [ $# -eq 2 ]; then
  work=$2
  mkdir -p "$work" || exit 2
else
  work=$(mktemp -d "${TMPDIR:-/tmp}/realprog.XXXXXX") || exit 2
  created=1
fi
work=$(cd "$work" && pwd)
in=$work/inputs
passed=0
failed=0

selected() { # NAME: is it in REALPROG_ONLY (or is that empty)?
  [ -z "$only" ] && return 0
  local w
  for w in $only; do
    # shellcheck disable=SC2053 # glob match on purpose (python-*)
    [[ $1 == $w ]] && return 0
  done
  return 1
}

pass() {
  printf 'realprog: %s: ok (%s s)\n' "$1" "$2"
  passed=$((passed + 1))
}

fail() {
  printf 'realprog: %s: FAILED: %s\n' "$1" "$2"
  failed=$((failed + 1))
}

now() { printf '%s' "${EPOCHREALTIME/,/.}"; }

seconds_since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# run_mode MODE DIR LIMIT LOCALE CMD...: runs CMD in DIR/run with a clean
# environment, stdout/stderr/exit status into DIR/{out,err,rc}, elapsed
# seconds into DIR/time.  MODE pre adds LD_PRELOAD and first checks, inside
# the preloaded shell that then execs CMD, that the library is mapped.
run_mode() {
  local mode=$1 dir=$2 limit=$3 locale=$4
  shift 4
  rm -rf "$dir"
  mkdir -p "$dir/run/tmp"
  local envv=(PATH=/usr/bin:/bin HOME="$dir/run" TMPDIR="$dir/run/tmp"
    LC_ALL="$locale" TZ=UTC)
  local t0
  t0=$(now)
  if [ "$mode" = pre ]; then
    # The outer 2>/dev/null only silences bash's "Aborted"-style job notice.
    # shellcheck disable=SC2016 # expanded by the preloaded sh
    { (cd "$dir/run" && exec timeout -k 10 "$limit" env -i "${envv[@]}" LD_PRELOAD="$lib" \
      /bin/sh -c 'grep -qF -- "$0" /proc/$$/maps ||
        { echo "realprog: preload not mapped: $0" >&2; exit 97; }; exec "$@"' "$lib" "$@") \
      >"$dir/out" 2>"$dir/err" </dev/null; } 2>/dev/null
  else
    { (cd "$dir/run" && exec timeout -k 10 "$limit" env -i "${envv[@]}" \
      /bin/sh -c 'exec "$@"' sh "$@") >"$dir/out" 2>"$dir/err" </dev/null; } 2>/dev/null
  fi
  echo $? >"$dir/rc"
  seconds_since "$t0" >"$dir/time"
}

# why_failed DIR LIMIT: a reason when the run in DIR crashed, hung or did
# not preload; nothing otherwise.
why_failed() {
  local dir=$1 limit=$2 rc
  rc=$(cat "$dir/rc")
  if grep -q '^realprog: preload not mapped' "$dir/err"; then
    echo "preload not in effect (library not in /proc/PID/maps)"
  elif grep -q 'cannot be preloaded' "$dir/err"; then
    echo "ld.so could not preload: $(grep -m1 'cannot be preloaded' "$dir/err")"
  elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    echo "timed out after $limit s (hang)"
  elif [ "$rc" -gt 128 ]; then
    echo "killed by signal SIG$(kill -l $((rc - 128)) 2>/dev/null || echo $((rc - 128)))"
  fi
}

# first_diff A B: the first differing line of two files, shortened.
first_diff() {
  diff "$1" "$2" | grep -m2 '^[<>]' | cut -c1-160 | tr '\n' ' '
}

# compare NAME BASE PRE LIMIT FILES...: FILES (out, err, rc, or summary)
# of the plain run BASE and the preloaded run PRE must be identical.
compare() {
  local name=$1 base=$2 pre=$3 limit=$4 why f
  shift 4
  why=$(why_failed "$pre" "$limit")
  if [ -n "$why" ]; then
    fail "$name" "$why (see $pre)"
    return
  fi
  for f in "$@"; do
    if ! cmp -s "$base/$f" "$pre/$f"; then
      diff -u "$base/$f" "$pre/$f" >"$pre/$f.diff"
      fail "$name" "$f differs from the run without preload: $(first_diff "$base/$f" "$pre/$f")(see $pre/$f.diff)"
      return
    fi
  done
  pass "$name" "$(cat "$pre/time")"
}

# program NAME LIMIT LOCALE CMD...: plain run, which must succeed, and
# preloaded run, side by side (each in its own directory, one core each);
# stdout, stderr and exit status compared.
program() {
  local name=$1 limit=$2 locale=$3 why base_pid
  shift 3
  selected "$name" || return 0
  run_mode base "$work/base/$name" "$limit" "$locale" "$@" &
  base_pid=$!
  run_mode pre "$work/pre/$name" "$limit" "$locale" "$@"
  wait "$base_pid"
  why=$(why_failed "$work/base/$name" "$limit")
  if [ -n "$why" ] || [ "$(cat "$work/base/$name/rc")" != 0 ]; then
    fail "$name" "run without preload failed (${why:-exit $(cat "$work/base/$name/rc")}; see $work/base/$name)"
    return
  fi
  compare "$name" "$work/base/$name" "$work/pre/$name" "$limit" out err rc
}

# python_summary DIR: the lines of a regrtest -v run that must not change.
python_summary() {
  {
    grep -E '^Ran [0-9]+ tests? in |^(OK|FAILED)( \(.*\))?$|^(FAIL|ERROR): |^Tests result: ' "$1/out" |
      sed -E 's/^(Ran [0-9]+ tests?) in .*/\1/'
    echo "exit status $(cat "$1/rc")"
  } >"$1/summary"
}

python_module() {
  local mod=$1 name=python-$1 base pre
  selected "$name" || return 0
  base=$work/base/$name pre=$work/pre/$name
  run_mode base "$base" "$limit_python" C.UTF-8 "$py" -m test -v "$mod" &
  local base_pid=$!
  run_mode pre "$pre" "$limit_python" C.UTF-8 "$py" -m test -v "$mod"
  wait "$base_pid"
  python_summary "$base"
  if [ -n "$(why_failed "$base" "$limit_python")" ] || ! grep -q '^Ran ' "$base/summary"; then
    fail "$name" "run without preload gave no test summary (see $base)"
    return
  fi
  python_summary "$pre"
  compare "$name" "$base" "$pre" "$limit_python" summary
}

# The library must really replace the allocator: with LD_BIND_NOW every
# reference to the malloc family is bound at startup, and none may go to
# libc's.  (Bindings to /usr/bin/python3 itself are its canonical PLT
# entries, which forward to whatever the symbol resolved to.)
preload_check() {
  local name=preload dir=$work/pre/preload t0 sym missing="" libc=""
  selected "$name" || return 0
  rm -rf "$dir"
  mkdir -p "$dir"
  t0=$(now)
  env -i PATH=/usr/bin:/bin LD_PRELOAD="$lib" LD_BIND_NOW=1 LD_DEBUG=bindings \
    "$py" -c 'import json, re, sqlite3, threading' >"$dir/out" 2>"$dir/bindings"
  echo $? >"$dir/rc"
  for sym in malloc free calloc realloc; do
    grep -qF "to $lib [0]: normal symbol \`$sym'" "$dir/bindings" || missing="$missing $sym"
  done
  for sym in malloc free calloc realloc posix_memalign aligned_alloc memalign valloc pvalloc malloc_usable_size; do
    grep -E "to [^ ]*/libc\\.so\\.6 \\[0\\]: normal symbol \`$sym'" "$dir/bindings" >/dev/null && libc="$libc $sym"
  done
  local mapped
  # shellcheck disable=SC2016 # expanded by the preloaded sh
  env -i PATH=/usr/bin:/bin LD_PRELOAD="$lib" /usr/bin/env sh -c \
    'grep -cF -- "$0" /proc/$$/maps >"$1"' "$lib" "$dir/mapped" >>"$dir/out" 2>>"$dir/bindings"
  mapped=$(tail -n 1 "$dir/mapped" 2>/dev/null) # last line: grep -c itself
  [[ $mapped =~ ^[0-9]+$ ]] || mapped=0
  if [ "$(cat "$dir/rc")" != 0 ]; then
    fail "$name" "python3 under LD_PRELOAD exited $(cat "$dir/rc") (see $dir)"
  elif [ -n "$missing" ]; then
    fail "$name" "not bound to the library:$missing (see $dir/bindings)"
  elif [ -n "$libc" ]; then
    fail "$name" "still bound to libc:$libc (see $dir/bindings)"
  elif [ "$mapped" -lt 1 ]; then
    fail "$name" "library not in /proc/PID/maps of a preloaded sh"
  else
    pass "$name" "$(seconds_since "$t0")"
  fi
}

# Deterministic inputs, generated without the preload.
make_inputs() {
  mkdir -p "$in"
  if selected sqlite3 && [ ! -s "$in/workload-$orders.sql" ]; then
    "$py" "$here/gen_sql.py" "$in/workload-$orders.sql" "$orders" || return 1
  fi
  if selected gcc && [ ! -s "$in/cprog/main.c" ]; then
    "$py" "$here/gen_cprog.py" "$in/cprog" 50 || return 1
  fi
  if selected sort && [ ! -s "$in/lines-$sort_mb.txt" ]; then
    gcc -std=c11 -O2 -o "$in/gen_lines" "$here/gen_lines.c" &&
      "$in/gen_lines" $((sort_mb * 1000000)) 42 >"$in/lines-$sort_mb.txt.tmp" &&
      mv "$in/lines-$sort_mb.txt.tmp" "$in/lines-$sort_mb.txt" || return 1
  fi
  return 0
}

start=$(now)
echo "realprog: library $lib, workdir $work"
if ! make_inputs; then
  echo "realprog: generating inputs failed" >&2
  exit 2
fi
preload_check
for mod in "${modules[@]}"; do
  python_module "$mod"
done
program git "$limit_prog" C /bin/bash "$here/git_workload.sh" repo "$commits"
program sqlite3 "$limit_prog" C /usr/bin/sqlite3 -bail test.db ".read $in/workload-$orders.sql"
program gcc "$limit_prog" C /bin/bash "$here/gcc_workload.sh" "$in/cprog" build
program sort "$limit_prog" C /bin/bash "$here/sort_workload.sh" "$in/lines-$sort_mb.txt" sorttmp
echo "realprog: total $(seconds_since "$start") s"
echo "realprog: $passed passed, $failed failed"
if [ "$failed" -ne 0 ] || [ "$passed" -eq 0 ]; then
  echo "realprog: outputs kept in $work"
  exit 1
fi
if [ "$created" = 1 ]; then rm -rf "$work"; fi
exit 0
