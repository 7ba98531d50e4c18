#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# matrix.sh - the consumer matrix: builds tests/consumer/matrix/prog.c (and
# the README's examples, linked into it) against an INSTALLED arenakit in the
# ways users build programs, runs each build and reports one line per variant:
#   compiler   gcc, clang
#   opt        -O0, -O2, -O3
#   link       shared-lazy   -larenakit -Wl,-z,lazy   (checked: no BIND_NOW)
#              shared-now    -larenakit -Wl,-z,now    (checked: BIND_NOW)
#              static        -Wl,-Bstatic -larenakit -Wl,-Bdynamic
#   pie        pie (-fPIE -pie), nopie (-fno-pie -no-pie)
#   lang       c (the C examples), c++ (prog.c as C++, the C++ examples)
# Each build runs three times, once with each scenario first (prog.c: the
# first slow-path call of a symbol is the one a lazy resolver handles), with
# LD_BIND_NOW unset. Objects are compiled once per compiler/opt/pie/lang and
# linked three ways; the jobs run AK_MATRIX_JOBS at a time.
#
# Usage: matrix.sh --build <cmake build dir> <scratch dir> <README.md>
#          installs that build (cmake --install --prefix <scratch>/prefix)
#        matrix.sh --prefix <install prefix> <scratch dir> <README.md>
#          uses an arenakit already installed there
# Environment: AK_CMAKE (default cmake), AK_MATRIX_JOBS (default 2),
#   AK_MATRIX_COMPILERS (default "gcc clang"; each NAME uses NAME and the
#   C++ driver NAME++, g++ for gcc).
# Exit status: 0 when every variant passed, 1 if any failed, 2 on bad usage
# or when no arenakit could be installed. Logs stay in <scratch>/logs.
set -u

usage() {
  echo "usage: $0 --build <cmake build dir> | --prefix <install prefix>, <scratch dir> <README.md>" >&2
  exit 2
}
[ $# -eq 4 ] || usage
mode=$1 from=$2 scratch=$3 readme=$4
here=$(cd "$(dirname "$0")" && pwd)
cmake=${AK_CMAKE:-cmake}
jobs=${AK_MATRIX_JOBS:-2}
compilers=${AK_MATRIX_COMPILERS:-gcc clang}
unset LD_BIND_NOW LD_LIBRARY_PATH LD_PRELOAD DESTDIR

mkdir -p "$scratch" || exit 2
scratch=$(cd "$scratch" && pwd)
case "$scratch" in / | "$HOME") echo "matrix.sh: refusing scratch dir $scratch" >&2; exit 2 ;; esac
rm -rf "$scratch/logs" "$scratch/obj" "$scratch/readme" "$scratch/results"
mkdir -p "$scratch/logs" "$scratch/obj" "$scratch/readme" "$scratch/results"
start=$(date +%s)

case "$mode" in
  --build)
    prefix=$scratch/prefix
    rm -rf "$prefix"
    if ! "$cmake" --install "$from" --prefix "$prefix" >"$scratch/logs/install.log" 2>&1; then
      echo "install: FAILED: cmake --install $from --prefix $prefix"
      tail -n 20 "$scratch/logs/install.log"
      exit 2
    fi
    ;;
  --prefix) prefix=$(cd "$from" && pwd) || exit 2 ;;
  *) usage ;;
esac
so=$(find "$prefix" -name 'libarenakit.so' -print -quit)
archive=$(find "$prefix" -name 'libarenakit.a' -print -quit)
if [ ! -f "$prefix/include/arenakit/arenakit.h" ] || [ -z "$so" ] || [ -z "$archive" ]; then
  echo "install: FAILED: $prefix lacks include/arenakit/arenakit.h, libarenakit.so or libarenakit.a"
  exit 2
fi
libdir=$(dirname "$so")
echo "install: $prefix (libdir ${libdir#"$prefix"/})"

# The README's examples, one file per fenced block.
"$here/../readme_extract.sh" "$readme" "$scratch/readme"
readme_c="" readme_cxx=""
for f in "$scratch"/readme/example-*.c; do [ -f "$f" ] && readme_c="$readme_c ${f##*/}"; done
for f in "$scratch"/readme/example-*.cpp; do [ -f "$f" ] && readme_cxx="$readme_cxx ${f##*/}"; done
if [ -z "$readme_c" ] || [ -z "$readme_cxx" ]; then
  echo "readme: FAILED: $readme has no C or no C++ example"
  exit 2
fi

