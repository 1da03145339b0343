/*
 * The RV64 guest's entry: the SBI boot protocol (lockvisor/abi/riscv_boot.h).
 *
 * Every hart enters _start in S-mode (VS-mode under KVM) with paging and
 * interrupts off, a0 = its hart id, a1 = the device tree (the first hart,
 * entered by the firmware) or the opaque word of SBI HSM hart_start (the
 * others, started by runtime/riscv64/hart.cpp). Each hart:
 *   - points stvec at trap_entry, so that a trap (a fault: the guest enables
 *     no interrupt delivery) is named on the console and stops the machine
 *     instead of hanging;
 *   - takes its own stack, rv_hart_stacks[hart id] (the array and its sizes
 *     are defined once, in runtime/riscv64/hart.cpp, and read from here);
 *   - keeps its hart id in tp for this_hart();
 *   - the first hart to arrive zeroes .bss and calls rv_boot_main; any later
 *     one calls rv_secondary_main. Secondaries exist only once the first hart
 *     has started them, after .bss is zero.
 * A hart id beyond the stacks cannot run C++ (no stack): it prints a fixed
 * line through the legacy console and powers off with "system failure".
 *
 * Only integer registers are used here and in the C++ (-march without F/D:
 * guest/arch/riscv64/CMakeLists.txt), so sstatus.FS stays as the firmware
 * left it and no trap path saves floating-point state.
 */
#define SBI_EXT_LEGACY_PUTCHAR 0x01        /* kSbiExtLegacyConsolePutchar */
#define SBI_EXT_SRST 0x53525354            /* kSbiExtSrst */
#define SBI_SRST_REASON_FAILURE 1          /* kSbiSrstReasonSystemFailure */

    .section .text.entry, "ax"
    .globl _start
_start:
    csrw sie, zero
    la t0, trap_entry
    csrw stvec, t0

    ld t1, rv_max_harts
    bgeu a0, t1, hart_out_of_range

    /* sp = rv_hart_stacks + (hart id + 1) * rv_hart_stack_bytes */
    ld t1, rv_hart_stack_bytes
    addi t2, a0, 1
    mul t2, t2, t1
    la sp, rv_hart_stacks
    add sp, sp, t2
    mv tp, a0

    /* The first hart to swap 1 in is the boot hart. */
    la t0, boot_claimed
    li t1, 1
    amoswap.w.aq t1, t1, (t0)
    bnez t1, 3f

    /* Zero .bss (8-byte aligned bounds: linker.ld). */
    la t0, __bss_start
    la t1, __bss_end
1:  bgeu t0, t1, 2f
    sd zero, 0(t0)
    addi t0, t0, 8
    j 1b
2:  call rv_boot_main
    j stop

3:  call rv_secondary_main
stop:
    wfi
    j stop

hart_out_of_range:
    la t0, out_of_range_text
1:  lbu a0, 0(t0)
    beqz a0, 2f
    li a7, SBI_EXT_LEGACY_PUTCHAR
    ecall
    addi t0, t0, 1
    j 1b
2:  li a7, SBI_EXT_SRST
    li a6, 0
    li a0, 0
    li a1, SBI_SRST_REASON_FAILURE
    ecall
    j stop

/*
 * Any trap: the guest takes none on purpose (sstatus.SIE stays 0, so the
 * kick's software interrupt only ends a WFI). rv_trap names the cause on
 * the console and powers off with "system failure"; it never returns. The
 * stack is the hart's own, realigned in case the trap hit mid-adjustment.
 */
    .align 2
trap_entry:
    csrr a0, scause
    csrr a1, sepc
    csrr a2, stval
    andi sp, sp, -16
    call rv_trap
    j stop

    .section .rodata.entry, "a"
out_of_range_text:
    .asciz "FAIL: a hart id beyond kRiscvMaxHarts entered the guest\n"

    .section .data.entry, "aw"
    .align 2
boot_claimed:
    .word 0
