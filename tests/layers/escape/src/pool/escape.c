/* SPDX-License-Identifier: MIT */
/* A pool file that climbs into the malloc's folder: tests/check_includes.sh
 * must reject it (the ctest layer_includes_escape_rejected). Never built. */
#include "../malloc/malloc_internal.h"
