/* The guest ELF, embedded byte for byte (path set by vmm/CMakeLists.txt). */
    .section .rodata.lockvisor_guest, "a"
    .balign 16
    .global lockvisor_guest_image_start
    .global lockvisor_guest_image_end
lockvisor_guest_image_start:
    .incbin LOCKVISOR_GUEST_ELF
lockvisor_guest_image_end:
    .section .note.GNU-stack, "", @progbits
