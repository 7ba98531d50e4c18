/* SPDX-License-Identifier: MIT */
/* collatz.h - the Collatz programs (bench/collatz.c). */
#ifndef AK_BENCH_COLLATZ_H
#define AK_BENCH_COLLATZ_H

#ifdef __cplusplus
extern "C" {
#endif

/* Runs the ivec (list == 0) or list (list != 0) program over 1..top with
 * `threads` threads. *steps: sum of the sequence lengths; *bad: sequences
 * that came out wrong (0 unless the allocator is broken). 0, or -1 if a
 * thread could not be started. */
int collatz_run(int list, long top, int threads, long *steps, long *bad);

/* The same sum, computed without allocating. */
long collatz_reference(long top);

#ifdef __cplusplus
}
#endif

#endif
