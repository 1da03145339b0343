/*
 * CPL0 part of the guest: the only code that runs in ring 0, kept tiny
 * because on PVM hosts every CPL0 instruction is emulated (~1 us each).
 *
 * Entry contract (lockvisor/abi/guest_layout.h): long mode, CPL0, IF=0,
 * RSP = kernel stack top, RDI = BootInfo, RSI = vCPU index, RDX = user stack
 * top; GDT, TSS and IDTR already loaded by the VMM. Each vCPU fills the shared
 * IDT with the same gates (idempotent), takes the CPUID snapshot CPL3 code
 * needs, then drops to CPL3 with IOPL = 0 -- or, with --guest-ring 0
 * (BootInfo kBootFlagGuestRing0), calls guest_main at CPL0 instead: the whole
 * program then runs at CPL0, where hlt and vmcall are legal and pause-loop
 * exiting sees its `pause` loops (hardware KVM only: the VMM refuses ring 0
 * on PVM, which would emulate every instruction).
 *
 * What CPL3 code may do is shaped by PVM, where CPL3 runs natively but
 *   - port I/O is granted only by the TSS I/O bitmap (IOPL is discarded):
 *     the VMM's bitmap grants the doorbell and COM1 ports;
 *   - `int $n` raises #UD; only `int3` is delivered: the CPL0 halt and the
 *     CPL0 KVM hypercall are entered with `int3` at two known sites
 *     (kernel_halt and kernel_kvm_hypercall below);
 *   - `cpuid` answers with the host's values, not the VMM's table: the leaves
 *     the runtime needs are read here, at CPL0, and handed over in memory.
 * tests/guest_image checks the built image for all three.
 */
#define SEL_KERNEL_CODE 0x08
#define SEL_USER_DATA   0x1b
#define SEL_USER_CODE   0x23
#define SEL_FIRST_TSS   0x28     /* vCPU i: SEL_FIRST_TSS + 16 * i (guest_layout.h) */
#define IDT_BASE        0x18000  /* kIdtAddr: checked in runtime/start.cpp */
#define PORT_FAULT      0xE7
#define GATE_KERNEL     0x8E00   /* present, DPL0, 64-bit interrupt gate */
#define GATE_USER       0xEE00   /* present, DPL3, 64-bit interrupt gate */
#define RFLAGS_USER     0x0002   /* IOPL=0, IF=0 */
#define VECTOR_BP       3        /* lockvisor/abi/doorbell.h kVectorKernelHalt */
#define BOOT_FLAGS_OFF  20       /* offsetof(BootInfo, flags): checked in runtime/start.cpp */
#define BOOT_FLAG_RING0 0x40     /* kBootFlagGuestRing0: checked in runtime/start.cpp */
#define BOOT_FLAG_WAKE_IPI 0x200 /* kBootFlagWakeIpi: checked in runtime/wake.cpp */
#define BOOT_FLAG_WAKE_NMI 0x400 /* kBootFlagWakeNmi: checked in runtime/wake.cpp */
#define BOOT_FLAG_X2APIC 0x800   /* kBootFlagX2apic: checked in runtime/start.cpp */
#define VECTOR_NMI      2
#define VECTOR_WAKE     0xF2     /* lockvisor/abi/pv_wake.h kWakeVector: checked in runtime/wake.cpp */
#define MSR_APIC_BASE   0x1B
#define APIC_BASE_EN_X2APIC 0xC00  /* enable | x2APIC mode */
#define CPUID1_ECX_X2APIC (1 << 21)
#define MSR_X2APIC_EOI  0x80B
#define MSR_X2APIC_ICR  0x830
#define VENDOR_AMD_EBX  0x68747541   /* "Auth" of AuthenticAMD */
#define VENDOR_HYGON_EBX 0x6f677948  /* "Hygo" of HygonGenuine */

/*
 * KVM hypercall registers from a C call kvm_hypercall(nr, a0, a1, a2, a3)
 * (RDI, RSI, RDX, RCX, R8): RAX = nr, RBX = a0, RCX = a1, RDX = a2, RSI = a3.
 * RBX is callee-saved: the caller of the macro saves it.
 */
