/* SPDX-License-Identifier: MIT */
/* assert.h - AK_ASSERT, the library's invariant check (internal).
 *
 * AK_ASSERT(cond) states an invariant the code relies on (a slab's counts,
 * a list's membership, a span's bounds, a bump limit). The checked build
 * (-DAK_CHECKED=ON) evaluates it and, when it is false, ends the process
 * through _ak_fatal with the condition, the file and the line. Every other
 * build compiles it out: the condition is type-checked but never
 * evaluated, so it may be as expensive as the invariant needs and must
 * have no side effects. */
#ifndef AK_ASSERT_H
#define AK_ASSERT_H

#include "common/error.h"

#ifndef AK_CHECKED
#define AK_CHECKED 0
#endif

#if AK_CHECKED
#define AK_ASSERT(cond) \
  ((cond) ? (void)0 : _ak_fatal("internal invariant broken: %s (%s:%d)", #cond, __FILE__, __LINE__))
#else
#define AK_ASSERT(cond) ((void)sizeof(!(cond)))
#endif

#endif /* AK_ASSERT_H */
