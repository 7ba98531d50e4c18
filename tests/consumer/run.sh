#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run.sh - proves the ways to use arenakit from another project:
#   install           the README's install line (cmake -S -B, --build,
#                     --install) with default options builds the library
#                     only: no test, no benchmark, no GoogleTest needed
#   no-gtest          AK_BUILD_TESTS=ON without GoogleTest configures, with
#                     a message that its suites are skipped
#   cmake-package     find_package(arenakit CONFIG REQUIRED) on the installed
#                     package; arenakit::arenakit, arenakit::arenakit_static,
#                     arenakit::malloc_static
#   pkg-config        pkg-config --cflags --libs [--static] arenakit against
#                     the install prefix, plain compiler driver; --static
#                     gives a binary without libarenakit.so; a program
#                     dlopens, uses and dlcloses the installed library and
#                     plugins linked with it, shared and static, 300 times
#   add_subdirectory  add_subdirectory(<arenakit source dir>) in a consumer
#   FetchContent      FetchContent_MakeAvailable from a git clone of the
#                     checkout (its HEAD; the source directory itself when
#                     tracked files have uncommitted changes)
# Each way builds the consumer program of tests/consumer/common (two C units
# and a C++ unit that all include the headers and call ak_arena_alloc, so the
# link also proves there is no `extern inline` trap) and runs it; the CMake
# ways also build tests/c_api_ctest.c with the drop-in linked statically.
# GoogleTest's CMake package is hidden from every configure
# (CMAKE_DISABLE_FIND_PACKAGE_GTest): nothing a user builds may need it.
#
# Usage: run.sh <arenakit source dir> <scratch dir> <C compiler> <C++ compiler>
# Environment: AK_CMAKE (cmake to use, default: cmake on PATH),
#              AK_CONSUMER_JOBS (default 2), PKG_CONFIG (default pkg-config),
#              AK_CONSUMER_STRICT=1 (a non-relocatable arenakit.pc fails too).
# Prints one line per way ("<way>: ok" or "<way>: FAILED: <why>") and exits
# non-zero if any way failed. Logs stay in <scratch dir>/logs.
set -u

if [ $# -ne 4 ]; then
  echo "usage: $0 <arenakit source dir> <scratch dir> <C compiler> <C++ compiler>" >&2
  exit 2
fi
src=$(cd "$1" && pwd) || { echo "run.sh: no source dir $1" >&2; exit 2; }
scratch=$2
cc=$3
cxx=$4
here=$(cd "$(dirname "$0")" && pwd)
cmake=${AK_CMAKE:-cmake}
jobs=${AK_CONSUMER_JOBS:-2}

# Nothing from the caller's environment may redirect what is found or where
# things go: the consumers must see exactly the prefix built here.
unset DESTDIR CMAKE_PREFIX_PATH CMAKE_INSTALL_PREFIX arenakit_DIR arenakit_ROOT ARENAKIT_DIR \
  PKG_CONFIG_PATH PKG_CONFIG_LIBDIR PKG_CONFIG_SYSROOT_DIR LD_LIBRARY_PATH \
  MAKEFLAGS MFLAGS MAKELEVEL CMAKE_BUILD_PARALLEL_LEVEL

mkdir -p "$scratch" || exit 2
scratch=$(cd "$scratch" && pwd)
case "$scratch" in
  / | "$HOME" | "$src") echo "run.sh: refusing scratch dir $scratch" >&2; exit 2 ;;
esac
# Only the subdirectories this script creates are removed.
rm -rf "$scratch/arenakit-build" "$scratch/prefix" "$scratch/package-build" \
  "$scratch/pkgconfig-build" "$scratch/subdir-build" "$scratch/logs" "$scratch/prefix-moved" \
  "$scratch/fetch-build" "$scratch/nogtest-build"
mkdir -p "$scratch/logs"
logs=$scratch/logs
prefix=$scratch/prefix

