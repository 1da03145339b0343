# The target both builds' lockvisor depend on for vmm/util/build_version.cpp
# (each build adds LOCKVISOR_GIT_DESCRIBE_DIR to that file's include path):
# lockvisor_git_describe runs cmake/git_describe.cmake at every build, which
# rewrites ${LOCKVISOR_GIT_DESCRIBE_DIR}/lockvisor_git_describe.h only when the
# source tree's commit changed.
set(LOCKVISOR_GIT_DESCRIBE_DIR ${CMAKE_BINARY_DIR}/generated)
add_custom_target(lockvisor_git_describe
  COMMAND ${CMAKE_COMMAND} -DSRC=${PROJECT_SOURCE_DIR} -DOUT=${LOCKVISOR_GIT_DESCRIBE_DIR}/lockvisor_git_describe.h
          -P ${PROJECT_SOURCE_DIR}/cmake/git_describe.cmake
  BYPRODUCTS ${LOCKVISOR_GIT_DESCRIBE_DIR}/lockvisor_git_describe.h
  COMMENT "Reading the source tree's commit"
  VERBATIM)
