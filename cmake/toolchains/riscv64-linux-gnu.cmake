# Cross-compiling for riscv64 Linux with Debian 12's g++-riscv64-linux-gnu
# (GCC 12), for the `riscv64` preset (docs/riscv.md). Binaries link
# statically: Debian ships no riscv64 libraries to run them against on an x86
# host, and a static binary runs under qemu-user (and in a riscv64 machine)
# without a sysroot. ctest and gtest's test discovery run them with
# qemu-riscv64-static (package qemu-user-static).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR riscv64)

set(CMAKE_C_COMPILER riscv64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER riscv64-linux-gnu-g++)
set(CMAKE_ASM_COMPILER riscv64-linux-gnu-gcc)

# Libraries and headers only from the cross sysroot, programs from the host.
set(CMAKE_FIND_ROOT_PATH /usr/riscv64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

set(CMAKE_EXE_LINKER_FLAGS_INIT -static)
set(CMAKE_CROSSCOMPILING_EMULATOR /usr/bin/qemu-riscv64-static)
