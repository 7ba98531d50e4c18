/* SPDX-License-Identifier: MIT */
/* fastpath_probe.c - functions whose machine code tests/check_fastpath.sh
 * counts: the inline ak_arena_alloc fast path for constant size and
 * alignment must stay at most 10 instructions with one conditional branch
 * before its return (docs/arena-fast-path.md). */
#include <arenakit/arenakit.h>

void *ak_probe_alloc_8_8(ak_arena *a);
void *ak_probe_alloc_8_1(ak_arena *a);
void *ak_probe_alloc_48_16(ak_arena *a);

void *ak_probe_alloc_8_8(ak_arena *a) { return ak_arena_alloc(a, 8, 8); }
void *ak_probe_alloc_8_1(ak_arena *a) { return ak_arena_alloc(a, 8, 1); }
void *ak_probe_alloc_48_16(ak_arena *a) { return ak_arena_alloc(a, 48, 16); }
