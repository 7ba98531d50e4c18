#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The README's test command: builds arenakit and runs every test suite.
#
#   scripts/test.sh            all stages
#   scripts/test.sh STAGE...   some of: release asan tsan valgrind hardened
#                              fuzz soak realprog format
#
# Stages:
#   release   release-with-assertions build (-O2 -g, assert on, -Werror),
#             every ctest suite including the consumer tests (link ways and
#             the matrix of compilers, -O levels, link modes, PIE, C and C++)
#   asan      AddressSanitizer + UndefinedBehaviorSanitizer + checked build
#             (AK_CHECKED), unit tests: the arena and pools take their
#             annotated paths (use-after-clear/free death tests) and misuse
#             dies with its message (double free, foreign pointer, wrong pool)
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
#   soak      the soak program for AK_SOAK_SECONDS (default 60) under the
#             release and the hardened build (tests/soak/run.sh)
#   realprog  python test modules, git, sqlite3, gcc and sort with
#             LD_PRELOAD=libarenakit-malloc.so, output compared with a run
#             without it (tests/realprog/run.sh)
#   format    clang-format check of every source file
# Installs missing Debian packages first (scripts/deps.sh test).
# Ends with one line "tests: N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=${AK_JOBS:-$(nproc)}
stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(release asan tsan valgrind hardened fuzz soak realprog format)

scripts/deps.sh test || { echo "test.sh: could not install dependencies" >&2; exit 1; }

passed=0
failed=0
failures=()

# Runs ctest in build dir $1 with extra args; adds its counts to the totals.
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
    local total nfail
    total=$(echo "$line" | sed -E 's/.* out of ([0-9]+).*/\1/')
    nfail=$(echo "$line" | sed -E 's/.*passed, ([0-9]+) tests? failed.*/\1/')
    passed=$((passed + total - nfail))
    failed=$((failed + nfail))
    [ "$nfail" -eq 0 ] || failures+=("$name: $nfail ctest failures")
  fi
  rm -f "$log"
}

step() { # name command...: a single pass/fail step
  local name=$1
  shift
  echo "== $name"
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); failures+=("$name"); fi
}

configure_build() { # dir cmake-args...
  local dir=$1
  shift
  cmake -S "$root" -B "$dir" -DAK_BUILD_BENCH=OFF -DAK_WERROR=ON "$@" >/dev/null &&
    cmake --build "$dir" -j"$jobs"
}

timings=()
for stage in "${stages[@]}"; do
  stage_start=$(date +%s)
  case "$stage" in
    release)
      echo "==== release-with-assertions build"
      if configure_build build-test -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g"; then
        run_ctest build-test release
      else
        failed=$((failed + 1)); failures+=("release build")
      fi
      ;;
    asan)
      echo "==== ASan+UBSan build"
      if configure_build build-asan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-O1 -g" \
        -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" -DAK_SANITIZE=address,undefined -DAK_CHECKED=ON; then
        ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
          run_ctest build-asan asan -LE consumer
      else
        failed=$((failed + 1)); failures+=("asan build")
      fi
      ;;
    tsan)
      echo "==== ThreadSanitizer build (clang)"
      if CC=clang CXX=clang++ configure_build build-tsan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-O1 -g" \
        -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" -DAK_SANITIZE=thread; then
        TSAN_OPTIONS=halt_on_error=1 run_ctest build-tsan tsan -LE consumer
      else
        failed=$((failed + 1)); failures+=("tsan build")
      fi
      ;;
    valgrind)
      echo "==== Valgrind memcheck (single-threaded suites; arena and pools as mempools)"
      [ -x build-test/tests/arena_test ] || configure_build build-test -DCMAKE_BUILD_TYPE=RelWithDebInfo
      # Multi-threaded tests are TSan's: under memcheck's serialised threads
      # a race test (PoolMagazine.TrimRacesWithOwners) alone took 4-8 min.
      single_threaded='-*Concurrent*:*Threads*:*Thread*:*Four*:*Race*'
      for t in build-test/tests/arena_test build-test/tests/arena_cpp_test build-test/tests/pool_test \
        build-test/tests/pool_cpp_test; do
        [ -x "$t" ] || continue
        step "valgrind $(basename "$t")" valgrind --error-exitcode=99 --leak-check=full -q "$t" --gtest_brief=1 \
          --gtest_filter="$single_threaded"
      done
      ;;
    hardened)
      echo "==== hardened build (AK_HARDENED=ON: links, guards, shuffle, double-free)"
      if configure_build build-hardened -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAK_HARDENED=ON \
        -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g"; then
        run_ctest build-hardened hardened -LE consumer
      else
        failed=$((failed + 1)); failures+=("hardened build")
      fi
      ;;
    fuzz)
      echo "==== libFuzzer targets, ${AK_FUZZ_SECONDS:-24} s each"
      step "fuzz" bash tests/fuzz/run.sh "${AK_FUZZ_SECONDS:-24}"
      ;;
    soak)
      echo "==== soak, ${AK_SOAK_SECONDS:-60} s under the release and the hardened build"
      step "soak" bash tests/soak/run.sh "${AK_SOAK_SECONDS:-60}"
      ;;
    realprog)
      echo "==== real programs under LD_PRELOAD of libarenakit-malloc.so"
      scripts/deps.sh realprog || { failed=$((failed + 1)); failures+=("realprog deps"); continue; }
      [ -f build-test/libarenakit-malloc.so ] || configure_build build-test -DCMAKE_BUILD_TYPE=RelWithDebInfo
      step "realprog" bash tests/realprog/run.sh "$root/build-test/libarenakit-malloc.so"
      ;;
    format)
      echo "==== clang-format check"
      [ -f build-test/Makefile ] || cmake -S "$root" -B build-test -DAK_BUILD_BENCH=OFF >/dev/null
      step "format-check" cmake --build build-test --target format-check
      ;;
    *) echo "test.sh: unknown stage '$stage'" >&2; exit 2 ;;
  esac
  timings+=("$stage $(($(date +%s) - stage_start)) s")
done

echo "stage times: $(IFS=,; echo "${timings[*]}" | sed 's/,/, /g')"

if [ ${#failures[@]} -gt 0 ]; then
  printf 'FAILED: %s\n' "${failures[@]}"
fi
echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
