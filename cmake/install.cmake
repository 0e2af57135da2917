# `cmake --install build [--prefix P]` and `cpack -G DEB` (run in the build directory).
#
#   P/bin/sandboxrun                      the command
#   P/lib/libsandboxrun.a                 the library (every module), for C++ services
#   P/include/sandboxrun/                 its public headers
#   P/lib/pkgconfig/sandboxrun.pc, P/lib/cmake/sandboxrun/   how a service finds it
#   P/share/sandboxrun/                   policies, assessor rules, build-image.sh (the data dir)
#   P/etc/sandboxrun/ (/etc/sandboxrun for prefix /usr)      sandbox.yaml, security.yaml, audit.yaml
#   P/share/man/man1/sandboxrun.1, P/share/doc/sandboxrun/examples/ (systemd units, a service)
#   P/lib/python3/dist-packages/sandboxrun/   the Python package (import sandboxrun)
#
# The binary finds its data from its own location (install_paths.cpp), so any prefix works and
# the source tree is never needed at run time.
include(GNUInstallDirs)

install(TARGETS sandboxrun RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# `sandboxrun mcp --http` runs it from PREFIX/libexec/sandboxrun (src/cli/mcp_command.cpp).
install(TARGETS sandboxrun-mcp-http RUNTIME DESTINATION ${CMAKE_INSTALL_LIBEXECDIR}/sandboxrun)

# One static archive of every module: a service links one library (plus the system libraries
# pkg-config / the CMake package name) instead of ten.
set(_sr_mri "create libsandboxrun.a\n")
set(_sr_libs)
foreach(m IN LISTS SANDBOXRUN_MODULES)
  if(NOT m STREQUAL "cli")
    string(APPEND _sr_mri "addlib $<TARGET_FILE:sandboxrun_${m}>\n")
    list(APPEND _sr_libs sandboxrun_${m})
  endif()
endforeach()
string(APPEND _sr_mri "save\nend\n")
file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/libsandboxrun.mri CONTENT "${_sr_mri}")
add_custom_command(
  OUTPUT ${CMAKE_BINARY_DIR}/libsandboxrun.a
  COMMAND ${CMAKE_COMMAND} -E rm -f libsandboxrun.a
  COMMAND sh -c "${CMAKE_AR} -M < libsandboxrun.mri"
  DEPENDS ${_sr_libs} ${CMAKE_BINARY_DIR}/libsandboxrun.mri
  WORKING_DIRECTORY ${CMAKE_BINARY_DIR}
  COMMENT "Combining the modules into libsandboxrun.a"
  VERBATIM)
