#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The README's test command: builds arenakit and runs every test suite.
#
#   scripts/test.sh            all stages
#   scripts/test.sh STAGE...   some of: release asan tsan valgrind hardened
#                              fuzz soak realprog aarch64 musl format
#   scripts/test.sh --help     this text
#
# Stages:
#   release   release-with-assertions build (-O2 -g, assert on, -Werror),
#             every ctest suite including the consumer tests (the install
#             line, add_subdirectory, FetchContent, the installed package,
#             pkg-config shared and static, and the matrix of compilers,
#             -O levels, link modes, PIE, C and C++); then the allocators'
#             suites again with the heap profiler forced on (AK_PROF=1; the
#             sanitizer stages do the same for the malloc's and profiler's)
#   asan      AddressSanitizer + UndefinedBehaviorSanitizer + checked build
#             (AK_CHECKED) with clang, whose UBSan also checks that a C++
#             enum holds one of its values (gcc's does not), unit tests:
#             the arena and pools take their annotated paths
#             (use-after-clear/free death tests) and misuse dies with its
#             message (double free, foreign pointer, wrong pool)
#   tsan      ThreadSanitizer build with clang, every unit test (the
#             concurrent pool modes under many threads)
#   valgrind  memcheck over the single-threaded suites of the release build
#             (the arena and pools register as Valgrind mempools), and the
#             proof that memcheck reports a use-after-free inside an arena
#             and a pool (tests/uaf/memcheck.sh)
#   hardened  the hardened build (AK_HARDENED=ON, docs/hardening.md): every
#             ctest suite, including the attacks of tests/hardened_test.cpp
#   fuzz      the libFuzzer targets (clang, ASan+UBSan), AK_FUZZ_SECONDS
#             each (default 24, split over the ASan and the fast build),
#             from the committed corpora
#             (tests/fuzz/run.sh; a crash input is kept as a regression test)
#   soak      the soak program for AK_SOAK_SECONDS (default 45) under the
#             release and the hardened build (tests/soak/run.sh)
#   realprog  python test modules, git, sqlite3, gcc and sort with
#             LD_PRELOAD=libarenakit-malloc.so, output compared with a run
#             without it (tests/realprog/run.sh)
#   aarch64   cross build for aarch64 Linux (Debian's gcc-aarch64-linux-gnu,
#             GoogleTest built for it from /usr/src/googletest), every unit
#             suite run under qemu-user (tests/platform/aarch64.sh;
#             docs/platforms.md)
#   musl      the static libraries built with musl-gcc; the C API test, the
#             same with the drop-in malloc, and the soak program, each linked
#             statically and run (tests/platform/musl.sh)
#   format    clang-format check of every source file
# Installs missing Debian packages first (scripts/deps.sh test).
# Prints the stages it will run with their usual times first, a progress
# line as each stage starts and ends, and ends with one line
# "tests: N passed, N failed, N skipped" (skipped: GoogleTest's GTEST_SKIP
# and ctest's disabled tests, counted apart from the passed ones).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=${AK_JOBS:-$(nproc)}
all_stages=(release asan tsan valgrind hardened fuzz soak realprog aarch64 musl format)
stages=("$@")
if [ ${#stages[@]} -gt 0 ] && { [ "$1" = -h ] || [ "$1" = --help ]; }; then
  sed -n '3,${/^#/!q;s/^# \{0,1\}//;p}' "$0"
  exit 0
fi
[ ${#stages[@]} -eq 0 ] && stages=("${all_stages[@]}")

# Usual wall time of each stage in seconds on the project's 2-core machine
# (AK_JOBS=2) from a fresh clone (build directories empty), as the last
# fresh-clone CI run measured them (its commit message has the run). A run
# keeps what it measured in .cache/test-times (ignored by git) and the
# next run quotes those instead.
declare -A usual=([release]=300 [asan]=238 [tsan]=314 [valgrind]=27 [hardened]=181 [fuzz]=98
  [soak]=66 [realprog]=76 [aarch64]=208 [musl]=30 [format]=2)
declare -A what=([release]="release build, every ctest suite and the consumer tests"
  [asan]="ASan+UBSan+checked build (clang), unit tests" [tsan]="ThreadSanitizer build (clang), unit tests"
  [valgrind]="memcheck over the single-threaded suites" [hardened]="hardened build, unit tests"
  [fuzz]="libFuzzer targets, ${AK_FUZZ_SECONDS:-24} s each" [soak]="soak, ${AK_SOAK_SECONDS:-45} s, release and hardened"
  [realprog]="real programs under LD_PRELOAD" [aarch64]="aarch64 cross build, unit suites under qemu-user"
  [musl]="musl static programs: C API, drop-in malloc, soak" [format]="clang-format check")
for stage in "${stages[@]}"; do
  [ -n "${usual[$stage]:-}" ] || { echo "test.sh: unknown stage '$stage' (${all_stages[*]})" >&2; exit 2; }
done
times_file=$root/.cache/test-times
declare -A measured=()
if [ -f "$times_file" ]; then
  while read -r st sec; do [[ "$sec" =~ ^[0-9]+$ ]] && measured[$st]=$sec; done <"$times_file"
fi
fmt_time() { # seconds -> "4 min 05 s" / "45 s"
  if [ "$1" -ge 60 ]; then printf '%d min %02d s' $(($1 / 60)) $(($1 % 60)); else printf '%d s' "$1"; fi
}
total_usual=0
for stage in "${stages[@]}"; do total_usual=$((total_usual + ${measured[$stage]:-${usual[$stage]}})); done
echo "test.sh: ${#stages[@]} stage(s), usually about $(fmt_time $total_usual) on 2 cores (AK_JOBS=$jobs here):"
n=0
for stage in "${stages[@]}"; do
  n=$((n + 1))
  if [ -n "${measured[$stage]:-}" ]; then t="$(fmt_time "${measured[$stage]}") (last run)"; else t="~$(fmt_time "${usual[$stage]}")"; fi
  printf '  %2d. %-9s %-18s %s\n' $n "$stage" "$t" "${what[$stage]}"
done

scripts/deps.sh test || { echo "test.sh: could not install dependencies" >&2; exit 1; }

passed=0
failed=0
skipped=0
failures=()

# The suites run again with the heap profiler forced on (AK_PROF=1): the
# allocators' own in the release stage, the malloc's and the profiler's in
# the sanitizer stages (their pools and arenas take the annotated paths
# anyway); forks and soaks are left to the plain runs.
prof_suites='^(Prof|Malloc|Pool|Arena|All/Pool|AllSyncModes)'
prof_core='^(Prof|Malloc)'
prof_skip='Fork|fork|Soak|soak'

# Tests labelled "source" check the sources, not the build (the layer
# rule's probes and call graphs, the size budgets, the C++14 error): the
# release stage runs them; the other builds of the same sources leave them
# out, with the consumer tests.
not_here='consumer|source'

# Runs ctest in build dir $1 with extra args; adds its counts to the totals:
# a test ctest lists under "did not run" as Skipped (GTEST_SKIP) or
# Disabled counts as skipped, not passed.
run_ctest() {
  local dir=$1 name=$2
  shift 2
  local log
  log=$(mktemp)
  (cd "$dir" && ctest --output-on-failure -j"$jobs" "$@") 2>&1 | tee "$log"
  local line
  line=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -1)
  if [ -z "$line" ]; then
    failed=$((failed + 1))
    failures+=("$name: ctest printed no summary")
  else
    local total nfail nskip
    total=$(echo "$line" | sed -E 's/.* out of ([0-9]+).*/\1/')
    nfail=$(echo "$line" | sed -E 's/.*passed, ([0-9]+) tests? failed.*/\1/')
    nskip=$(sed -n '/^The following tests did not run:/,/^$/p' "$log" | grep -cE '\((Skipped|Disabled)\)$')
    passed=$((passed + total - nfail - nskip))
    failed=$((failed + nfail))
    skipped=$((skipped + nskip))
    if [ "$nfail" -ne 0 ]; then
      # Named in the summary, the last lines a CI log shows.
      local names
      names=$(sed -n '/^The following tests FAILED:/,/^$/p' "$log" | grep -E '^\s+[0-9]+ - ' |
        sed -E 's/^\s+[0-9]+ - //; s/ +\([^)]*\)$//' | paste -sd, -)
      failures+=("$name: $nfail ctest failures (${names:-see the log})")
    fi
  fi
  rm -f "$log"
}

step() { # name command...: a single pass/fail step
  local name=$1
  shift
  echo "== $name"
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); failures+=("$name"); fi
}

# The stages' C++ (the GoogleTest suites) carries line tables only (-g1):
# failures and sanitizer reports still name file and line, and each build
# takes about a fifth less time. The library (C) and the programs whose
# profiles pprof reads (tests/CMakeLists.txt: -g) keep full debug
# information.
configure_build() { # dir cmake-args...
  local dir=$1
  shift
  cmake -S "$root" -B "$dir" -DAK_BUILD_TESTS=ON -DAK_BUILD_BENCH=OFF -DAK_WERROR=ON "$@" >/dev/null &&
    cmake --build "$dir" -j"$jobs"
}

# What qemu-user (7.2, Debian 12) cannot emulate, left to the native
# stages (docs/platforms.md): it ignores setrlimit(RLIMIT_AS) (the limit
# would bind qemu itself) and madvise (so resident memory never drops:
# soak_short's RSS bounds; qemu's own translation buffers count in the
# resident memory an arena test compares), a fork while other guest threads
# run can hang or abort inside qemu (the fork torture tests), and a program
# that execs /proc/self/exe runs the aarch64 binary on the host (the
# AK_BACKGROUND environment test).
qemu_excluded='Rlimit|ChildrenOfAChurning|ChildrenNeverHang|^soak_short$|ForkWhileTheBackgroundThread'
qemu_excluded+='|PoolReclaimEnvironment|ArenaReclaim.RetainedChunksAreReusedCommitted'
# Also left to the native stages: three more forks while other threads
# run (the background thread, or a parked thread whose pool spares the
# child takes: qemu aborts in the child), and the heap profiler's
# tests that need a stack walked from inside the allocators out to the
# caller: under qemu-user the sampled stacks reach no caller frame (the
# sites get 0 %); prof_pprof_test, whose capture starts at the site, runs.
qemu_excluded+='|AForkChildStartsItsOwnThread|Fork.ChildAllocatesAndFreesBlocksFromBeforeTheFork'
qemu_excluded+='|AForkChildTakesTheSparesOfOtherThreads'
qemu_excluded+='|ProfMalloc.TopNames|ProfArena.LabelsName|ProfPool.LabelsName'

run_start=$(date +%s)
timings=()
n=0
for stage in "${stages[@]}"; do
  n=$((n + 1))
  stage_start=$(date +%s)
  before="$passed $failed $skipped"
  echo "==== [stage $n/${#stages[@]}] $stage: ${what[$stage]} (usually $(fmt_time "${measured[$stage]:-${usual[$stage]}}"); elapsed $(fmt_time $((stage_start - run_start))))"
  case "$stage" in
    release)
      if configure_build build-test -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1"; then
        run_ctest build-test release
        # The heap profiler forced on (AK_PROF=1): the allocators' suites
        # again, every pool then sampled (its inline paths off).
        AK_PROF=1 run_ctest build-test release-prof -L unit -R "$prof_suites" -E "$prof_skip"
      else
        failed=$((failed + 1)); failures+=("release build")
      fi
      ;;
    asan)
      if CC=clang CXX=clang++ configure_build build-asan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-O1 -g" \
        -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" -DAK_SANITIZE=address,undefined -DAK_CHECKED=ON; then
        ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
          run_ctest build-asan asan -LE "$not_here"
        AK_PROF=1 ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
          run_ctest build-asan asan-prof -L unit -R "$prof_core" -E "$prof_skip"
      else
        failed=$((failed + 1)); failures+=("asan build")
      fi
      ;;
    tsan)
      if CC=clang CXX=clang++ configure_build build-tsan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-O1 -g" \
        -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" -DAK_SANITIZE=thread; then
        # die_after_fork=0: a fork child of a multi-threaded test starts the
        # reclaim policy's background thread when its memory waits (as
        # glibc allows); ThreadSanitizer refuses new threads after such a
        # fork unless told not to.
        TSAN_OPTIONS=halt_on_error=1:die_after_fork=0 run_ctest build-tsan tsan -LE "$not_here"
        AK_PROF=1 TSAN_OPTIONS=halt_on_error=1:die_after_fork=0 \
          run_ctest build-tsan tsan-prof -L unit -R "$prof_core" -E "$prof_skip"
      else
        failed=$((failed + 1)); failures+=("tsan build")
      fi
      ;;
    valgrind)
      [ -x build-test/tests/arena_test ] || configure_build build-test -DCMAKE_BUILD_TYPE=RelWithDebInfo
      # Multi-threaded tests are TSan's: under memcheck's serialised threads
      # a race test (PoolMagazine.TrimRacesWithOwners) alone took 4-8 min,
      # TrimWhileOwnersRunHandsNoObjectOutTwice 6 min (its trims wait out
      # the owners, which memcheck runs one at a time).
      single_threaded='-*Concurrent*:*Threads*:*Thread*:*Four*:*Race*:*WhileOwnersRun*'
      # Definite leaks fail the run; "possibly lost" does not: the
      # background reclaim thread (detached, it ends after an idle second)
      # may still run at exit, and memcheck counts its TLS block as
      # possibly lost.
      for t in build-test/tests/arena_test build-test/tests/arena_cpp_test build-test/tests/pool_test \
        build-test/tests/pool_cpp_test; do
        [ -x "$t" ] || continue
        step "valgrind $(basename "$t")" valgrind --error-exitcode=99 --leak-check=full \
          --errors-for-leak-kinds=definite -q "$t" --gtest_brief=1 \
          --gtest_filter="$single_threaded"
      done
      ;;
    hardened)
      if configure_build build-hardened -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAK_HARDENED=ON \
        -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1"; then
        run_ctest build-hardened hardened -LE "$not_here"
      else
        failed=$((failed + 1)); failures+=("hardened build")
      fi
      ;;
    fuzz)
      step "fuzz" bash tests/fuzz/run.sh "${AK_FUZZ_SECONDS:-24}"
      ;;
    soak)
      step "soak" bash tests/soak/run.sh "${AK_SOAK_SECONDS:-45}"
      ;;
    realprog)
      if scripts/deps.sh realprog; then
        [ -f build-test/libarenakit-malloc.so ] || configure_build build-test -DCMAKE_BUILD_TYPE=RelWithDebInfo
        step "realprog" bash tests/realprog/run.sh "$root/build-test/libarenakit-malloc.so"
      else
        failed=$((failed + 1)); failures+=("realprog deps")
      fi
      ;;
    aarch64)
      if AK_JOBS=$jobs bash tests/platform/aarch64.sh "$root" build-aarch64; then
        run_ctest build-aarch64/arenakit aarch64 -L unit -LE source -E "$qemu_excluded"
      else
        failed=$((failed + 1)); failures+=("aarch64 build")
      fi
      ;;
    musl)
      # One count per program the script runs (its last line: "musl: N passed, N failed").
      log=$(mktemp)
      AK_JOBS=$jobs bash tests/platform/musl.sh "$root" build-musl 2>&1 | tee "$log"
      line=$(tail -1 "$log")
      rm -f "$log"
      if [[ "$line" =~ ^musl:\ ([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
        passed=$((passed + BASH_REMATCH[1]))
        failed=$((failed + BASH_REMATCH[2]))
        [ "${BASH_REMATCH[2]}" -eq 0 ] || failures+=("musl: ${BASH_REMATCH[2]} programs")
      else
        failed=$((failed + 1)); failures+=("musl: no summary")
      fi
      ;;
    format)
      [ -f build-test/Makefile ] || cmake -S "$root" -B build-test -DAK_BUILD_TESTS=ON -DAK_BUILD_BENCH=OFF >/dev/null
      step "format-check" cmake --build build-test --target format-check
      ;;
  esac
  took=$(($(date +%s) - stage_start))
  timings+=("$stage $took s")
  measured[$stage]=$took
  read -r p0 f0 s0 <<<"$before"
  echo "---- [stage $n/${#stages[@]}] $stage done in $(fmt_time $took): $((passed - p0)) passed," \
    "$((failed - f0)) failed, $((skipped - s0)) skipped; elapsed $(fmt_time $(($(date +%s) - run_start)))"
done

echo "stage times: $(IFS=,; echo "${timings[*]}" | sed 's/,/, /g'); total $(fmt_time $(($(date +%s) - run_start)))"
mkdir -p "$(dirname "$times_file")" &&
  for st in "${!measured[@]}"; do echo "$st ${measured[$st]}"; done | sort >"$times_file"

if [ ${#failures[@]} -gt 0 ]; then
  printf 'FAILED: %s\n' "${failures[@]}"
fi
echo "tests: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