.macro KVM_HYPERCALL_ARGS
    mov %rdi, %rax
    mov %rsi, %rbx
    mov %rcx, %r9
    mov %rdx, %rcx
    mov %r9, %rdx
    mov %r8, %rsi
.endm

/* vmcall on Intel, vmmcall on AMD/Hygon (use_vmmcall, set by _start). */
.macro VMCALL_FOR_VENDOR
    cmpb $0, use_vmmcall(%rip)
    jne 91f
    vmcall
    jmp 92f
91: vmmcall
92:
.endm

/*
 * The CPUID snapshot (guest/runtime/cpuid_snapshot.h, struct Cpl0Cpuid):
 * four leaves of 16 bytes (EAX, EBX, ECX, EDX), at the top of the user
 * stack, in a 64-byte slot that keeps the CPL3 stack 16-byte aligned.
 */
#define CPUID_SLOT_BYTES     64
#define CPUID_OFF_SIGNATURE  0       /* 0x40000000 */
#define CPUID_OFF_FEATURES   16      /* 0x40000001 */
#define CPUID_OFF_BASIC      32      /* 1: APIC ID in EBX[31:24] */
#define CPUID_OFF_TOPOLOGY   48      /* 0xB subleaf 0: x2APIC ID in EDX */

/* Steal time (lockvisor/abi/kvm_hypercall.h, guest_layout.h). */
#define KVM_SIGNATURE_EBX       0x4b4d564b   /* "KVMK" */
#define KVM_FEATURE_STEAL_TIME  (1 << 5)
#define MSR_KVM_STEAL_TIME      0x4b564d03
#define STEAL_TIME_BASE         0x30000      /* kStealTimeAddr */
#define STEAL_TIME_SHIFT        6            /* kStealTimeStride = 64 */
#define STEAL_TIME_ENABLE       1

.macro CPUID_TO leaf, offset
    mov $\leaf, %eax
    xor %ecx, %ecx
    cpuid
    mov %eax, \offset(%r15)
    mov %ebx, \offset+4(%r15)
    mov %ecx, \offset+8(%r15)
    mov %edx, \offset+12(%r15)
.endm

    .section .text.boot, "ax"
    .code64
    .global _start
_start:
    mov %rdi, %r12              /* BootInfo */
    mov %rsi, %r13              /* vCPU index */
    mov %rdx, %r14              /* user stack top */

    /*
     * Gates 0..31: exceptions; gate 3 is DPL3 so that CPL3 `int3` reaches it
     * (the CPL0 halt and hypercall); gate 2 (NMI) is nmi_entry, which hands a
     * wake-up NMI to the --pv-wake handler and reports any other NMI as the
     * exception it was before. Then the wake-up IPI's gate. The IDT is shared and every vCPU writes
     * it here, while vCPUs that started earlier already run: each gate must
     * be written once, with its final value, so that a rewrite stores the
     * bytes already there. (Writing gate 3 as a stub and then overriding it
     * would leave a moment in which an earlier vCPU's `int3` finds a
     * half-written gate, the stub's offset with the DPL3 attributes: a #BP.)
     */
    xor %ecx, %ecx
1:  mov exception_stubs(,%rcx,8), %rax
    mov $GATE_KERNEL, %r8d
    cmp $VECTOR_NMI, %ecx
    jne 8f
    lea nmi_entry(%rip), %rax
8:  cmp $VECTOR_BP, %ecx
    jne 2f
    lea breakpoint_or_kernel_call(%rip), %rax
    mov $GATE_USER, %r8d
