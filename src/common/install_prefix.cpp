// The prefix this library is installed under, where a service that links it finds the
// configuration and the data files (install_paths.cpp). Compiled here with the configured prefix,
// and again by `cmake --install` for the prefix it installs to, replacing this member of the
// installed libsandboxrun.a (cmake/install.cmake): `--prefix` is chosen after the build.
extern "C" const char* sandboxrun_install_prefix() { return SANDBOXRUN_INSTALL_PREFIX; }
