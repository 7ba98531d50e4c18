#!/usr/bin/env bash
# Compiles and runs the C and C++ examples of README.md against the built
# static library, so the README never shows code that does not work.
# Usage: readme_examples.sh README LIBRARY INCLUDE_DIR SCRATCH_DIR
set -euo pipefail
readme=$1 lib=$2 inc=$3 dir=$4
mkdir -p "$dir"
awk '/^```c$/{on=1;next} /^```$/{on=0} on' "$readme" >"$dir/example.c"
awk '/^```cpp$/{on=1;next} /^```$/{on=0} on' "$readme" >"$dir/example.cpp"
[ -s "$dir/example.c" ] && [ -s "$dir/example.cpp" ] || { echo "README lost its examples" >&2; exit 1; }
${CC:-cc} -std=c11 -Wall -Wextra -Werror -I"$inc" "$dir/example.c" "$lib" -lpthread -o "$dir/example_c"
${CXX:-c++} -std=c++17 -Wall -Wextra -Werror -I"$inc" "$dir/example.cpp" "$lib" -lpthread -o "$dir/example_cpp"
"$dir/example_c" >/dev/null
"$dir/example_cpp"
echo "README examples: ok"
