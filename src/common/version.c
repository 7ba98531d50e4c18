/* SPDX-License-Identifier: MIT */
/* version.c - the version the library was built as (ak_version). */
#include "arenakit/common.h"

int ak_version(void) { return AK_VERSION; }
