# SPDX-License-Identifier: MIT
# Cross build for aarch64 Linux (glibc) with Debian's cross compilers
# (gcc-aarch64-linux-gnu, g++-aarch64-linux-gnu; libraries and headers in
# /usr/aarch64-linux-gnu). Programs of the build run under qemu-user, so
# ctest runs the test suites on an x86-64 host (docs/platforms.md):
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake
# scripts/test.sh aarch64 does this, with GoogleTest built for aarch64.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(AK_CROSS_TRIPLE aarch64-linux-gnu)
set(AK_CROSS_ROOT /usr/${AK_CROSS_TRIPLE})

set(CMAKE_C_COMPILER ${AK_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${AK_CROSS_TRIPLE}-g++)
# qemu-user, through qemu-run.sh (which lets a test re-execute itself);
# -L makes the target's dynamic loader and libraries the ones the cross
# compiler linked against.
set(CMAKE_CROSSCOMPILING_EMULATOR ${CMAKE_CURRENT_LIST_DIR}/qemu-run.sh qemu-aarch64 ${AK_CROSS_ROOT})

# Libraries, headers and CMake packages of the target only (never the
# host's x86-64 ones); programs (bash, objdump) from the host.
list(APPEND CMAKE_FIND_ROOT_PATH ${AK_CROSS_ROOT})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
