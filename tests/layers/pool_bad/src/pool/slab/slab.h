/* SPDX-License-Identifier: MIT */
/* Fixture: closes the include cycle with pool.h. */
#include "pool/pool.h"
