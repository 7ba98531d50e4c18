/* SPDX-License-Identifier: MIT */
/* arenakit/detail/link.h - the free-list link codec. Not API: included by
 * the public headers' inline paths and by the library, never by users.
 *
 * A free block's first word holds the address of the next free block, the
 * "link". Every link is read and written through these two functions and
 * nowhere else. In the hardened build (the links and double-free
 * mitigations) a link is stored as next ^ key, with a random key per slab
 * or page, never 0, so that a zeroed or overwritten word does not decode to
 * a usable address; otherwise the caller passes key 0 as a compile-time
 * constant and the codec is a plain load or store. */
#ifndef ARENAKIT_DETAIL_LINK_H
#define ARENAKIT_DETAIL_LINK_H

#include <stdint.h>

/* The link is reached through a struct with a pointer member: a store
 * through a bare pointer, or of an integer type, could alias the caller's
 * own uintptr_t and size_t fields (counts, addresses, keys) and cost
 * reloads on the inline paths after every link store. */
typedef struct _ak_link {
  void *next; /* encoded: (uintptr_t)next ^ key */
} _ak_link;

/** The link stored in free block `block`, decoded with `key`. */
static inline void *_ak_link_get(const void *block, uintptr_t key) {
  return (void *)((uintptr_t)((const _ak_link *)block)->next ^ key);
}

/** Stores `next` as the link of free block `block`, encoded with `key`. */
static inline void _ak_link_set(void *block, const void *next, uintptr_t key) {
  ((_ak_link *)block)->next = (void *)((uintptr_t)next ^ key);
}

/** The first word of `block` decoded as a link would be, as an integer
 *  (for plausibility checks that compare it with slab bounds). */
static inline uintptr_t _ak_link_word(const void *block, uintptr_t key) {
  return (uintptr_t)((const _ak_link *)block)->next ^ key;
}

#endif /* ARENAKIT_DETAIL_LINK_H */
