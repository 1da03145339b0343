/* The guest ELF, embedded byte for byte (path set by vmm/CMakeLists.txt).
   Page-aligned, so that its segments' pages are pages of the executable's
   file and the loader can map them instead of copying (executable_bytes.h). */
    .section .rodata.lockvisor_guest, "a"
    .balign 4096
    .global lockvisor_guest_image_start
    .global lockvisor_guest_image_end
lockvisor_guest_image_start:
    .incbin LOCKVISOR_GUEST_ELF
lockvisor_guest_image_end:
    .section .note.GNU-stack, "", @progbits
