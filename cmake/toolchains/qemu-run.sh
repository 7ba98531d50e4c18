#!/bin/sh
# SPDX-License-Identifier: MIT
# qemu-run.sh - the CMAKE_CROSSCOMPILING_EMULATOR of the cross builds
# (cmake/toolchains/*.cmake):
#   qemu-run.sh QEMU SYSROOT PROGRAM [ARG...]
# runs PROGRAM under qemu-user (QEMU -L SYSROOT) with its argv[0] set to
# this script. A program that re-executes itself through argv[0], as
# GoogleTest's "threadsafe" death tests do, so comes back here and runs
# under qemu again: without binfmt_misc the kernel cannot execute a
# program of another architecture itself. The re-executed call has only
# the ARGs; it finds QEMU, SYSROOT and PROGRAM in the environment that
# the first call exported (the child inherits it).
if [ -z "${AK_QEMU_RUN_PROGRAM:-}" ]; then
  if [ $# -lt 3 ]; then
    echo "usage: $0 QEMU SYSROOT PROGRAM [ARG...]" >&2
    exit 2
  fi
  AK_QEMU_RUN_QEMU=$1 AK_QEMU_RUN_ROOT=$2 AK_QEMU_RUN_PROGRAM=$3
  export AK_QEMU_RUN_QEMU AK_QEMU_RUN_ROOT AK_QEMU_RUN_PROGRAM
  shift 3
fi
exec "$AK_QEMU_RUN_QEMU" -L "$AK_QEMU_RUN_ROOT" -0 "$0" "$AK_QEMU_RUN_PROGRAM" "$@"
