#!/usr/bin/env bash
# Compiles a translation unit that inlines the pool's fast paths (and so
# the asm of arenakit/slowcall.h) for target options that remove register
# classes: GCC rejects an asm clobber of a register the target cannot use,
# so the headers must name only the registers each target has.
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
for flags in "" "-mgeneral-regs-only" "-mno-sse" "-mno-80387" "-mno-sse -mno-80387" "-mavx512f" \
  "-DAK_PLAIN_SLOW_CALLS"; do
  # shellcheck disable=SC2086
  if out=$("$cc" -O2 -Werror $flags -I"$inc" -I"$gen" -c "$src" -o "$obj" 2>&1); then
    echo "ok: ${flags:-(default)}"
  else
    echo "FAIL: ${flags:-(default)}: $out" >&2
    status=1
  fi
done
exit $status
