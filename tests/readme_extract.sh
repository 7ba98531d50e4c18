#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# readme_extract.sh README DIR: writes every C and C++ fenced block of
# README as DIR/example-N.c or DIR/example-N.cpp (N counts the blocks), for
# readme_examples.sh and consumer/matrix.sh.
set -euo pipefail
mkdir -p "$2"
awk -v dir="$2" '
  /^```c$/   { n++; f = dir "/example-" n ".c"; next }
  /^```cpp$/ { n++; f = dir "/example-" n ".cpp"; next }
  /^```/     { f = ""; next }
  f != ""    { print > f }
' "$1"
