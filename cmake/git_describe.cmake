# Writes OUT, a header that defines LOCKVISOR_GIT_DESCRIBE: "git " and the
# commit of the source tree SRC (`git describe`, "-dirty" with uncommitted
# changes), or "not a git checkout". Run at every build, not at configure
# time, so that a result names the commit its binary was built from after a
# pull and a rebuild; OUT is rewritten only when the text changes, so a build
# without a new commit recompiles nothing.
execute_process(COMMAND git describe --always --dirty --exclude=*
                WORKING_DIRECTORY ${SRC}
                OUTPUT_VARIABLE describe OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE status ERROR_QUIET)
if(status EQUAL 0 AND describe)
  set(describe "git ${describe}")
else()
  set(describe "not a git checkout")
endif()
set(text "// Written by cmake/git_describe.cmake at build time.\n#pragma once\n#define LOCKVISOR_GIT_DESCRIBE \"${describe}\"\n")
set(old "")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT old STREQUAL text)
  file(WRITE ${OUT} "${text}")
endif()
