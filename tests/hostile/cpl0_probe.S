/*
 * A guest image for tests/hostile that stays at CPL0, where it may do what
 * the real guest's CPL3 code cannot: read the doorbell ports, ring the
 * fault port with any vector, and flood the report channel with no runtime
 * in the way. Every vCPU runs the scenario chosen by BootInfo::seed (--seed):
 *
 *   0  `in` from 0xE4, 0xE5, 0xE6, 0xE7, 0xE8; RESULT "in_ports" =
 *      e4 | e5 << 8 | e6 << 16 | e7 << 24 | e8 << 32; DONE 0
 *   1  fault port with vector 22 (reserved)
 *   2  fault port with vector 300 (no such vector)
 *   3  RESULT_ARRAY "elapsed_ns" with 0 values, then DONE 0 (run it as
 *      --workload pingpong: the VMM must not read values[0])
 *   4  RESULT_ARRAY "flood" of 2^22 values from GPA 2 MiB, forever
 *
 * Linked with the guest's linker script (tests/hostile/CMakeLists.txt). On
 * PVM every CPL0 instruction is emulated: the scenarios are a few
 * instructions per exit.
 */
#define BOOTINFO_SEED 56        /* offsetof(BootInfo, seed), checked in hostile_test.cpp */
#define PORT_HYPERCALL 0xE4
#define PORT_SBI 0xE5
#define PORT_UCALL 0xE6
#define PORT_FAULT 0xE7
#define PORT_NOP 0xE8
#define UCALL_MAGIC 0x4c565543
#define UCALL_ARG0 8            /* offsetof(Ucall, args) */

.macro UCALL name, type, a0, a1, text
    .balign 8
\name:
    .long UCALL_MAGIC, \type
    .quad \a0, \a1, 0, 0
    .fill 96, 1, 0              /* file */
1:  .ascii "\text"
    .fill 240 - (. - 1b), 1, 0  /* text, NUL-padded */
.endm

    .section .text.boot, "ax"
    .code64
    .global _start
_start:
    mov BOOTINFO_SEED(%rdi), %rax
    cmp $0, %rax
    je in_ports
    cmp $1, %rax
    je vector_22
    cmp $2, %rax
    je vector_300
    cmp $3, %rax
    je empty_elapsed
    cmp $4, %rax
    je flood
    jmp done

in_ports:
    xor %r8, %r8
    in $PORT_NOP, %al
    movzbq %al, %rcx
    or %rcx, %r8
    shl $8, %r8
    in $PORT_FAULT, %al
    movzbq %al, %rcx
    or %rcx, %r8
    shl $8, %r8
    in $PORT_UCALL, %al
    movzbq %al, %rcx
    or %rcx, %r8
    shl $8, %r8
    in $PORT_SBI, %al
    movzbq %al, %rcx
    or %rcx, %r8
    shl $8, %r8
    in $PORT_HYPERCALL, %al
    movzbq %al, %rcx
    or %rcx, %r8
    mov %r8, ucall_in_ports + UCALL_ARG0(%rip)
    lea ucall_in_ports(%rip), %rbx
    out %al, $PORT_UCALL
    jmp done

vector_22:
    mov $22, %rbx
    jmp fault
vector_300:
    mov $300, %rbx
fault:
    xor %ecx, %ecx              /* error code */
    lea fault(%rip), %rdx       /* "faulting" RIP */
    xor %esi, %esi              /* CR2 */
    mov $0x8, %edi              /* CS: CPL0 */
    out %al, $PORT_FAULT
    jmp fault

empty_elapsed:
    lea ucall_empty_elapsed(%rip), %rbx
    out %al, $PORT_UCALL
    jmp done

flood:
    lea ucall_flood(%rip), %rbx
    out %al, $PORT_UCALL
    jmp flood

done:
    lea ucall_done(%rip), %rbx
    out %al, $PORT_UCALL
    jmp done                    /* the VMM never resumes after DONE */

    .section .data, "aw"
    UCALL ucall_in_ports, 3, 0, 0, "in_ports"
    UCALL ucall_empty_elapsed, 4, 0x100000, 0, "elapsed_ns"
    UCALL ucall_flood, 4, 0x200000, 0x400000, "flood"
    UCALL ucall_done, 7, 0, 0, ""
    .section .note.GNU-stack, "", @progbits