failed=0
# fail <way> <log> <message>: reports a failed way with the tail of its log.
fail() {
  echo "$1: FAILED: $3"
  if [ -n "$2" ] && [ -s "$2" ]; then
    echo "---- last lines of $2 ----"
    tail -n 40 "$2"
    echo "----"
  fi
  failed=1
}
# step <log> <command...>: runs a command, appending its output to <log>.
step() {
  local log=$1
  shift
  echo "+ $*" >>"$log"
  "$@" >>"$log" 2>&1
}
# needed_libs <binary>: the DT_NEEDED entries of an ELF file, one per line.
needed_libs() { readelf -d "$1" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\].*/\1/p'; }
# check_link <binary> shared|static: the binary uses libarenakit the way asked.
check_link() {
  if ! command -v readelf >/dev/null 2>&1; then return 0; fi
  if [ "$2" = shared ]; then
    needed_libs "$1" | grep -q '^libarenakit\.so' || { echo "$1 does not need libarenakit.so"; return 1; }
  else
    ! needed_libs "$1" | grep -q '^libarenakit' || { echo "$1 needs a shared libarenakit"; return 1; }
  fi
  return 0
}
# run_app <log> <binary>: runs a consumer program; it must exit 0.
run_app() {
  local log=$1 bin=$2 rc
  echo "+ $bin" >>"$log"
  "$bin" >>"$log" 2>&1
  rc=$?
  [ $rc -eq 0 ] || echo "$bin exited with $rc"
  return $rc
}

# Every configure below: GoogleTest's package hidden.
nogtest=-DCMAKE_DISABLE_FIND_PACKAGE_GTest=TRUE
# check_static_malloc <binary> <log>: a program with arenakit::malloc_static
# needs no libarenakit*.so and its malloc & co. are arenakit's.
check_static_malloc() {
  local out
  ! needed_libs "$1" | grep -q '^libarenakit' || { echo "$1 needs a shared libarenakit"; return 1; }
  out=$("$1" 2>&1)
  echo "+ $1: $out" >>"$2"
  case "$out" in *"are arenakit's"*) return 0 ;; esac
  echo "$1: malloc is not arenakit's: $out"
  return 1
}
# check_cmake_apps <build dir> <log>: runs the apps of consumer_apps.cmake.
check_cmake_apps() {
  local app kind
  for app in app_shared app_static app_c; do
    kind=shared
    [ $app = app_static ] && kind=static
    check_link "$1/$app" $kind || return 1
    run_app "$2" "$1/$app" || return 1
  done
  check_static_malloc "$1/app_malloc_static" "$2"
}

start=$(date +%s)

