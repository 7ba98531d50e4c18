#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The layer rule cannot be bypassed by path: no #include in src/ or
# include/ climbs out of its folder ("../") or names an absolute path; the
# include roots of the build (CMakeLists.txt, tests/layers) decide what
# each layer sees.
#   check_includes.sh SOURCE_DIR
set -uo pipefail
root=${1:?usage: check_includes.sh SOURCE_DIR}
dirs=()
for d in "$root/src" "$root/include"; do [ -d "$d" ] && dirs+=("$d"); done
[ ${#dirs[@]} -gt 0 ] || { echo "check_includes: no src/ or include/ in $root" >&2; exit 2; }
bad=$(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"](/|([^">]*/)?\.\./)' \
  "${dirs[@]}" --include='*.c' --include='*.h' --include='*.hpp' --include='*.S' --include='*.in')
if [ -n "$bad" ]; then
  echo "check_includes: these includes leave their folder (the layer rule, docs/design.md):"
  echo "$bad"
  exit 1
fi
n=$(grep -rhcE '^[[:space:]]*#[[:space:]]*include' "${dirs[@]}" | awk '{s += $1} END {print s + 0}')
echo "check_includes: $n includes in src/ and include/, none with ../ or an absolute path"
