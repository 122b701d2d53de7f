/* The entry point of tessera-memory-hook (see glibc_floor.hpp): what the C
   runtime's Scrt1.o does, calling __libc_start_main by its first version
   (GLIBC_2.2.5) instead of the GLIBC_2.34 one a newer start file names, so
   that the hook runs on hosts with glibc 2.28. A glibc from 2.34 on calls
   the init argument as it called it before (a program built before 2.34
   passed __libc_csu_init there); tessera_hook_init runs the program's
   .init_array as __libc_csu_init did. fini is 0: the dynamic linker runs
   .fini_array at exit. x86-64 System V ABI, "Process Initialization":
   %rdx holds the dynamic linker's fini, the stack argc then argv. */
	.text
	.globl	_start
	.type	_start, @function
_start:
	.cfi_startproc
	.cfi_undefined rip
	xorl	%ebp, %ebp
	movq	%rdx, %r9
	popq	%rsi
	movq	%rsp, %rdx
	andq	$-16, %rsp
	pushq	%rax
	pushq	%rsp
	xorl	%r8d, %r8d
	leaq	tessera_hook_init(%rip), %rcx
	leaq	main(%rip), %rdi
	call	*tessera_libc_start_main@GOTPCREL(%rip)
	hlt
	.cfi_endproc
	.size	_start, .-_start
	.symver	tessera_libc_start_main, __libc_start_main@GLIBC_2.2.5

/* What crt1.o defines for libio's version check. */
	.section .rodata
	.globl	_IO_stdin_used
	.type	_IO_stdin_used, @object
	.size	_IO_stdin_used, 4
	.align	4
_IO_stdin_used:
	.long	0x20001

	.section .note.GNU-stack,"",@progbits
