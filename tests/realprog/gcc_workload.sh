#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# gcc workload of tests/realprog/run.sh: copies the generated multi-file C
# program from SRC into BUILD, compiles every file with -O2 -g (two at a
# time), prints the sha256 of each object (debug paths are mapped, so the
# objects do not depend on BUILD), links, and runs the program.
# Usage: gcc_workload.sh SRC BUILD
set -euo pipefail
src=$1 build=$2
rm -rf "$build"
mkdir -p "$build"
cp "$src"/*.c "$src"/*.h "$build"/
cd "$build"
build=$PWD
export build
# shellcheck disable=SC2016 # $build and $1 expand in the child shell
printf '%s\n' *.c | xargs -P 2 -n 1 sh -c \
  'exec gcc -std=c11 -O2 -g -fdebug-prefix-map="$build"=/realprog -Wall -Wextra -Werror -c "$1"' sh
sha256sum ./*.o
gcc -O2 -o prog ./*.o
./prog
