# The riscv64 build's `lockvisor` (included by the top-level CMakeLists.txt's
# riscv64 block): the RISC-V KVM machine (vmm/arch/riscv64), the neutral
# layers it reuses, and vmm/cli/riscv64_main.cpp, linked statically with the
# RV64 guest embedded. Debian 12 ships no riscv64 libraries, so fmt,
# nlohmann-json and CLI11 are used header-only, each from a folder holding
# only that library (header-only/, made by the caller): /usr/include itself
# would put the host's C library ahead of the cross compiler's. (Nothing
# compiled here logs through spdlog.)
foreach(lib nlohmann CLI)
  if(NOT EXISTS /usr/include/${lib})
    message(FATAL_ERROR "the riscv64 lockvisor uses /usr/include/${lib} header-only: run tools/install-deps.sh")
  endif()
  file(CREATE_LINK /usr/include/${lib} ${CMAKE_BINARY_DIR}/header-only/${lib} SYMBOLIC)
endforeach()

set(vmm ${PROJECT_SOURCE_DIR}/vmm)
add_executable(lockvisor
  ${vmm}/arch/riscv64/fdt_writer.cpp
  ${vmm}/arch/riscv64/rv_conformance.cpp
  ${vmm}/arch/riscv64/rv_boot.cpp
  ${vmm}/arch/riscv64/rv_kick.cpp
  ${vmm}/arch/riscv64/rv_machine.cpp
  ${vmm}/arch/riscv64/rv_vcpu.cpp
  ${vmm}/arch/riscv64/sbi_exit.cpp
  ${vmm}/cli/riscv64_main.cpp
  ${vmm}/experiment/lock_name.cpp
  ${vmm}/experiment/run_settings.cpp
  ${vmm}/experiment/workload_settings.cpp
  ${vmm}/guest_image.cpp
  ${vmm}/guest_image_blob.S
  ${vmm}/host/cpu_set.cpp
  ${vmm}/host/host_cpus.cpp
  ${vmm}/kvm/binary_stats.cpp
  ${vmm}/kvm/vcpu_exit.cpp
  ${vmm}/loader/elf_loader.cpp
  ${vmm}/machine/report_channel.cpp
  ${vmm}/machine/run_result.cpp
  ${vmm}/pvlock/hypercall_table.cpp
  ${vmm}/util/build_version.cpp
  ${vmm}/util/guest_text.cpp)
set_target_properties(lockvisor PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/vmm)
set(rv64_guest_elf ${CMAKE_BINARY_DIR}/guest/arch/riscv64/lockvisor-rv64-guest.elf)
set_source_files_properties(${vmm}/guest_image_blob.S PROPERTIES
  COMPILE_DEFINITIONS "LOCKVISOR_GUEST_ELF=\"${rv64_guest_elf}\"" OBJECT_DEPENDS ${rv64_guest_elf})
add_dependencies(lockvisor lockvisor-rv64-guest lockvisor_git_describe)
set_source_files_properties(${vmm}/util/build_version.cpp PROPERTIES INCLUDE_DIRECTORIES ${LOCKVISOR_GIT_DESCRIBE_DIR})
target_include_directories(lockvisor PRIVATE ${PROJECT_SOURCE_DIR})
target_include_directories(lockvisor SYSTEM PRIVATE ${CMAKE_BINARY_DIR}/header-only)
target_compile_definitions(lockvisor PRIVATE FMT_HEADER_ONLY=1 LOCKVISOR_VERSION="${PROJECT_VERSION}")
target_link_libraries(lockvisor PRIVATE lockvisor_abi lockvisor_locks lockvisor_workloads lockvisor_host_flags Threads::Threads)
target_link_options(lockvisor PRIVATE -static)
