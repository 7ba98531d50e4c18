/* SPDX-License-Identifier: MIT */
/* Fixture: a slab file that includes a mode's header. */
#include "pool/slab/slab.h"
#include "pool/modes.h"
