/* The Linux guests' /init, embedded byte for byte (path set by vmm/CMakeLists.txt). */
    .section .rodata.lockvisor_linux_init, "a"
    .balign 16
    .global lockvisor_linux_init_start
    .global lockvisor_linux_init_end
lockvisor_linux_init_start:
    .incbin LOCKVISOR_LINUX_INIT
lockvisor_linux_init_end:
    .section .note.GNU-stack, "", @progbits
