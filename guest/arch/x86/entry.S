/*
 * CPL0 part of the guest: the only code that runs in ring 0, kept tiny
 * because on PVM hosts every CPL0 instruction is emulated (~1 us each).
 *
 * Entry contract (lockvisor/abi/guest_layout.h): long mode, CPL0, IF=0,
 * RSP = kernel stack top, RDI = BootInfo, RSI = vCPU index, RDX = user stack
 * top; GDT, TSS and IDTR already loaded by the VMM. Each vCPU fills the shared
 * IDT with the same gates (idempotent), then drops to CPL3 with IOPL=3 so the
 * doorbells work from user mode.
 */
#define SEL_KERNEL_CODE 0x08
#define SEL_USER_DATA   0x1b
#define SEL_USER_CODE   0x23
#define IDT_BASE        0xA000
#define PORT_FAULT      0xE7
#define GATE_KERNEL     0x8E00   /* present, DPL0, 64-bit interrupt gate */
#define GATE_USER       0xEE00   /* present, DPL3, 64-bit interrupt gate */
#define RFLAGS_USER     0x3002   /* IOPL=3, IF=0 */

    .section .text.boot, "ax"
    .code64
    .global _start
_start:
    mov %rdi, %r12              /* BootInfo */
    mov %rsi, %r13              /* vCPU index */
    mov %rdx, %r14              /* user stack top */

    /* Gates 0..31: exceptions. */
    xor %ecx, %ecx
1:  mov exception_stubs(,%rcx,8), %rax
    mov $GATE_KERNEL, %r8d
    call set_gate
    inc %ecx
    cmp $32, %ecx
    jne 1b
    /* Gate 0x80: run `hlt` at CPL0 on behalf of CPL3 code. */
    mov $0x80, %ecx
    lea kernel_halt_gate(%rip), %rax
    mov $GATE_USER, %r8d
    call set_gate

    /* iretq frame to user_entry at CPL3. */
    pushq $SEL_USER_DATA
    pushq %r14
    pushq $RFLAGS_USER
    pushq $SEL_USER_CODE
    lea user_entry(%rip), %rax
    pushq %rax
    mov %r12, %rdi
    mov %r13, %rsi
    iretq

/* set_gate: ecx = vector, rax = handler, r8d = type/attributes word. */
set_gate:
    mov %rcx, %rdi
    shl $4, %rdi
    add $IDT_BASE, %rdi
    mov %eax, %edx
    and $0xFFFF, %edx
    or $(SEL_KERNEL_CODE << 16), %edx
    mov %edx, (%rdi)
    mov %eax, %edx
    and $0xFFFF0000, %edx
    or %r8d, %edx
    mov %edx, 4(%rdi)
    mov %rax, %rdx
    shr $32, %rdx
    mov %edx, 8(%rdi)
    movl $0, 12(%rdi)
    ret

/* DPL3 gate 0x80: a real `hlt` at CPL0 (exits as KVM_EXIT_HLT). */
kernel_halt_gate:
    hlt
    iretq

/*
 * Exception stubs: normalise the frame to (vector, error code, RIP, CS, ...)
 * and report through the fault doorbell. The VMM ends the run there; the
 * loop after it only guards against a VMM that resumes anyway.
 */
.macro STUB vector, has_error
exception_\vector:
    .if \has_error == 0
    pushq $0
    .endif
    pushq $\vector
    jmp exception_common
.endm

exception_common:
    mov (%rsp), %rbx            /* vector */
    mov 8(%rsp), %rcx           /* error code */
    mov 16(%rsp), %rdx          /* faulting RIP */
    mov 24(%rsp), %rdi          /* CS (its low bits are the CPL) */
    mov %cr2, %rsi
    out %eax, $PORT_FAULT
2:  jmp 2b

STUB 0,0;  STUB 1,0;  STUB 2,0;  STUB 3,0;  STUB 4,0;  STUB 5,0;  STUB 6,0;  STUB 7,0
STUB 8,1;  STUB 9,0;  STUB 10,1; STUB 11,1; STUB 12,1; STUB 13,1; STUB 14,1; STUB 15,0
STUB 16,0; STUB 17,1; STUB 18,0; STUB 19,0; STUB 20,0; STUB 21,1; STUB 22,0; STUB 23,0
STUB 24,0; STUB 25,0; STUB 26,0; STUB 27,0; STUB 28,0; STUB 29,1; STUB 30,1; STUB 31,0

    .section .rodata
    .balign 8
exception_stubs:
    .irp v, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
    .quad exception_\v
    .endr

/* CPL3 from here on. */
    .text
user_entry:
    and $-16, %rsp
    call guest_main             /* (const BootInfo*, unsigned index); never returns */
3:  jmp 3b

    .section .note.GNU-stack, "", @progbits
