// SPDX-License-Identifier: MIT
// Which sanitizer a test is built with, for the few tests whose limits
// depend on it (fork under ASan's allocator, the shadow memory in RSS).
// AK_TEST_ASAN and AK_TEST_TSAN are 1 or 0, for GCC (__SANITIZE_*__) and
// clang (__has_feature) alike.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define AK_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define AK_TEST_ASAN 1
#endif
#endif
#ifndef AK_TEST_ASAN
#define AK_TEST_ASAN 0
#endif

#if defined(__SANITIZE_THREAD__)
#define AK_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define AK_TEST_TSAN 1
#endif
#endif
#ifndef AK_TEST_TSAN
#define AK_TEST_TSAN 0
#endif

#define AK_TEST_SANITIZED (AK_TEST_ASAN || AK_TEST_TSAN)
