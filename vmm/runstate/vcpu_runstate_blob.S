/* The run-state BPF object (vcpu_runstate.bpf.c compiled with clang -target
 * bpf), embedded byte for byte; libbpf opens it from memory
 * (runstate_page.cpp), so nothing is read from disk at run time. The path is
 * set by vmm/runstate/CMakeLists.txt. */
    .section .rodata.lockvisor_runstate_bpf, "a"
    .balign 8
    .global lockvisor_runstate_bpf_start
    .global lockvisor_runstate_bpf_end
lockvisor_runstate_bpf_start:
    .incbin LOCKVISOR_RUNSTATE_BPF_OBJ
lockvisor_runstate_bpf_end:
    .section .note.GNU-stack, "", @progbits
