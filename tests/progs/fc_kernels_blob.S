/* fc_kernels_blob.S: tests/kernels/fc_kernels.ptx embedded in the program,
 * NUL-terminated, so cuModuleLoadData can take it as a string (no xxd, no
 * file to find at run time). The assembler finds the file through the
 * -Wa,-I path given by the build (mk/fakecuda.mk). */
    .section .rodata
    .balign 16
    .globl fck_ptx
    .hidden fck_ptx
    .type fck_ptx, @object
fck_ptx:
    .incbin "fc_kernels.ptx"
    .byte 0
    .size fck_ptx, . - fck_ptx

    .section .note.GNU-stack, "", @progbits