2:  call set_gate
    inc %ecx
    cmp $32, %ecx
    jne 1b
    mov $VECTOR_WAKE, %ecx
    lea wake_ipi_entry(%rip), %rax
    mov $GATE_KERNEL, %r8d
    call set_gate

    /*
     * Load this vCPU's TSS ourselves, although the VMM's KVM_SET_SREGS already
     * put it in TR. The I/O bitmap check reads TR's cached descriptor, and
     * what an emulator caches for a TR set from outside varies: QEMU TCG (the
     * nested AMD-V test machine) grants no port unless the cached type is
     * "available", which only a real `ltr` of the (available) GDT descriptor
     * leaves there. `ltr` gives every KVM — hardware, nested, PVM — the same
     * architectural state. It marks the descriptor busy, as it should.
     */
    mov %r13d, %eax
    shl $4, %eax
    add $SEL_FIRST_TSS, %eax
    ltr %ax

    /* CPUID at CPL0, where it sees the VMM's table (see above). */
    sub $CPUID_SLOT_BYTES, %r14
    mov %r14, %r15
    CPUID_TO 0x40000000, CPUID_OFF_SIGNATURE
    CPUID_TO 0x40000001, CPUID_OFF_FEATURES
    CPUID_TO 1, CPUID_OFF_BASIC
    CPUID_TO 0xB, CPUID_OFF_TOPOLOGY

    /*
     * Steal time: when the VMM's CPUID (0x40000001 EAX, just snapshot)
     * advertises KVM_FEATURE_STEAL_TIME, enable this vCPU's record at
     * STEAL_TIME_BASE + index * 64 (lockvisor/abi/guest_layout.h) with
     * MSR_KVM_STEAL_TIME = address | 1. KVM (and PVM) then keep `steal` and
     * `preempted` in it; the VMM reads `steal` at the end of the run.
     * wrmsr is CPL0-only, hence here. Uses only rax, rcx, rdx.
     */
    cmpl $KVM_SIGNATURE_EBX, CPUID_OFF_SIGNATURE+4(%r15)
    jne 7f
    testl $KVM_FEATURE_STEAL_TIME, CPUID_OFF_FEATURES(%r15)
    jz 7f
    mov %r13, %rax
    shl $STEAL_TIME_SHIFT, %rax
    add $STEAL_TIME_BASE, %rax
    or $STEAL_TIME_ENABLE, %rax
    xor %edx, %edx              /* the records lie below 4 GiB */
    mov $MSR_KVM_STEAL_TIME, %ecx
    wrmsr
7:

    /*
     * --pv-wake ipi|nmi: the x2APIC, whose ICR is one MSR write, in which
     * this vCPU's LAPIC (already software-enabled by the VMM) then sends and
     * takes the wake-ups. More vCPUs than xAPIC ids address one at a time
     * (BOOT_FLAG_X2APIC, guest_layout.h kMaxXapicVcpus): x2APIC mode too, so
     * that KVM matches a kick to this vCPU's full 32-bit id and nothing else.
     * Only where CPUID offers it: runtime/wake.cpp and runtime/start.cpp then
     * fail the run with a clear message instead of a #GP here. And the NMI
     * gate starts passing NMIs to the handler (every vCPU writes the same).
     */
    testl $(BOOT_FLAG_WAKE_IPI | BOOT_FLAG_WAKE_NMI | BOOT_FLAG_X2APIC), BOOT_FLAGS_OFF(%r12)
    jz 9f
    testl $CPUID1_ECX_X2APIC, CPUID_OFF_BASIC+8(%r15)
    jz 9f
    mov $MSR_APIC_BASE, %ecx
    rdmsr
    or $APIC_BASE_EN_X2APIC, %eax
    wrmsr
    testl $BOOT_FLAG_WAKE_NMI, BOOT_FLAGS_OFF(%r12)
    jz 9f
    movb $1, wake_nmi_on(%rip)
9:

    /* The hypercall instruction KVM expects on this CPU (every vCPU writes the same). */
    xor %eax, %eax
    xor %ecx, %ecx
    cpuid
    xor %eax, %eax
    cmp $VENDOR_AMD_EBX, %ebx
    sete %al
    cmp $VENDOR_HYGON_EBX, %ebx
    sete %cl
    or %cl, %al
    mov %al, use_vmmcall(%rip)

    /* --guest-ring 0: stay at CPL0, on the user stack, and run the program. */
    testl $BOOT_FLAG_RING0, BOOT_FLAGS_OFF(%r12)
    jz 4f
    mov %r14, %rsp
    mov %r12, %rdi
    mov %r13, %rsi
    mov %r15, %rdx
    jmp user_entry

