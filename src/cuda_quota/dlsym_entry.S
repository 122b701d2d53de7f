/* The exported dlsym (docs/design-memory-quotas.md §1, rule 2).
 *
 * dlsym(RTLD_NEXT, name) is answered relative to the object that called it:
 * glibc reads its own return address. A C wrapper forwarding RTLD_NEXT would
 * make this library the caller and search after it instead, which breaks
 * other interposers and sanitizer runtimes (their interceptors look up the
 * real functions this way, before they are initialised; nothing of theirs may
 * be called then). So an RTLD_NEXT lookup jumps straight into glibc's dlsym
 * with the caller's return address untouched; every other lookup goes to
 * tessera_dlsym (interpose.cpp), which may hand out a wrapper. */
#define RTLD_NEXT_VALUE -1

#if defined(__x86_64__)
        .text
        .globl  dlsym
        .type   dlsym, @function
dlsym:
        .cfi_startproc
        cmpq    $RTLD_NEXT_VALUE, %rdi
        je      1f
        jmp     tessera_dlsym
1:      movq    tessera_glibc_dlsym(%rip), %rax
        testq   %rax, %rax
        jne     2f
        /* First use: resolve glibc's dlsym, keeping the arguments. On entry
         * %rsp is 8 mod 16; two pushes and 8 bytes make it 0 mod 16 for the call. */
        pushq   %rdi
        .cfi_adjust_cfa_offset 8
        pushq   %rsi
        .cfi_adjust_cfa_offset 8
        subq    $8, %rsp
        .cfi_adjust_cfa_offset 8
        call    tessera_resolve_glibc_dlsym
        addq    $8, %rsp
        .cfi_adjust_cfa_offset -8
        popq    %rsi
        .cfi_adjust_cfa_offset -8
        popq    %rdi
        .cfi_adjust_cfa_offset -8
2:      jmp     *%rax
        .cfi_endproc
        .size   dlsym, .-dlsym

#elif defined(__aarch64__)
        .text
        .globl  dlsym
        .type   dlsym, %function
dlsym:
        .cfi_startproc
        cmn     x0, #1
        b.ne    tessera_dlsym
        adrp    x16, tessera_glibc_dlsym
        ldr     x16, [x16, :lo12:tessera_glibc_dlsym]
        cbnz    x16, 1f
        stp     x29, x30, [sp, #-32]!
        .cfi_def_cfa_offset 32
        .cfi_offset 29, -32
        .cfi_offset 30, -24
        mov     x29, sp
        stp     x0, x1, [sp, #16]
        bl      tessera_resolve_glibc_dlsym
        mov     x16, x0
        ldp     x0, x1, [sp, #16]
        ldp     x29, x30, [sp], #32
        .cfi_def_cfa_offset 0
        .cfi_restore 29
        .cfi_restore 30
1:      br      x16
        .cfi_endproc
        .size   dlsym, .-dlsym

#else
#error "libtessera-cuda.so: dlsym_entry.S has no entry for this architecture (x86_64 and aarch64 only)"
#endif

        .section .note.GNU-stack, "", %progbits
