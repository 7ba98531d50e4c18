/* SPDX-License-Identifier: MIT */
/* harden.h - the hardened build's mitigations (internal; docs/hardening.md).
 *
 * AK_HARDENED is a mask set by the build (CMake AK_HARDENED / AK_HARDEN):
 *   links        free-list links are stored encoded with a per-slab secret
 *                (arenakit/detail/link.h) and every pop checks that the decoded link
 *                stays inside its slab: a forged or corrupted link aborts
 *                with a message instead of being followed
 *   guards       the last OS page of every pool slab and malloc span is
 *                inaccessible (PROT_NONE): a linear overflow out of a slab
 *                faults instead of reaching the next one
 *   shuffle      the slots of a fresh slab are handed out in random order
 *   double-free  every free checks whether the block is already free (the
 *                block's first word decodes to a plausible link: then the
 *                free lists are searched) and aborts naming the call
 * links and double-free both store links encoded (ak_harden_encode).
 * Each flag is a compile-time constant, so a normal build carries no cost. */
#ifndef AK_HARDEN_H
#define AK_HARDEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifndef AK_HARDENED
#define AK_HARDENED 0
#endif

enum { AK_HARDEN_LINKS = 1, AK_HARDEN_GUARDS = 2, AK_HARDEN_SHUFFLE = 4, AK_HARDEN_DOUBLE_FREE = 8 };

static const bool ak_harden_links = (AK_HARDENED & AK_HARDEN_LINKS) != 0;
static const bool ak_harden_guards = (AK_HARDENED & AK_HARDEN_GUARDS) != 0;
static const bool ak_harden_shuffle = (AK_HARDENED & AK_HARDEN_SHUFFLE) != 0;
static const bool ak_harden_double_free = (AK_HARDENED & AK_HARDEN_DOUBLE_FREE) != 0;
/* Links are stored encoded (a key per slab) when either needs it. */
static const bool ak_harden_encode = (AK_HARDENED & (AK_HARDEN_LINKS | AK_HARDEN_DOUBLE_FREE)) != 0;

/** A random 64-bit value from a per-thread generator seeded by the kernel
 *  (getrandom; the address space layout and the clock if that fails).
 *  Thread-safe, never fails; not for cryptography. */
uint64_t _ak_random(void);

/** A secret for encoding links: random, never 0 (so that a zeroed word
 *  never decodes to NULL). */
static inline uintptr_t _ak_random_key(void) { return (uintptr_t)(_ak_random() | 1u); }

/** Links `n` blocks at base, base + stride, ... into a chain in random
 *  order (shuffle) or address order, the last one pointing to `tail`;
 *  links encoded with `key` (arenakit/detail/link.h). Returns the first
 *  block of the chain. */
void *_ak_chain_blocks(uintptr_t base, size_t stride, size_t n, void *tail, uintptr_t key, bool shuffle);

#endif /* AK_HARDEN_H */
