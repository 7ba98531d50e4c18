/* SPDX-License-Identifier: MIT */
/* A fixture of tests/layers (check_layout.sh includes must reject it): pool.h
 * and slab/slab.h include each other. */
#include "pool/slab/slab.h"
