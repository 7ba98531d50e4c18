#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A component's layout (docs/design.md: "The pool", "The general heap"),
# checked on the code:
#   check_layout.sh includes SOURCE_DIR COMPONENT
#     the include graph of SOURCE_DIR/src/COMPONENT ("COMPONENT/..."
#     includes): no cycle. For the pool also: no file of slab/ includes a
#     mode (modes/, modes.h) or the serial core (serial.h); no file of a
#     mode (modes/X.c, modes/X/...) includes a file of another mode.
#   check_layout.sh calls OBJECT...
#     the graph of the objects' global symbols (a file that uses a symbol
#     another file defines depends on it: calls, data, and the mode tables'
#     references to their functions): no cycle between files.
# Each cycle or broken rule is printed; the exit status is 1 if there is
# any, 0 otherwise (2: bad usage, a missing folder or object).
set -uo pipefail
what=${1:?usage: check_layout.sh includes SOURCE_DIR COMPONENT | calls OBJECT...}
shift

# Reads "FROM TO" edges on stdin; prints each cycle found by a depth-first
# walk (one per back edge) as "a -> b -> ... -> a"; exit 1 if any.
cycles() {
  awk '
    { n[$1]; n[$2]; if (!(($1, $2) in seen)) { seen[$1, $2]; out[$1] = out[$1] " " $2 } }
    function walk(v,   k, m, w, i, c) {
      state[v] = 1; stack[++depth] = v
      m = split(out[v], w, " ")
      for (k = 1; k <= m; k++) {
        if (state[w[k]] == 1) {
          for (i = depth; stack[i] != w[k]; i--) ;
          c = stack[i]; for (i++; i <= depth; i++) c = c " -> " stack[i]
          print "cycle: " c " -> " w[k]; found = 1
        } else if (state[w[k]] == 0) walk(w[k])
      }
      depth--; state[v] = 2
    }
    END { for (v in n) if (state[v] == 0) walk(v); exit found }'
}

case $what in
includes)
  root=${1:?usage: check_layout.sh includes SOURCE_DIR COMPONENT}
  comp=${2:?usage: check_layout.sh includes SOURCE_DIR COMPONENT}
  [ -d "$root/src/$comp" ] || { echo "check_layout: no src/$comp in $root" >&2; exit 2; }
  edges=$(cd "$root/src" && grep -rHoE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"'"$comp"'/[^"]+"' "$comp" \
    --include='*.c' --include='*.h' | sed -E 's/:[[:space:]]*#[[:space:]]*include[[:space:]]*"/ /; s/"$//')
  status=0
  rules=""
  if [ "$comp" = pool ]; then
    bad=$(awk '
      # The mode a file of modes/ belongs to: its folder (modes/threads/...)
      # or its own name (modes/none.c); files of one mode may include each other.
      function mode(f,   m) { m = f; sub(/^pool\/modes\//, "", m); sub(/[\/.].*$/, "", m); return m }
      $1 ~ /^pool\/slab\// && $2 ~ /^pool\/(modes\/|modes\.h$|serial\.h$)/ { print "slab/ includes a mode or the serial core: " $1 " -> " $2 }
      $1 ~ /^pool\/modes\// && $2 ~ /^pool\/modes\// && mode($1) != mode($2) { print "a mode includes another mode: " $1 " -> " $2 }' <<<"$edges")
    if [ -n "$bad" ]; then echo "$bad"; status=1; fi
    rules=", slab/ and modes/ keep to their rules"
  fi
  if ! cycles <<<"$edges"; then status=1; fi
  if [ $status -eq 0 ]; then
    echo "check_layout: $(grep -c . <<<"$edges") $comp includes, no cycle$rules"
  fi
  exit $status
  ;;
calls)
  [ $# -gt 0 ] || { echo "usage: check_layout.sh calls OBJECT..." >&2; exit 2; }
  for o in "$@"; do nm "$o" >/dev/null || exit 2; done
  # name: the object's path below .../src/ (or its file name).
  edges=$(for o in "$@"; do
    name=$(sed -E 's|.*/src/||; s|\.o$||' <<<"$o")
    nm "$o" | awk -v f="$name" '$1 == "U" { print "U", f, $2 } NF == 3 && $2 ~ /^[TDRBVW]$/ { print "D", f, $3 }'
  done | awk '$1 == "D" { def[$3] = $2; next } { use[++n] = $2 " " $3 }
    END { for (i = 1; i <= n; i++) { split(use[i], u, " "); if ((u[2] in def) && def[u[2]] != u[1]) print u[1], def[u[2]] } }' | sort -u)
  if ! cycles <<<"$edges"; then exit 1; fi
  echo "check_layout: $(grep -c . <<<"$edges") dependencies between $# objects, no cycle"
  ;;
*)
  echo "check_layout: unknown check '$what' (includes or calls)" >&2
  exit 2
  ;;
esac
