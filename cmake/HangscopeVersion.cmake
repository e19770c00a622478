# Bakes the project version and git revision into the binary (hangscope --version).
execute_process(
  COMMAND git -C ${CMAKE_CURRENT_SOURCE_DIR} rev-parse --short=12 HEAD
  OUTPUT_VARIABLE HANGSCOPE_GIT_REVISION OUTPUT_STRIP_TRAILING_WHITESPACE
  ERROR_QUIET RESULT_VARIABLE _git_result)
if(NOT _git_result EQUAL 0 OR HANGSCOPE_GIT_REVISION STREQUAL "")
  set(HANGSCOPE_GIT_REVISION "unknown")
endif()
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/version.h.in
               ${CMAKE_CURRENT_BINARY_DIR}/generated/hangscope/version.h @ONLY)
set(HANGSCOPE_GENERATED_INCLUDE ${CMAKE_CURRENT_BINARY_DIR}/generated)
