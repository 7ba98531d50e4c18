/* SPDX-License-Identifier: MIT */
/* Fixture: what the modes share. */
#include "pool/pool.h"
