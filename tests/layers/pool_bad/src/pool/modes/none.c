/* SPDX-License-Identifier: MIT */
/* Fixture: a mode that includes another mode's file. */
#include "pool/modes.h"
#include "pool/modes/spinlock.c"