4:  /* iretq frame to user_entry at CPL3: guest_main(BootInfo, index, snapshot). */
    pushq $SEL_USER_DATA
    pushq %r14
    pushq $RFLAGS_USER
    pushq $SEL_USER_CODE
    lea user_entry(%rip), %rax
    pushq %rax
    mov %r12, %rdi
    mov %r13, %rsi
    mov %r15, %rdx
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

/*
 * DPL3 gate 3, dispatching on the saved RIP (trap-style: the instruction
 * after the `int3`):
 *   - kernel_halt's int3: a real `hlt` at CPL0 with IF=0 (the gate cleared
 *     it). Userspace backend: exits as KVM_EXIT_HLT. kvm backend: KVM blocks
 *     the vCPU in its irqchip until KICK_CPU sets pv_unhalted;
 *   - kernel_kvm_hypercall's int3: vmcall/vmmcall with the caller's RAX, RBX,
 *     RCX, RDX, RSI untouched; KVM's answer comes back in RAX;
 * any other breakpoint is reported as #BP like every exception.
 */
breakpoint_or_kernel_call:
    cmpq $kernel_halt_resume, (%rsp)
    je 5f
    cmpq $kernel_hypercall_resume, (%rsp)
    jne exception_3
    VMCALL_FOR_VENDOR
    iretq
5:  hlt
    iretq

/*
 * For a program already at CPL0 (--guest-ring 0): the same two operations
 * without the int3 round trip. In the CPL0 region on purpose: CPL3 code
 * must never reach them (tests/guest_image).
 *   long cpl0_kvm_hypercall(nr, a0, a1, a2, a3);  void cpl0_halt(void);
 */
    .global cpl0_kvm_hypercall
    .type cpl0_kvm_hypercall, @function
cpl0_kvm_hypercall:
    push %rbx
    KVM_HYPERCALL_ARGS
    VMCALL_FOR_VENDOR
    pop %rbx
    ret
    .size cpl0_kvm_hypercall, . - cpl0_kvm_hypercall

    .global cpl0_halt
    .type cpl0_halt, @function
cpl0_halt:
    hlt
    ret
    .size cpl0_halt, . - cpl0_halt

/*
 * --pv-wake ipi|nmi (runtime/wake.h has the protocol; these are its CPL0
 * instructions). Interrupts reach the program only at CPL0 (--guest-ring 0),
 * on its own stack (no stack switch at CPL0; the guest is built without a
 * red zone, so nothing below RSP is live). The handlers save the registers a
 * C call may clobber and pass the interrupt frame (saved RIP first) to
 * wake_ipi_handler / wake_nmi_handler (runtime/wake.cpp, built with general
 * registers only: the interrupted code's SSE state is never touched). After
 * the 40-byte frame, which the CPU pushes at a 16-byte aligned RSP, nine
 * pushes leave RSP 16-byte aligned for the call.
 */
.macro SAVE_SCRATCH
    push %rax; push %rcx; push %rdx; push %rsi; push %rdi
    push %r8;  push %r9;  push %r10; push %r11
.endm
.macro RESTORE_SCRATCH
    pop %r11; pop %r10; pop %r9; pop %r8
    pop %rdi; pop %rsi; pop %rdx; pop %rcx; pop %rax
.endm

wake_ipi_entry:
    SAVE_SCRATCH
    lea 72(%rsp), %rdi
    call wake_ipi_handler
    xor %eax, %eax              /* EOI: the next IPI of this vector may come in */
    xor %edx, %edx
    mov $MSR_X2APIC_EOI, %ecx
    wrmsr
    RESTORE_SCRATCH
    iretq

/* An NMI is a wake-up only with --pv-wake nmi; any other is reported as before. */
nmi_entry:
    cmpb $0, wake_nmi_on(%rip)
    je exception_2
    SAVE_SCRATCH
    lea 72(%rsp), %rdi
    call wake_nmi_handler
    RESTORE_SCRATCH
    iretq