# ---- the install line: default options, library only ----------------------
# As docs/install.md has it (cmake -S . -B build -DCMAKE_BUILD_TYPE=Release,
# cmake --build build, cmake --install build), with a prefix of its own and
# the compilers under test.
installed=0
ilog=$logs/install.log
abuild=$scratch/arenakit-build
if step "$ilog" "$cmake" -S "$src" -B "$abuild" -DCMAKE_BUILD_TYPE=Release "$nogtest" -DCMAKE_INSTALL_PREFIX="$prefix" \
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" &&
  step "$ilog" "$cmake" --build "$abuild" -j "$jobs" &&
  step "$ilog" "$cmake" --install "$abuild"; then
  # The layout the three ways rely on; each missing piece is named.
  missing=()
  [ -f "$prefix/include/arenakit/arenakit.h" ] || missing+=("include/arenakit/arenakit.h")
  [ -f "$prefix/include/arenakit/arena.h" ] || missing+=("include/arenakit/arena.h")
  [ -f "$prefix/include/arenakit/common.h" ] || missing+=("include/arenakit/common.h")
  libdir=$(dirname "$(find "$prefix" -name 'libarenakit.so' -print -quit 2>/dev/null)")
  [ -n "$(find "$prefix" -name 'libarenakit.so' -print -quit)" ] || missing+=("libarenakit.so")
  [ -n "$(find "$prefix" -name 'libarenakit.so.[0-9]*' -print -quit)" ] || missing+=("libarenakit.so.<soversion>")
  [ -n "$(find "$prefix" -name 'libarenakit.a' -print -quit)" ] || missing+=("libarenakit.a")
  [ -n "$(find "$prefix" -path '*/cmake/arenakit/arenakitConfig.cmake' -print -quit)" ] ||
    missing+=("<libdir>/cmake/arenakit/arenakitConfig.cmake")
  [ -n "$(find "$prefix" -path '*/cmake/arenakit/arenakitConfigVersion.cmake' -print -quit)" ] ||
    missing+=("<libdir>/cmake/arenakit/arenakitConfigVersion.cmake")
  [ -n "$(find "$prefix" -path '*/cmake/arenakit/arenakitTargets.cmake' -print -quit)" ] ||
    missing+=("<libdir>/cmake/arenakit/arenakitTargets.cmake")
  pcfile=$(find "$prefix" -path '*/pkgconfig/arenakit.pc' -print -quit)
  [ -n "$pcfile" ] || missing+=("<libdir>/pkgconfig/arenakit.pc")
  # The shared library exports the API (ak_*) and, for the inline paths,
  # the _ak_ data that the installed detail/ headers declare; nothing else.
  leaked=""
  if [ -f "$libdir/libarenakit.so" ] && command -v nm >/dev/null 2>&1; then
    for sym in $(nm -D --defined-only "$libdir/libarenakit.so" | awk 'NF >= 3 && $3 !~ /^ak_/ { print $3 }'); do
      case $sym in
        _ak_*) grep -rqw -- "$sym" "$prefix"/include/arenakit/detail 2>/dev/null && continue ;;
      esac
      leaked="$leaked$sym "
    done
  fi
  # Library only: the defaults build no test or benchmark.
  extra=""
  grep -q '^AK_BUILD_TESTS:BOOL=OFF' "$abuild/CMakeCache.txt" || extra="$extra AK_BUILD_TESTS is not OFF;"
  grep -q '^AK_BUILD_BENCH:BOOL=OFF' "$abuild/CMakeCache.txt" || extra="$extra AK_BUILD_BENCH is not OFF;"
  [ ! -e "$abuild/tests" ] || extra="$extra it configured tests/;"
  [ ! -e "$abuild/bench" ] || extra="$extra it configured bench/;"
  [ -n "$(find "$prefix" -name 'libarenakit-malloc.a' -print -quit)" ] || missing+=("libarenakit-malloc.a")
  [ -n "$(find "$prefix" -path '*/pkgconfig/arenakit-shared.pc' -print -quit)" ] ||
    missing+=("<libdir>/pkgconfig/arenakit-shared.pc")
  [ -n "$(find "$prefix" -path '*/pkgconfig/arenakit-malloc.pc' -print -quit)" ] ||
    missing+=("<libdir>/pkgconfig/arenakit-malloc.pc")
  if [ -n "$extra" ]; then
    echo "install: FAILED: the install line does not build the library only:$extra"
    failed=1
  elif [ -n "$leaked" ]; then
    echo "install: FAILED: libarenakit.so exports symbols outside the ak_ namespace (and not the detail/ headers' _ak_ data): $leaked"
    failed=1
  elif [ ${#missing[@]} -eq 0 ]; then
    installed=1
    echo "install: ok ($prefix, libdir ${libdir#"$prefix"/}; library only, GoogleTest hidden)"
  else
    echo "install: FAILED: the install prefix lacks: ${missing[*]}"
    echo "---- installed files ----"
    (cd "$prefix" && find . -type f -o -type l | sort)
    echo "----"
    failed=1
  fi
else
  fail install "$ilog" "configuring, building or installing arenakit failed"
fi

# ---- AK_BUILD_TESTS=ON without GoogleTest: a message, not an error --------
way="no-gtest"
log=$logs/$way.log
if ! step "$log" "$cmake" -S "$src" -B "$scratch/nogtest-build" "$nogtest" -DAK_BUILD_TESTS=ON \
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx"; then
  fail $way "$log" "configuring with AK_BUILD_TESTS=ON failed without GoogleTest"
elif ! grep -q 'GoogleTest not found' "$log"; then
  fail $way "$log" "AK_BUILD_TESTS=ON without GoogleTest printed no message"
else
  echo "$way: ok (AK_BUILD_TESTS=ON configures; GoogleTest suites skipped with a message)"
fi
rm -rf "$scratch/nogtest-build"

# ---- the same build installed elsewhere: cmake --install --prefix <other> ----
# The CMake package is relocatable by construction; arenakit.pc must name the
# prefix it was installed to as well. A mismatch is a warning (an error with
# AK_CONSUMER_STRICT=1): the three ways below install to the configured prefix.
if [ $installed -eq 1 ]; then
  rlog=$logs/relocate.log
  moved=$scratch/prefix-moved
  if step "$rlog" "$cmake" --install "$scratch/arenakit-build" --prefix "$moved"; then
    moved_pc=$(find "$moved" -path '*/pkgconfig/arenakit.pc' -print -quit)
    pc_prefix=$(PKG_CONFIG_PATH="$(dirname "$moved_pc")" pkg-config --variable=prefix arenakit 2>/dev/null)
    if [ -n "$pc_prefix" ] && [ "$(realpath -m "$pc_prefix")" = "$(realpath -m "$moved")" ]; then
      echo "relocation: ok (arenakit.pc resolves prefix to $moved)"
    else
      echo "relocation: FAILED: after \`cmake --install --prefix $moved\`, arenakit.pc resolves" \
        "prefix=$pc_prefix"
      failed=1
    fi
  else
    fail relocation "$rlog" "cmake --install --prefix $moved failed"
  fi
  if [ -f "$prefix/include/arenakit/arenakit.hpp" ]; then
    echo "headers: the C++ units include <arenakit/arenakit.hpp>"
  else
    echo "headers: no arenakit.hpp installed; the C++ units include <arenakit/arenakit.h>"
  fi
fi

# cmake_way <way> <consumer project> <build dir> <what it configures> <ok note>
#   [cmake args...]: configures, builds and checks one CMake consumer.
cmake_way() {
  local way=$1 proj=$2 bdir=$scratch/$3 what=$4 note=$5
  shift 5
  local log=$logs/$way.log why
  if ! step "$log" "$cmake" -S "$here/$proj" -B "$bdir" -DCMAKE_BUILD_TYPE=Release "$nogtest" \
    -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" "$@"; then
    fail "$way" "$log" "configuring the consumer failed ($what)"
  elif ! step "$log" "$cmake" --build "$bdir" -j "$jobs"; then
    fail "$way" "$log" "building the consumer failed"
  elif why=$(check_cmake_apps "$bdir" "$log"); then
    echo "$way: ok ($note)"
  else
    fail "$way" "$log" "$why"
  fi
}
cmake_targets="arenakit::arenakit, arenakit::arenakit_static, C-only program, arenakit::malloc_static"

# ---- 1. the installed CMake package -------------------------------------------
if [ $installed -ne 1 ]; then
  fail cmake-package "" "skipped: arenakit did not install"
else
  cmake_way cmake-package package package-build "find_package(arenakit CONFIG) or its targets" \
    "$cmake_targets" -DCMAKE_PREFIX_PATH="$prefix" -DAK_CONSUMER_PREFIX="$prefix"
fi

# ---- 2. pkg-config -------------------------------------------------------------
way="pkg-config"
log=$logs/$way.log
bdir=$scratch/pkgconfig-build
pkgconfig=${PKG_CONFIG:-}
if [ -z "$pkgconfig" ]; then
  pkgconfig=$(command -v pkg-config || command -v pkgconf || true)
fi
# pkgconfig_dropin: the drop-in malloc through arenakit-malloc.pc (called by
# pkgconfig_way, with its PKG_CONFIG_LIBDIR): common/dropin.c linked shared
# (it needs libarenakit-malloc.so) and --static (it needs no libarenakit*),
# and run: its malloc and strdup's are arenakit's.
# shellcheck disable=SC2086
pkgconfig_dropin() {
  local d=$bdir/dropin mcflags mlibs mslibs
  step "$log" "$pkgconfig" --exists --print-errors arenakit-malloc || {
    echo "pkg-config does not accept arenakit-malloc.pc"
    return 1
  }
  mcflags=$("$pkgconfig" --cflags arenakit-malloc)
  mlibs=$("$pkgconfig" --libs arenakit-malloc)
  mslibs=$("$pkgconfig" --static --libs arenakit-malloc)
  echo "arenakit-malloc: cflags=$mcflags libs=$mlibs static libs=$mslibs" >>"$log"
  mkdir -p "$d"
  step "$log" "$cc" -std=c11 -O2 -Wall -Wextra $mcflags "$here/common/dropin.c" -o "$d/dropin_shared" $mlibs \
    -Wl,-rpath,"$libdir" || {
    echo "linking with \`pkg-config --libs arenakit-malloc\` failed"
    return 1
  }
  step "$log" "$cc" -std=c11 -O2 -Wall -Wextra $mcflags "$here/common/dropin.c" -o "$d/dropin_static" $mslibs || {
    echo "linking with \`pkg-config --static --libs arenakit-malloc\` failed"
    return 1
  }
  if command -v readelf >/dev/null 2>&1; then
    needed_libs "$d/dropin_shared" | grep -q '^libarenakit-malloc\.so' ||
      { echo "$d/dropin_shared does not need libarenakit-malloc.so"; return 1; }
    ! needed_libs "$d/dropin_static" | grep -q '^libarenakit' ||
      { echo "$d/dropin_static needs a shared libarenakit"; return 1; }
  fi
  run_app "$log" "$d/dropin_shared" && run_app "$log" "$d/dropin_static" || return 1
  grep -q "^drop-in: malloc and strdup are arenakit's" "$log" || { echo "the drop-in program printed nothing"; return 1; }
}
# pkgconfig_way: returns 0 when every pkg-config check passes, else prints why.
# Flags from pkg-config are split into words on purpose.
# shellcheck disable=SC2086,SC2015
pkgconfig_way() {
  # Only the prefix under test: no system directories.
  export PKG_CONFIG_LIBDIR
  PKG_CONFIG_LIBDIR=$(dirname "$pcfile")
  mkdir -p "$bdir"
  step "$log" "$pkgconfig" --exists --print-errors arenakit || {
    echo "pkg-config does not accept arenakit.pc"
    return 1
  }
  local version pc_prefix cflags libs slibs expect
  version=$("$pkgconfig" --modversion arenakit)
  pc_prefix=$("$pkgconfig" --variable=prefix arenakit)
  cflags=$("$pkgconfig" --cflags arenakit)
  libs=$("$pkgconfig" --libs arenakit)
  # --static, as it comes: the archive, with the shared library beside it
  # in the same directory.
  slibs=$("$pkgconfig" --static --libs arenakit)
  {
    echo "version=$version prefix=$pc_prefix"
    echo "cflags=$cflags"
    echo "libs=$libs"
    echo "static libs=$slibs"
  } >>"$log"
  [ "$(cd "$pc_prefix" 2>/dev/null && pwd)" = "$prefix" ] || {
    echo "arenakit.pc has prefix=$pc_prefix, installed to $prefix"
    return 1
  }
  local flag
  for flag in $cflags $libs; do
    case "$flag" in
      -I* | -L*) [ -d "${flag:2}" ] || { echo "arenakit.pc names a missing directory: $flag"; return 1; } ;;
    esac
  done
  case " $libs " in *" -larenakit "*) ;; *) echo "pkg-config --libs lacks -larenakit: $libs"; return 1 ;; esac
  case " $slibs " in *libarenakit.a*) ;; *) echo "pkg-config --static --libs names no libarenakit.a: $slibs"; return 1 ;; esac
  if ! printf '%s\n' "$version" | grep -Eq '^[0-9]+\.[0-9]+\.[0-9]+$'; then
    echo "pkg-config --modversion gives '$version'"
    return 1
  fi
  local major minor patch
  IFS=. read -r major minor patch <<<"$version"
  expect=$((major * 10000 + minor * 100 + patch))
  local hpp=0
  local inc
  for inc in $("$pkgconfig" --cflags-only-I arenakit); do
    [ -f "${inc#-I}/arenakit/arenakit.hpp" ] && hpp=1
  done
  [ -f "$("$pkgconfig" --variable=includedir arenakit)/arenakit/arenakit.hpp" ] && hpp=1
  local common=$here/common defs="-DAK_CONSUMER_EXPECT_VERSION=$expect -DAK_CONSUMER_HAVE_HPP=$hpp"
  local opt o
  # Every unit at -O0 (nothing inlined unless forced: the extern-inline trap
  # shows there) and -O2.
  for opt in O0 O2; do
    o=$bdir/$opt
    mkdir -p "$o"
    step "$log" "$cc" -std=c11 -Wall -Wextra -$opt $defs $cflags -c "$common/main.c" -o "$o/main.o" &&
      step "$log" "$cc" -std=c11 -Wall -Wextra -$opt $defs -DCONSUMER_NO_CXX=1 $cflags -c "$common/main.c" \
        -o "$o/main_c.o" &&
      step "$log" "$cc" -std=c11 -Wall -Wextra -$opt $defs $cflags -c "$common/part_c.c" -o "$o/part_c.o" &&
      step "$log" "$cxx" -std=c++17 -Wall -Wextra -$opt $defs $cflags -c "$common/part_cpp.cpp" \
        -o "$o/part_cpp.o" || {
      echo "compiling with \`pkg-config --cflags arenakit\` failed (-$opt)"
      return 1
    }
    # Shared, C and C++, found through an rpath.
    step "$log" "$cxx" "$o/main.o" "$o/part_c.o" "$o/part_cpp.o" -o "$o/app_shared" $libs \
      -Wl,-rpath,"$libdir" || {
      echo "linking with \`pkg-config --libs arenakit\` failed (C and C++, -$opt)"
      return 1
    }
    check_link "$o/app_shared" shared || return 1
    run_app "$log" "$o/app_shared" || return 1
    # Shared, pure C linked by the C driver, found through LD_LIBRARY_PATH.
    step "$log" "$cc" "$o/main_c.o" "$o/part_c.o" -o "$o/app_c" $libs || {
      echo "linking a C-only program with \`pkg-config --libs arenakit\` failed (-$opt)"
      return 1
    }
    check_link "$o/app_c" shared || return 1
    LD_LIBRARY_PATH=$libdir run_app "$log" "$o/app_c" || return 1
    # Static: `pkg-config --static --libs` as it is; the shared library sits
    # next to the archive, and the binary must not need it.
    step "$log" "$cxx" "$o/main.o" "$o/part_c.o" "$o/part_cpp.o" -o "$o/app_static" $slibs || {
      echo "linking with \`pkg-config --static --libs arenakit\` failed (C and C++, -$opt)"
      return 1
    }
    check_link "$o/app_static" static || return 1
    run_app "$log" "$o/app_static" || return 1
    step "$log" "$cc" "$o/main_c.o" "$o/part_c.o" -o "$o/app_c_static" $slibs || {
      echo "linking a C-only program with \`pkg-config --static --libs arenakit\` failed (-$opt)"
      return 1
    }
    check_link "$o/app_c_static" static || return 1
    run_app "$log" "$o/app_c_static" || return 1
  done
  pkgconfig_dropin || return 1
  # Unloading (docs/design.md, "Lifecycle"): a program built as users build
  # (-O2, lazy binding) dlopens the installed libarenakit.so, and plugins
  # linked with `pkg-config --libs` and `--static --libs`, uses and closes
  # them 300 times with threads that exit after each close, with and
  # without the background thread.
  local lc=$here/../lifecycle u=$bdir/unload
  mkdir -p "$u"
  step "$log" "$cc" -std=c11 -O2 $cflags "$lc/unload_ctest.c" -o "$u/unload" -ldl -pthread &&
    step "$log" "$cc" -std=c11 -O2 -fPIC -shared $cflags "$lc/unload_plugin.c" -o "$u/plugin_shared.so" $libs \
      -Wl,-rpath,"$libdir" &&
    step "$log" "$cc" -std=c11 -O2 -fPIC -shared $cflags "$lc/unload_plugin.c" -o "$u/plugin_static.so" $slibs || {
    echo "building the dlopen/dlclose program and plugins with pkg-config failed"
    return 1
  }
  local bg what
  for bg in 0 1; do
    for what in "lib $libdir/libarenakit.so" "plugin $u/plugin_shared.so" "plugin $u/plugin_static.so"; do
      # shellcheck disable=SC2086
      AK_BACKGROUND=$bg step "$log" "$u/unload" $what 300 || {
        echo "dlopen, use, dlclose 300 times failed: unload $what (AK_BACKGROUND=$bg)"
        return 1
      }
    done
  done
  return 0
}
if [ $installed -ne 1 ]; then
  fail $way "" "skipped: arenakit did not install"
