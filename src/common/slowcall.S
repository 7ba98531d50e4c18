/* slowcall.S - the register-preserving stubs through which the inline fast
 * paths of the public headers call the library's slow paths on x86-64 ELF
 * (include/arenakit/slowcall.h says why and how they are called).
 *
 * Contract of a stub `<slow path>_preserving`: arguments as for the slow
 * path (rdi, rsi); the caller has moved %rsp 128 bytes down past its red
 * zone before the call. The stub returns the slow path's result in rax and
 * keeps every other general-purpose register; the flags, memory, and the
 * vector, mask and x87 registers change as across any call. Its unwind
 * information gives the caller's stack pointer as it was before that move,
 * so the caller's frame unwinds as if it had made a plain call. */
#if defined(__x86_64__) && !defined(__ILP32__) && defined(__ELF__)

/* DWARF register numbers (x86-64 psABI): rdx 1, rcx 2, rsi 4, rdi 5,
 * rbp 6, rsp 7, r8-r11 8-11, return address 16. */
#define AK_SLOWCALL_STUB(stub, target)                                                          \
  .text;                                                                                        \
  .globl stub;                                                                                  \
  .type stub, @function;                                                                        \
  .p2align 4;                                                                                   \
  stub:                                                                                         \
  .cfi_startproc;                                                                               \
  /* the caller's %rsp is 128 (red zone) + 8 (return address) above ours */                     \
  .cfi_def_cfa_offset 136;                                                                      \
  .cfi_offset 16, -136;                                                                         \
  endbr64;                                                                                      \
  pushq %rbp;                                                                                   \
  .cfi_adjust_cfa_offset 8;                                                                     \
  .cfi_offset 6, -144;                                                                          \
  movq %rsp, %rbp;                                                                              \
  .cfi_def_cfa_register 6;                                                                      \
  pushq %rdi;                                                                                   \
  .cfi_offset 5, -152;                                                                          \
  pushq %rsi;                                                                                   \
  .cfi_offset 4, -160;                                                                          \
  pushq %rdx;                                                                                   \
  .cfi_offset 1, -168;                                                                          \
  pushq %rcx;                                                                                   \
  .cfi_offset 2, -176;                                                                          \
  pushq %r8;                                                                                    \
  .cfi_offset 8, -184;                                                                          \
  pushq %r9;                                                                                    \
  .cfi_offset 9, -192;                                                                          \
  pushq %r10;                                                                                   \
  .cfi_offset 10, -200;                                                                         \
  pushq %r11;                                                                                   \
  .cfi_offset 11, -208;                                                                         \
  andq $-16, %rsp; /* the ABI's alignment at the call: the caller's is unknown */               \
  call target@PLT;                                                                              \
  leaq -64(%rbp), %rsp;                                                                         \
  popq %r11;                                                                                    \
  popq %r10;                                                                                    \
  popq %r9;                                                                                     \
  popq %r8;                                                                                     \
  popq %rcx;                                                                                    \
  popq %rdx;                                                                                    \
  popq %rsi;                                                                                    \
  popq %rdi;                                                                                    \
  popq %rbp;                                                                                    \
  .cfi_def_cfa 7, 136;                                                                          \
  ret;                                                                                          \
  .cfi_endproc;                                                                                 \
  .size stub, .- stub

/* The pool's slow paths (include/arenakit/pool.h). */
AK_SLOWCALL_STUB(ak_pool_alloc_slow_preserving, ak_pool_alloc_slow)
AK_SLOWCALL_STUB(ak_pool_free_slow_preserving, ak_pool_free_slow)

/* Built with -fcf-protection: the stubs are fit for CET (each starts with
 * endbr64, and every call returns), so say so, or the linker marks the
 * whole library unfit. GNU_PROPERTY_X86_FEATURE_1_AND = 0xc0000002;
 * __CET__ has bit 0 for IBT and bit 1 for the shadow stack. */
#if defined(__CET__)
.section .note.gnu.property, "a"
.p2align 3
.long 4
.long 16
.long 5
.asciz "GNU"
.long 0xc0000002
.long 4
.long (__CET__ & 3)
.p2align 3
#endif

#endif

/* No executable stack for the objects linked with this one. */
#if defined(__ELF__)
.section .note.GNU-stack, "", @progbits
#endif
