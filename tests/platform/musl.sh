#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# musl.sh - the musl stage of scripts/test.sh (docs/platforms.md): builds
# arenakit's static libraries with musl-gcc (musl-tools), links
# tests/c_api_ctest.c and the soak program into statically linked
# programs, checks that they are static (no program interpreter, no shared
# library) and runs them:
#   c_api_ctest          with libarenakit.a: the arena, pool and malloc API
#                        beside musl's own malloc
#   c_api_ctest_malloc   with libarenakit-malloc.a (what arenakit::malloc_static
#                        links): malloc & co., and the C library's own calls
#                        of them, are arenakit's
#   ak_soak_malloc       tests/soak/soak.c with libarenakit-malloc.a, run for
#                        AK_MUSL_SOAK_SECONDS (default 4) with 4 threads:
#                        every component at once, contents and RSS checked
# and then the last two again on a build with the OS layer's portable
# fallbacks forced (-DAK_HAVE_MREMAP=0 -DAK_HAVE_MINCORE=0
# -DAK_HAVE_GETRANDOM=0), the code a C library without those calls gets.
# Usage: musl.sh <arenakit source dir> <build dir>
# Environment: AK_JOBS (default: nproc), MUSL_GCC (default musl-gcc).
# Prints one line per program and "musl: N passed, N failed" last; exits
# non-zero if anything failed.
set -uo pipefail
[ $# -eq 2 ] || { echo "usage: $0 <arenakit source dir> <build dir>" >&2; exit 2; }
src=$(cd "$1" && pwd) || exit 2
mkdir -p "$2" && top=$(cd "$2" && pwd) || exit 2
cc=${MUSL_GCC:-musl-gcc}
jobs=${AK_JOBS:-$(nproc)}
command -v "$cc" >/dev/null || { echo "musl: $cc not found (Debian: musl-tools)" >&2; exit 1; }

passed=0
failed=0

# build_libs <build dir> [cmake args]: the two static libraries, C only (no
# C++ compiler is involved), a release build with assertions, -Werror.
build_libs() {
  local dir=$1
  shift
  mkdir -p "$dir"
  cmake -S "$src" -B "$dir" -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -DAK_WERROR=ON "$@" >"$dir/build.log" 2>&1 &&
    cmake --build "$dir" --target arenakit_static arenakit-malloc_static -j"$jobs" >>"$dir/build.log" 2>&1
}

# static_check <program>: no PT_INTERP, no DT_NEEDED.
static_check() {
  if readelf -l "$1" | grep -q 'INTERP'; then echo "has a program interpreter"; return 1; fi
  if readelf -d "$1" 2>/dev/null | grep -q 'NEEDED'; then echo "needs shared libraries"; return 1; fi
  return 0
}

# run_programs <build dir> <label> <program>...: links each program
# statically against that build, checks it and runs it.
run_programs() {
  local build=$1 label=$2
  shift 2
  local flags=(-std=c11 -O2 -Wall -Wextra -Werror -I"$src/include" -I"$build/include")
  # As arenakit::malloc_static links it: both halves of the drop-in, always.
  local override=(-Wl,-u,malloc -Wl,-u,valloc "$build/libarenakit-malloc.a")
  local name exe prog args out rc last why
  for name in "$@"; do
    exe=$build/$name
    args=()
    case $name in
      c_api_ctest) prog=("$src/tests/c_api_ctest.c" "$build/libarenakit.a") ;;
      c_api_ctest_malloc) prog=(-DAK_TEST_OVERRIDE=1 "$src/tests/c_api_ctest.c" "${override[@]}") ;;
      ak_soak_malloc)
        prog=("$src/tests/soak/soak.c" "${override[@]}")
        args=(--seconds "${AK_MUSL_SOAK_SECONDS:-4}" --threads 4 --seed 1)
        ;;
    esac
    if ! "$cc" -static "${flags[@]}" "${prog[@]}" -pthread -o "$exe" >>"$build/build.log" 2>&1; then
      echo "$name ($label): FAILED: does not link statically with $cc (log: $build/build.log)"
      failed=$((failed + 1))
      continue
    fi
    if ! why=$(static_check "$exe"); then
      echo "$name ($label): FAILED: not a static program: $why"
      failed=$((failed + 1))
      continue
    fi
    out=$("$exe" "${args[@]}" 2>&1)
    rc=$?
    if [ $rc -eq 0 ]; then
      last=$(echo "$out" | grep 'summary:' | tail -1)
      [ -n "$last" ] || last=$(echo "$out" | tail -1)
      echo "$name ($label): $last"
      passed=$((passed + 1))
    else
      echo "$out" | tail -20
      echo "$name ($label): FAILED with exit status $rc"
      failed=$((failed + 1))
    fi
  done
}

if build_libs "$top"; then
  run_programs "$top" "musl, static" c_api_ctest c_api_ctest_malloc ak_soak_malloc
else
  tail -30 "$top/build.log"
  echo "musl: FAILED: building the static libraries with $cc (log: $top/build.log)"
  failed=$((failed + 1))
fi
if build_libs "$top/fallbacks" -DAK_HAVE_MREMAP=0 -DAK_HAVE_MINCORE=0 -DAK_HAVE_GETRANDOM=0; then
  run_programs "$top/fallbacks" "musl, static, portable fallbacks" c_api_ctest_malloc ak_soak_malloc
else
  tail -30 "$top/fallbacks/build.log"
  echo "musl: FAILED: building the static libraries with the portable fallbacks (log: $top/fallbacks/build.log)"
  failed=$((failed + 1))
fi
echo "musl: $passed passed, $failed failed"
[ $failed -eq 0 ]
