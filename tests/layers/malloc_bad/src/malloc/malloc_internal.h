/* SPDX-License-Identifier: MIT */
/* A fixture of tests/layers (check_layout.sh includes must reject it): the
 * malloc's shared header and stats_internal.h include each other. */
#ifndef AK_FIXTURE_MALLOC_INTERNAL_H
#define AK_FIXTURE_MALLOC_INTERNAL_H
#include "malloc/stats_internal.h"
#endif
