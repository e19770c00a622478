# Bakes the project version (at configure time) and the git revision (at every build) into the
# binary: hangscope --version and every report say which commit made them. The revision lives in
# one generated source (generated/git_revision.cpp), rewritten only when it changes, so a new
# commit recompiles one file instead of leaving a stale revision behind.
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/version.h.in
               ${CMAKE_CURRENT_BINARY_DIR}/generated/hangscope/version.h @ONLY)
set(HANGSCOPE_GENERATED_INCLUDE ${CMAKE_CURRENT_BINARY_DIR}/generated)
set(HANGSCOPE_GIT_REVISION_SOURCE ${CMAKE_CURRENT_BINARY_DIR}/generated/git_revision.cpp)
set(_revision_script ${CMAKE_CURRENT_SOURCE_DIR}/cmake/HangscopeGitRevision.cmake)
# Once now, so that the source exists for the first build; then before every build.
execute_process(COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${CMAKE_CURRENT_SOURCE_DIR}
                        -DOUTPUT=${HANGSCOPE_GIT_REVISION_SOURCE} -P ${_revision_script})
add_custom_target(hangscope_git_revision
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${CMAKE_CURRENT_SOURCE_DIR}
          -DOUTPUT=${HANGSCOPE_GIT_REVISION_SOURCE} -P ${_revision_script}
  BYPRODUCTS ${HANGSCOPE_GIT_REVISION_SOURCE}
  COMMENT "" VERBATIM)