# run_job <compiler> <opt> <pie> <lang>: compiles once, links the three ways,
# runs each build; writes one line per variant to results/<job>.txt.
run_job() {
  local comp=$1 opt=$2 pie=$3 lang=$4
  local id=$comp$opt-$pie-$lang
  local o=$scratch/obj/$id log=$scratch/logs/$id.log out=$scratch/results/$id.txt
  local cc cxx drv std xflag srcs f n list=""
  mkdir -p "$o"
  : >"$log"
  cc=$comp
  case $comp in gcc) cxx=g++ ;; *) cxx=$comp++ ;; esac
  local picf=-fPIE picl=-pie
  [ "$pie" = nopie ] && picf=-fno-pie picl=-no-pie
  if [ "$lang" = c ]; then
    drv=$cc std=-std=c11 xflag="-x c" srcs=$readme_c
  else
    drv=$cxx std=-std=c++17 xflag="-x c++" srcs=$readme_cxx
  fi
  local cflags="$std -$opt $picf -Wall -I$prefix/include"
  local objs=() why=""
  for f in $srcs; do
    n=${f%.*}
    n=${n#example-}
    list="$list X(ak_matrix_readme_$n)"
    # shellcheck disable=SC2086
    echo "+ $drv $cflags -Dmain=ak_matrix_readme_$n -c $f" >>"$log"
    # shellcheck disable=SC2086
    $drv $cflags "-Dmain=ak_matrix_readme_$n" -c "$scratch/readme/$f" -o "$o/$n.o" >>"$log" 2>&1 ||
      why="compiling README $f failed"
    objs+=("$o/$n.o")
  done
  # shellcheck disable=SC2086
  [ -n "$why" ] || $drv $cflags $xflag "-DAK_MATRIX_README(X)=$list" -c "$here/matrix/prog.c" -o "$o/prog.o" \
    >>"$log" 2>&1 || why="compiling prog.c failed"
  local link exe libs rc first res lines
  for link in shared-lazy shared-now static; do
    local name
    name=$(printf '%-5s -%s %-5s %-11s %-3s' "$comp" "$opt" "$pie" "$link" "$lang")
    if [ -n "$why" ]; then
      echo "$name: FAILED: $why (log: $log)" >>"$out"
      continue
    fi
    exe=$o/prog-$link
    # shellcheck disable=SC2054 # the commas belong to -Wl options
    case $link in
      shared-lazy) libs=(-L"$libdir" -larenakit -Wl,-rpath,"$libdir" -Wl,-z,lazy -lpthread) ;;
      shared-now) libs=(-L"$libdir" -larenakit -Wl,-rpath,"$libdir" -Wl,-z,now -lpthread) ;;
      static) libs=(-L"$libdir" -Wl,-Bstatic -larenakit -Wl,-Bdynamic -lpthread) ;;
    esac
    echo "+ $drv $picl $o/prog.o ${objs[*]} -o $exe ${libs[*]}" >>"$log"
    if ! $drv $picl "$o/prog.o" "${objs[@]}" -o "$exe" "${libs[@]}" >>"$log" 2>&1; then
      echo "$name: FAILED: linking failed (log: $log)" >>"$out"
      continue
    fi
    # The binary is linked the way its name says.
    local dyn
    dyn=$(readelf -d "$exe" 2>/dev/null)
    res=""
    [ -n "$dyn" ] || [ "$link" = static ] || res="readelf -d $exe failed (is binutils installed?)"
    [ -n "$res" ] || case $link in
      shared-lazy) grep -Eq 'BIND_NOW|FLAGS_1.* NOW' <<<"$dyn" && res="linked with BIND_NOW despite -z lazy" ;;
      shared-now) grep -Eq 'BIND_NOW|FLAGS_1.* NOW' <<<"$dyn" || res="linked without BIND_NOW despite -z now" ;;
    esac
    case $link in
      shared-*) grep -q 'NEEDED.*libarenakit\.so' <<<"$dyn" || res="does not need libarenakit.so" ;;
      static) grep -q 'NEEDED.*libarenakit' <<<"$dyn" && res="needs a shared libarenakit" ;;
    esac
    if [ -z "$res" ]; then
      for first in none default arena; do
        echo "+ $exe 1234567 $first" >>"$log"
        lines=$(timeout 20 "$exe" 1234567 "$first" 2>&1)
        rc=$?
        printf '%s\n' "$lines" >>"$log"
        if [ $rc -ne 0 ]; then
          if [ $rc -gt 128 ] && [ $rc -ne 124 ]; then
            res="$first first: killed by SIG$(kill -l $((rc - 128)) 2>/dev/null || echo $((rc - 128)))"
          elif [ $rc -eq 124 ]; then
            res="$first first: timed out after 20 s (a hang)"
          else
            res="$first first: exit $rc: $(grep -v '^FAILED' <<<"$lines" | grep -m1 -E ':|failed' || tail -n1 <<<"$lines")"
          fi
          break
        fi
      done
    fi
    if [ -z "$res" ]; then
      echo "$name: ok" >>"$out"
    else
      echo "$name: FAILED: $res (log: $log)" >>"$out"
    fi
  done
}

joblist=()
for comp in $compilers; do
  for opt in O0 O2 O3; do
    for pie in pie nopie; do
      for lang in c c++; do joblist+=("$comp $opt $pie $lang"); done
    done
  done
done
export scratch prefix libdir here readme_c readme_cxx
export -f run_job
printf '%s\n' "${joblist[@]}" | xargs -P "$jobs" -L 1 bash -c 'run_job "$@"' run_job

total=0 failed=0
for j in "${joblist[@]}"; do
  read -r c o p l <<<"$j"
  f=$scratch/results/$c$o-$p-$l.txt
  if [ ! -s "$f" ]; then
    echo "$j: FAILED: the job wrote no result"
    total=$((total + 1)) failed=$((failed + 1))
    continue
  fi
  cat "$f"
  total=$((total + $(wc -l <"$f")))
  failed=$((failed + $(grep -c ': FAILED' "$f")))
done
echo "consumer_matrix: $((total - failed)) of $total variants passed, $failed failed," \
  "in $(($(date +%s) - start)) s (logs: $scratch/logs)"
[ $failed -eq 0 ]
