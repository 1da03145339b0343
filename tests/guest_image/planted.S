/*
 * Negative control for the CPL3 guard: an image linked with the guest's own
 * linker script (guest/arch/x86/linker.ld), with violations planted in known
 * places. It is never run, only disassembled. Each planted instruction has a
 * label of its own, so the test can check that the guard attributes it.
 *
 * Built three ways (tests/guest_image/CMakeLists.txt):
 *   default                      every plant below;
 *   PLANT_OVERSIZE_FAULT_REGION  the same, with a fault region over the bound;
 *   PLANT_CLEAN                  no plant: only what every region allows.
 *
 * The ports assume lockvisor/abi/doorbell.h's kCpl3PortAccesses grants a
 * byte-wide `out` to 0xE4 (kPortKvmHypercall) and 0xE5 and nothing at 0x80;
 * cpl3_guard_image_test.cpp checks that against the header.
 */

/* CPL0: anything goes. */
    .section .text.boot, "ax"
    .globl _start
_start:
    cpuid
    hlt
    out %eax, $0xe7
1:  jmp 1b

/* The doorbell region: byte-wide port I/O to the ABI's ports, and int3. */
    .section .text.doorbell, "ax"
    .type doorbell_allowed, @function
doorbell_allowed:
    outb %al, $0xe4
    out %al, $0xe5
    outb %al, (%dx)
    inb (%dx), %al
    int3
    .byte 0xcd, 0x03            /* int $0x3: vector 3 like int3 */
    ret
    .size doorbell_allowed, . - doorbell_allowed
#ifndef PLANT_CLEAN
plant_doorbell_port_not_in_abi:
    out %al, $0x80
plant_doorbell_too_wide:
    outl %eax, $0xe4
#endif

/* The fault region: exempt, counted, bounded. */
    .section .text.deliberate_fault, "ax"
fault_case:
    hlt
    ud2
#ifdef PLANT_OVERSIZE_FAULT_REGION
    .fill 600, 1, 0x90
#endif

/* Ordinary CPL3 code. */
    .text
    .type cpl3_allowed, @function
cpl3_allowed:
    int3
    .byte 0xcd, 0x03            /* int $0x3 */
    rdtsc
    pause
    lock cmpxchg %edx, (%rdi)
    rep stosq
    mov %rcx, %rdx
    ret
    .size cpl3_allowed, . - cpl3_allowed
    .p2align 5                  /* multi-byte nop padding ("cs nopw", "data16") */
#ifndef PLANT_CLEAN
plant_int_0x80:
    int $0x80
plant_cpuid:
    cpuid
plant_hlt:
    hlt
plant_cli:
    cli
plant_sti:
    sti
plant_vmcall:
    vmcall
plant_vmmcall:
    vmmcall
plant_rdtscp:
    rdtscp
plant_out_imm:
    out %al, $0xe4
plant_in_dx:
    inl (%dx), %eax
plant_ud2:
    ud2
#endif
    ret

    .section .note.GNU-stack, "", @progbits
