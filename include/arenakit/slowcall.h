/* arenakit/slowcall.h - how the inline fast paths call the library's slow
 * paths: on x86-64 ELF, through a stub that keeps every general-purpose
 * register, so that a loop around a fast path keeps its values in
 * registers. Included by the public headers; never use it directly.
 *
 * Why: a fast path inlined into a loop carries a call to its slow path
 * even when the loop never takes it. A plain call may change rax, rcx,
 * rdx, rsi, rdi and r8-r11 (System V ABI), so the compiler keeps what the
 * loop needs across it in the six callee-saved registers and reloads the
 * rest from the stack on every iteration. Seed 002's memnode loop around
 * ak_pool_free and ak_pool_alloc ran 14 % faster with this (docs/design.md,
 * "Slow calls").
 *
 * How: the inline assembly of AK_SLOWCALL_ASM_ steps over the caller's red
 * zone (128 bytes below %rsp that a leaf function may use without moving
 * %rsp) and calls the stub `<slow path>_preserving` (src/common/
 * slowcall.S). The stub saves rcx, rdx, rsi, rdi and r8-r11 (and rbp, as
 * any function), aligns the stack, calls the slow path and restores them;
 * its unwind information describes the caller's stack pointer 128 bytes
 * higher, so debuggers, backtrace() and profilers unwind through it. The
 * asm statement names what does change: rax (the result), the flags,
 * memory, and the vector, mask and x87 registers, which the compiler then
 * saves itself where it has values in them (integer loops have none).
 *
 * A stub call costs about 1.5 ns more than a plain one; modes whose every
 * call reaches the library (AK_SYNC_SPINLOCK, AK_SYNC_LOCKFREE) pay that
 * on every call, and a program that uses only those in tight loops may
 * prefer plain calls. Elsewhere (other targets, other compilers, code
 * built with APX's extra registers, which the stub does not save) or with
 * AK_PLAIN_SLOW_CALLS defined before including arenakit, the slow paths
 * are called plainly. On x86-64 the library exports both the slow paths
 * and the stubs, so objects built either way link and run together. */
#ifndef ARENAKIT_SLOWCALL_H
#define ARENAKIT_SLOWCALL_H

#if defined(__x86_64__) && !defined(__ILP32__) && defined(__ELF__) && \
    (defined(__GNUC__) || defined(__clang__)) && !defined(__APX_F__) && !defined(AK_PLAIN_SLOW_CALLS)
/** 1 when the inline paths call their slow paths through the
 *  register-preserving stubs. */
#define AK_SLOWCALL_PRESERVING 1
#else
#define AK_SLOWCALL_PRESERVING 0
#endif

#if AK_SLOWCALL_PRESERVING
/* The call of stub `fn`: %rsp is moved below the red zone first (the
 * call's return address would land in it) and back after. */
#define AK_SLOWCALL_ASM_(fn) "lea -128(%%rsp), %%rsp\n\tcall " fn "@PLT\n\tlea 128(%%rsp), %%rsp"

/* The clobbers of the vector and x87 registers, each only where the
 * target has them (GCC rejects a clobber of a register that code built
 * with -mno-sse, -mno-80387 or -mgeneral-regs-only cannot use, and such
 * code keeps nothing in them). */
#if defined(__SSE__)
#define AK_SLOWCALL_SSE_CLOBBERS_                                                                     \
  , "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", \
      "xmm12", "xmm13", "xmm14", "xmm15"
#else
#define AK_SLOWCALL_SSE_CLOBBERS_
#endif
#if defined(__AVX512F__)
#define AK_SLOWCALL_AVX512_CLOBBERS_                                                                   \
  , "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", "xmm26", \
      "xmm27", "xmm28", "xmm29", "xmm30", "xmm31", "k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7"
#else
#define AK_SLOWCALL_AVX512_CLOBBERS_
#endif
#if !defined(_SOFT_FLOAT)
#define AK_SLOWCALL_X87_CLOBBERS_ , "st", "st(1)", "st(2)", "st(3)", "st(4)", "st(5)", "st(6)", "st(7)"
#else
#define AK_SLOWCALL_X87_CLOBBERS_
#endif

/* What a stub call changes besides its outputs: everything a plain call
 * may change except the general-purpose registers (rax is an output or
 * named by the caller). */
#define AK_SLOWCALL_CLOBBERS_ \
  "memory", "cc" AK_SLOWCALL_SSE_CLOBBERS_ AK_SLOWCALL_AVX512_CLOBBERS_ AK_SLOWCALL_X87_CLOBBERS_
#endif

#endif /* ARENAKIT_SLOWCALL_H */
