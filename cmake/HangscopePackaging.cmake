# Install layout and the Debian package (docs/install.md).
#
# `cmake --install build --prefix P` (or `cpack -G DEB` in build/, prefix /usr) lays out:
#   P/bin/hangscope                                  (src/CMakeLists.txt)
#   P/share/hangscope/rules/*.json                   reference copies of the built-in rules (the
#                                                    binary has them compiled in and never reads
#                                                    these; extra rules go to /etc/hangscope/rules.d)
#   P/share/man/man1/hangscope.1.gz                  docs/hangscope.1
#   P/share/bash-completion/completions/hangscope    tools/completions/hangscope.bash
#   P/share/zsh/vendor-completions/_hangscope        tools/completions/_hangscope
#   P/share/doc/hangscope/                           README.md, LICENSE, docs/*.md, and copyright
#                                                    (Debian's machine-readable format:
#                                                    cmake/debian/copyright, which also names the
#                                                    statically linked gRPC/protobuf/abseil)
# Nothing of tests/ is installed.

# The man page, compressed as Debian installs man pages. gzip -n: no name or time stamp in the
# header, so the same page gives the same bytes. Done at configure time (editing the page
# re-runs CMake) so that installing never depends on a build target having been built.
set(_man_page ${PROJECT_SOURCE_DIR}/docs/hangscope.1)
set(_man_page_gz ${PROJECT_BINARY_DIR}/man/hangscope.1.gz)
set_property(DIRECTORY ${PROJECT_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_man_page})
file(MAKE_DIRECTORY ${PROJECT_BINARY_DIR}/man)
execute_process(COMMAND gzip -9 -n -c ${_man_page} OUTPUT_FILE ${_man_page_gz}
                RESULT_VARIABLE _gzip_result)
if(NOT _gzip_result EQUAL 0)
  message(FATAL_ERROR "hangscope: gzip of ${_man_page} failed (${_gzip_result})")
endif()
install(FILES ${_man_page_gz} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)

file(GLOB _builtin_rules CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/rules/builtin/*.json)
install(FILES ${_builtin_rules} DESTINATION ${CMAKE_INSTALL_DATADIR}/hangscope/rules)

install(FILES ${PROJECT_SOURCE_DIR}/tools/completions/hangscope.bash
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME hangscope)
install(FILES ${PROJECT_SOURCE_DIR}/tools/completions/_hangscope
        DESTINATION ${CMAKE_INSTALL_DATADIR}/zsh/vendor-completions)

file(GLOB _docs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/*.md)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/LICENSE ${_docs}
              ${PROJECT_SOURCE_DIR}/cmake/debian/copyright
        DESTINATION ${CMAKE_INSTALL_DOCDIR})

# CPack: `cd build && cpack -G DEB` writes hangscope_<version>_<arch>.deb (the binary stripped)
# and hangscope-dbgsym_<version>_<arch>.ddeb (its debug information, found by build id).
# cpack (and `make install`) package what was built and build nothing themselves: without this,
# cpack's "preinstall" step builds every target, test executables included, which from a test
# (tests/deploy/deb_package_test.sh) would relink binaries that other tests are running.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)
set(HANGSCOPE_PACKAGE_MAINTAINER "The hangscope authors <maintainers@hangscope.invalid>"
    CACHE STRING "Maintainer field of the Debian package (Name <address>)")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME hangscope)
set(CPACK_PACKAGE_VENDOR "The hangscope authors")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${HANGSCOPE_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "find the rank that diverged in a hung multi-node PyTorch/vLLM job")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_RESOURCE_FILE_README ${PROJECT_SOURCE_DIR}/README.md)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES OFF) # the DEB generator splits the debug information off instead

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${HANGSCOPE_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# The extended description (CPack puts the summary above it as the synopsis).
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
    "Captures the native and Python stacks of every rank of a hung job without stopping it,
then correlates all ranks in a wait-for graph and names the one that diverged and why.")
# Depends computed by dpkg-shlibdeps from the binary's NEEDED libraries (gRPC, protobuf and
# abseil are linked statically: cmake/HangscopeStaticRpc.cmake).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Graphviz's dot renders the bundle's tree.svg; without it the bundle has tree.dot only.
set(CPACK_DEBIAN_PACKAGE_SUGGESTS graphviz)
set(CPACK_DEBIAN_DEBUGINFO_PACKAGE ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_SOURCE_GENERATOR TGZ)
set(CPACK_SOURCE_IGNORE_FILES "/\\\\.git/" "/build[^/]*/" "/\\\\.cache/")

include(CPack)
