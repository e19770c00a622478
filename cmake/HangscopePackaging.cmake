# Install layout and the Debian package (docs/install.md).
#
# `cmake --install build --prefix P` (or `cpack -G DEB` in build/, prefix /usr) lays out:
#   P/bin/hangscope                                  (src/CMakeLists.txt: the front, dump)
#   P/libexec/hangscope/hangscope                    (src/CMakeLists.txt: every other command)
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
#   /lib/systemd/system/hangscope-agent.service      tools/deploy/systemd/hangscope-agent.service
#   /lib/systemd/system/hangscope-watch.service      tools/deploy/systemd/hangscope-watch.service
#                                                    (P/lib/systemd/system for a P other than /usr)
#   /etc/default/hangscope-agent                     tools/deploy/systemd/hangscope-agent.default
#   /etc/default/hangscope-watch                     tools/deploy/systemd/hangscope-watch.default
#                                                    (SYSCONFDIR/default: see below; conffiles of
#                                                    the .deb)
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

# The systemd units and their settings, the agent's (docs/deploy-systemd.md) and the watcher's
# (docs/watch.md): installed, but neither enabled nor started by the package, since the agent
# needs /etc/hangscope/token first and the watcher /etc/hangscope/agents too
# (cmake/debian/postinst).
#
# Their directories depend on the prefix installed to, which only the install knows: cpack
# installs with the prefix /usr (CPACK_PACKAGING_INSTALL_PREFIX, into a DESTDIR) whatever
# CMAKE_INSTALL_PREFIX was at configure time (/usr/local by default), and so does
# `cmake --install --prefix P`. A relative DESTINATION `etc/default` would give
# /usr/etc/default in the package, and CMAKE_INSTALL_FULL_SYSCONFDIR, computed at configure
# time, /usr/local/etc. So the install code below recomputes CMAKE_INSTALL_FULL_SYSCONFDIR
# with GNUInstallDirs' own rule for the prefix being installed to (/etc for /usr, so the
# package lays /etc/default/hangscope-{agent,watch}; /etc/opt/P for /opt/P; P/etc otherwise; an
# absolute -DCMAKE_INSTALL_SYSCONFDIR as it is), and installs to absolute directories
# (file(INSTALL) puts DESTDIR in front of them and lists the files in install_manifest.txt, as
# install(FILES) would). The unit goes to /lib/systemd/system for /usr: Debian 12 packages
# ship their units there (the move to /usr/lib/systemd/system comes with later releases);
# P/lib/systemd/system otherwise (systemd reads /usr/local/lib/systemd/system too). For a prefix
# other than /usr each unit's /usr/bin/hangscope and EnvironmentFile are rewritten to the
# installed paths; the package's units are the files in tools/deploy/systemd/ byte for byte.
install(CODE "set(_hs_systemd_src [[${PROJECT_SOURCE_DIR}/tools/deploy/systemd]])
  set(_hs_sysconfdir [[${CMAKE_INSTALL_SYSCONFDIR}]])
  set(_hs_bindir [[${CMAKE_INSTALL_BINDIR}]])
  set(_hs_rewritten_dir [[${PROJECT_BINARY_DIR}/systemd]])")
install(CODE [[
  string(REGEX REPLACE "/+$" "" _hs_prefix "${CMAKE_INSTALL_PREFIX}")
  if(NOT IS_ABSOLUTE "${_hs_sysconfdir}") # GNUInstallDirs_get_absolute_install_dir's cases
    if(_hs_prefix STREQUAL "" OR _hs_prefix STREQUAL "/usr")
      set(_hs_sysconfdir "/${_hs_sysconfdir}")
    elseif(_hs_prefix MATCHES "^/opt/" AND NOT _hs_prefix MATCHES "^/opt/homebrew/")
      set(_hs_sysconfdir "/${_hs_sysconfdir}${_hs_prefix}")
    else()
      set(_hs_sysconfdir "${_hs_prefix}/${_hs_sysconfdir}")
    endif()
  endif()
  if(NOT IS_ABSOLUTE "${_hs_bindir}")
    set(_hs_bindir "${_hs_prefix}/${_hs_bindir}")
  endif()
  if(_hs_prefix STREQUAL "/usr")
    set(_hs_unitdir /lib/systemd/system)
  else()
    set(_hs_unitdir "${_hs_prefix}/lib/systemd/system")
  endif()
  foreach(_hs_name hangscope-agent hangscope-watch)
    set(_hs_unit "${_hs_systemd_src}/${_hs_name}.service")
    if(NOT _hs_bindir STREQUAL "/usr/bin" OR NOT _hs_sysconfdir STREQUAL "/etc")
      file(READ "${_hs_unit}" _hs_text)
      string(REPLACE "ExecStart=/usr/bin/hangscope " "ExecStart=${_hs_bindir}/hangscope "
             _hs_text "${_hs_text}")
      string(REPLACE "EnvironmentFile=-/etc/default/${_hs_name}"
             "EnvironmentFile=-${_hs_sysconfdir}/default/${_hs_name}" _hs_text "${_hs_text}")
      set(_hs_unit "${_hs_rewritten_dir}/${_hs_name}.service")
      file(WRITE "${_hs_unit}" "${_hs_text}")
    endif()
    file(INSTALL DESTINATION "${_hs_unitdir}" TYPE FILE FILES "${_hs_unit}")
    file(INSTALL DESTINATION "${_hs_sysconfdir}/default" TYPE FILE RENAME ${_hs_name}
         FILES "${_hs_systemd_src}/${_hs_name}.default")
  endforeach()
]])

# CPack: `cd build && cpack -G DEB` writes hangscope_<version>_<arch>.deb (the two programs
# stripped) and hangscope-dbgsym_<version>_<arch>.ddeb (their debug information, by build id).
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
# abseil are linked statically: cmake/HangscopeStaticRpc.cmake; prometheus-cpp and civetweb,
# of `watch --metrics`, are shared: libprometheus-cpp-pull1.0, libcivetweb1, ...).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Graphviz's dot renders the bundle's tree.svg; without it the bundle has tree.dot only.
set(CPACK_DEBIAN_PACKAGE_SUGGESTS graphviz)
set(CPACK_DEBIAN_DEBUGINFO_PACKAGE ON)
# Maintainer scripts (cmake/debian/: the agent's and the watcher's units kept disabled, cleaned
# up on purge; see each script) and conffiles (/etc/default/hangscope-agent and
# /etc/default/hangscope-watch: an administrator's edits survive upgrades, dpkg asks before
# replacing them, and only a purge deletes them). With
# STRICT_PERMISSION the scripts go into the package 0755 and conffiles 0644 whatever the
# checkout's modes.
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/cmake/debian/conffiles ${PROJECT_SOURCE_DIR}/cmake/debian/postinst
    ${PROJECT_SOURCE_DIR}/cmake/debian/prerm ${PROJECT_SOURCE_DIR}/cmake/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_SOURCE_GENERATOR TGZ)
set(CPACK_SOURCE_IGNORE_FILES "/\\\\.git/" "/build[^/]*/" "/\\\\.cache/")

include(CPack)
