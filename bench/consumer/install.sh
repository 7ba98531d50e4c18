# SPDX-License-Identifier: MIT
# install.sh - sourced by the programs of bench/consumer: installs a cmake
# build of arenakit as a user would, into <scratch>/prefix.
#   ak_consumer_install <cmake build dir> <scratch dir>
# sets `scratch` (absolute) and `prefix`; the install's output goes to
# <scratch>/install.log.
ak_consumer_install() {
  mkdir -p "$2"
  scratch=$(cd "$2" && pwd)
  prefix=$scratch/prefix
  rm -rf "$prefix"
  "${AK_CMAKE:-cmake}" --install "$1" --prefix "$prefix" >"$scratch/install.log"
}
