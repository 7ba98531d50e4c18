/* SPDX-License-Identifier: MIT */
/* Fixture: the mode the other one includes. */
#include "pool/modes.h"
