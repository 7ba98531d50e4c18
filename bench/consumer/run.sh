#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run.sh - builds bench/consumer/pool_pair.cpp as a user builds a program:
# installs a cmake build of arenakit into <scratch>/prefix, compiles with
# `g++ -O2` and the flags pkg-config gives (shared library, default link:
# lazy binding), runs it pinned to one CPU (taskset, if there) and prints
# its rows (ns per allocate+free pair, best round).
# Usage: run.sh <cmake build dir> <scratch dir> [N [ROUNDS]]
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 <cmake build dir> <scratch dir> [N [ROUNDS]]" >&2; exit 2; }
build=$1 scratch=$2
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/consumer/install.sh
. "$here/install.sh"
ak_consumer_install "$build" "$scratch"
pc=$(dirname "$(find "$prefix" -name arenakit.pc | head -n 1)")
flags=$(PKG_CONFIG_PATH=$pc pkg-config --cflags --libs arenakit)
libdir=$(PKG_CONFIG_PATH=$pc pkg-config --variable=libdir arenakit)
# shellcheck disable=SC2086
"${CXX:-g++}" -O2 -I"$here/.." "$here/pool_pair.cpp" -o "$scratch/pool_pair" $flags -Wl,-rpath,"$libdir"
unset LD_BIND_NOW LD_PRELOAD
pin=()
command -v taskset >/dev/null && pin=(taskset -c "${AK_CPU:-1}")
"${pin[@]}" "$scratch/pool_pair" "${@:3}"