/*
 * unsigned long cpl0_wake_wait_ipi(const volatile u8* ptr, u8 val, volatile u8* waiting):
 * with IF=0, mark this CPU waiting and re-check *ptr == val; then `sti; hlt`
 * as one sequence (STI's shadow lets no interrupt in before the `hlt`, so an
 * IPI that arrived after the re-check is pending and ends the halt at once:
 * sticky). Returns 1 after a halt, 0 if the condition had changed.
 */
    .global cpl0_wake_wait_ipi
    .type cpl0_wake_wait_ipi, @function
cpl0_wake_wait_ipi:
    cli
    movb $1, (%rdx)
    cmpb %sil, (%rdi)
    jne 1f
    sti
    hlt
    cli
    movb $0, (%rdx)
    mov $1, %eax
    ret
1:  movb $0, (%rdx)
    xor %eax, %eax
    ret
    .size cpl0_wake_wait_ipi, . - cpl0_wake_wait_ipi

/*
 * unsigned long cpl0_wake_wait_nmi(const volatile u8* ptr, u8 val, volatile u8* waiting,
 *                                  volatile u8* pending):
 * an NMI is not held back by IF, so nothing makes it pending across the
 * re-check: the window from nmi_wait_window to nmi_wait_after_hlt is where
 * wake_nmi_handler counts it as a wake-up and, before the `hlt`, moves the
 * saved RIP to nmi_wait_skip (the halt is skipped); outside the window it
 * sets *pending, which the next wait consumes at the window's start. Returns
 * 1 after a halt, 0 without one.
 */
    .global cpl0_wake_wait_nmi
    .type cpl0_wake_wait_nmi, @function
    .global nmi_wait_window, nmi_wait_after_hlt, nmi_wait_skip
cpl0_wake_wait_nmi:
    movb $1, (%rdx)
nmi_wait_window:
    cmpb $0, (%rcx)
    jne 2f
    cmpb %sil, (%rdi)
    jne 1f
    hlt
nmi_wait_after_hlt:
    movb $0, (%rdx)
    mov $1, %eax
    ret
2:  movb $0, (%rcx)
1:  movb $0, (%rdx)
    xor %eax, %eax
    ret
nmi_wait_skip:
    movb $0, (%rdx)
    xor %eax, %eax
    ret
    .size cpl0_wake_wait_nmi, . - cpl0_wake_wait_nmi

/* void cpl0_x2apic_icr(u32 destination, u32 low): one ICR write sends the IPI or NMI. */
    .global cpl0_x2apic_icr
    .type cpl0_x2apic_icr, @function
cpl0_x2apic_icr:
    mov %esi, %eax
    mov %edi, %edx
    mov $MSR_X2APIC_ICR, %ecx
    wrmsr
    ret
    .size cpl0_x2apic_icr, . - cpl0_x2apic_icr

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

    .section .data
use_vmmcall:
    .byte 0
wake_nmi_on:
    .byte 0

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
    call guest_main             /* (const BootInfo*, unsigned index, const Cpl0Cpuid*); never returns */
3:  jmp 3b

/*
 * void kernel_halt(void), CPL3: one real `hlt` at CPL0 through gate 3. In the
 * doorbell section: with the port doorbells, the only CPL3 code that may
 * leave CPL3 on purpose.
 */
    .section .text.doorbell, "ax"
    .global kernel_halt
    .type kernel_halt, @function
kernel_halt:
    int3
kernel_halt_resume:
    ret
    .size kernel_halt, . - kernel_halt

/*
 * long kernel_kvm_hypercall(nr, a0, a1, a2, a3), CPL3: KVM's own hypercall
 * (--backend kvm), made at CPL0 through gate 3; vmcall is #GP at CPL3.
 */
    .global kernel_kvm_hypercall
    .type kernel_kvm_hypercall, @function
kernel_kvm_hypercall:
    push %rbx
    KVM_HYPERCALL_ARGS
    int3
kernel_hypercall_resume:
    pop %rbx
    ret
    .size kernel_kvm_hypercall, . - kernel_kvm_hypercall

    .section .note.GNU-stack, "", @progbits
