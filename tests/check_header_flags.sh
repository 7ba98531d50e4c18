#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Compiles a translation unit that inlines the pool's fast paths for target
# options that remove or add register classes (no SSE, no x87, general
# registers only, AVX-512): the public headers must compile for each.
# Usage: check_header_flags.sh CC INCLUDE_DIR GENERATED_INCLUDE_DIR
set -euo pipefail
cc=$1
inc=$2
gen=$3
src=$(mktemp --suffix=.c)
obj=$(mktemp --suffix=.o)
trap 'rm -f "$src" "$obj"' EXIT
cat >"$src" <<'C'
#include <arenakit/arenakit.h>
void *probe(ak_pool *p, void *o) {
  ak_pool_free(p, o);
  return ak_pool_alloc(p);
}
C
status=0
for flags in "" "-mgeneral-regs-only" "-mno-sse" "-mno-80387" "-mno-sse -mno-80387" "-mavx512f"; do
  # shellcheck disable=SC2086
  if out=$("$cc" -O2 -Werror $flags -I"$inc" -I"$gen" -c "$src" -o "$obj" 2>&1); then
    echo "ok: ${flags:-(default)}"
  else
    echo "FAIL: ${flags:-(default)}: $out" >&2
    status=1
  fi
done
exit $status