elif [ -z "$pkgconfig" ]; then
  fail $way "" "neither pkg-config nor pkgconf is installed (scripts/deps.sh test installs pkgconf)"
elif why=$(pkgconfig_way); then
  echo "$way: ok (shared via rpath and LD_LIBRARY_PATH, --static; -O0 and -O2; dlopen/dlclose x300;" \
    "arenakit-malloc shared and --static)"
else
  fail $way "$log" "$why"
fi

# ---- 3. add_subdirectory() ----------------------------------------------------
cmake_way add_subdirectory subdir subdir-build "add_subdirectory(arenakit)" "$cmake_targets" \
  -DAK_CONSUMER_ARENAKIT_SOURCE="$src"

# ---- 4. FetchContent ----------------------------------------------------------
fetch_args=(-DAK_CONSUMER_ARENAKIT_SOURCE="$src")
fetch_from="the source directory (tracked files have uncommitted changes)"
if head=$(git -C "$src" rev-parse --verify -q HEAD 2>/dev/null) && git -C "$src" diff --quiet HEAD 2>/dev/null; then
  fetch_args=(-DAK_CONSUMER_GIT="$src" -DAK_CONSUMER_GIT_TAG="$head")
  fetch_from="a git clone of $src at ${head:0:12}"
fi
cmake_way FetchContent fetch fetch-build "FetchContent_MakeAvailable(arenakit)" "$cmake_targets; from $fetch_from" \
  "${fetch_args[@]}"

echo "consumer_link: $([ $failed -eq 0 ] && echo passed || echo FAILED) in $(($(date +%s) - start)) s (logs: $logs)"
exit $failed
