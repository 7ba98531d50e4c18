#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Compiles and runs every C and C++ example block of README.md against the
# built static library, so the README never shows code that does not work.
# Usage: readme_examples.sh README LIBRARY INCLUDE_DIR SCRATCH_DIR
set -euo pipefail
readme=$1 lib=$2 inc=$3 dir=$4
rm -rf "$dir"
mkdir -p "$dir"
# One file per fenced block: example-N.c / example-N.cpp.
"$(dirname "$0")/readme_extract.sh" "$readme" "$dir"
count=0
for src in "$dir"/example-*.c "$dir"/example-*.cpp; do
  [ -f "$src" ] || continue
  exe=${src%.*}
  case "$src" in
    *.c) ${CC:-cc} -std=c11 -Wall -Wextra -Werror -I"$inc" "$src" "$lib" -lpthread -o "$exe" ;;
    *) ${CXX:-c++} -std=c++17 -Wall -Wextra -Werror -I"$inc" "$src" "$lib" -lpthread -o "$exe" ;;
  esac
  "$exe" >/dev/null || { echo "$(basename "$src") exited with $?" >&2; exit 1; }
  count=$((count + 1))
done
[ "$count" -ge 2 ] || { echo "README lost its examples" >&2; exit 1; }
echo "README examples: $count ok"
