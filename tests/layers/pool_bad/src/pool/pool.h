/* SPDX-License-Identifier: MIT */
/* A fixture of tests/layers (check_pool_layout.sh must reject it): pool.h
 * and slab/slab.h include each other. */
#include "pool/slab/slab.h"