add_custom_target(sandboxrun_archive ALL DEPENDS ${CMAKE_BINARY_DIR}/libsandboxrun.a)
install(FILES ${CMAKE_BINARY_DIR}/libsandboxrun.a DESTINATION ${CMAKE_INSTALL_LIBDIR})
# The archive's prefix is the one it is installed to: `--prefix` (and cpack's /usr) is chosen after
# the build, and a service that links the library may live anywhere (src/common/install_prefix.cpp).
set(_sr_prefix_src ${PROJECT_SOURCE_DIR}/src/common/install_prefix.cpp)
set(_sr_prefix_dir ${CMAKE_BINARY_DIR}/install-prefix)
string(CONFIGURE [[
  set(_sr_lib "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/@CMAKE_INSTALL_LIBDIR@/libsandboxrun.a")
  file(WRITE "@_sr_prefix_dir@/prefix.hpp" [=[#define SANDBOXRUN_INSTALL_PREFIX "]=] "${CMAKE_INSTALL_PREFIX}" [=["
]=])
  execute_process(COMMAND "@CMAKE_CXX_COMPILER@" -O2 -include "@_sr_prefix_dir@/prefix.hpp" -c "@_sr_prefix_src@"
                          -o "@_sr_prefix_dir@/install_prefix.cpp.o" COMMAND_ERROR_IS_FATAL ANY)
  execute_process(COMMAND "@CMAKE_AR@" r "${_sr_lib}" "@_sr_prefix_dir@/install_prefix.cpp.o" COMMAND_ERROR_IS_FATAL ANY)
]] _sr_install_prefix @ONLY)
install(CODE "${_sr_install_prefix}")
# A stripped install (`cmake --install --strip`, the .deb) drops the archive's debug sections:
# CMake strips executables only, and they are nine tenths of the archive's size.
install(CODE "if(CMAKE_INSTALL_DO_STRIP)
  execute_process(COMMAND \"${CMAKE_STRIP}\" --strip-debug
    \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/libsandboxrun.a\" COMMAND_ERROR_IS_FATAL ANY)
endif()")

# The public API: every header of include/sandboxrun/ (only the API lives there).
install(DIRECTORY include/sandboxrun/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/sandboxrun FILES_MATCHING PATTERN "*.hpp")

# What a static link of the library needs from the system (the shared forms of the libraries).
set(SANDBOXRUN_PC_LIBS "-lseccomp -lcap -larchive -lz -lyaml-cpp -lpthread")
configure_file(cmake/sandboxrun.pc.in ${CMAKE_BINARY_DIR}/sandboxrun.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/sandboxrun.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
configure_file(cmake/sandboxrunConfig.cmake.in ${CMAKE_BINARY_DIR}/sandboxrunConfig.cmake @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/sandboxrunConfig.cmake DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/sandboxrun)

install(FILES policies/default.json policies/untrusted.json policies/assess-rules.yaml
        DESTINATION ${CMAKE_INSTALL_DATADIR}/sandboxrun/policies)
install(PROGRAMS scripts/build-image.sh DESTINATION ${CMAKE_INSTALL_DATADIR}/sandboxrun)
install(FILES docs/sandboxrun.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
# The Python package, where Debian's python3 looks for prefix /usr (the .deb) whatever the
# multiarch libdir; for another prefix, PYTHONPATH=P/lib/python3/dist-packages. It finds
# P/bin/sandboxrun from its own location (python/sandboxrun/__init__.py, _installed_binary).
install(DIRECTORY python/sandboxrun DESTINATION lib/python3/dist-packages
        FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)
install(FILES examples/systemd/sandboxrun-jobs.slice examples/systemd/example-runner.service
              examples/service/CMakeLists.txt examples/service/service.cpp examples/hello.py
        DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)

# Configuration: in /etc for prefix /usr (the .deb), else below the prefix. Decided when the
# install runs, since `cmake --install --prefix` and cpack choose the prefix then.
set(SANDBOXRUN_SOURCE_DIR ${PROJECT_SOURCE_DIR})
string(CONFIGURE [[
  if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
    set(_sr_etc "/etc/sandboxrun")
  else()
    set(_sr_etc "${CMAKE_INSTALL_PREFIX}/etc/sandboxrun")
  endif()
  file(INSTALL DESTINATION "${_sr_etc}" TYPE FILE PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
       FILES "@SANDBOXRUN_SOURCE_DIR@/config/sandbox.yaml" "@SANDBOXRUN_SOURCE_DIR@/config/security.yaml"
             "@SANDBOXRUN_SOURCE_DIR@/config/audit.yaml")
]] _sr_install_config @ONLY)
install(CODE "${_sr_install_config}")

set(CPACK_PACKAGE_NAME sandboxrun)
set(CPACK_PACKAGE_VENDOR "sandboxrun")
set(CPACK_PACKAGE_CONTACT "sandboxrun maintainers <root@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "run untrusted Python with Docker-grade isolation, without a daemon")
# The package installs below /usr whatever the build was configured with; the configuration
# then goes to /etc/sandboxrun (see the install(CODE) above), as absolute paths in DESTDIR mode.
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_SET_DESTDIR ON)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# libcrypto is opened with dlopen (keyed audit chains, image digests), which dpkg-shlibdeps
# cannot see.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libssl3")
# Building the default image needs mmdebstrap; python3 is inside the image, not on the host.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "mmdebstrap")
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
# prerm removes the byte code python3 writes beside the package when root imports it, which
# dpkg does not know about and would leave behind.
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA "${CMAKE_SOURCE_DIR}/cmake/debian/conffiles;${CMAKE_SOURCE_DIR}/cmake/debian/prerm")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# The Python package needs python3 on the host; the command does not.
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "python3")
include(CPack)
