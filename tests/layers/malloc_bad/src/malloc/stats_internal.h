/* SPDX-License-Identifier: MIT */
/* A fixture of tests/layers: the other half of the include cycle. */
#ifndef AK_FIXTURE_STATS_INTERNAL_H
#define AK_FIXTURE_STATS_INTERNAL_H
#include "malloc/malloc_internal.h"
#endif
