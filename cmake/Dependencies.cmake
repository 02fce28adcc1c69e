# System libraries, all from Debian packages (see .ci/setup-deps).
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
pkg_check_modules(URING REQUIRED IMPORTED_TARGET liburing)
pkg_check_modules(NUMA REQUIRED IMPORTED_TARGET numa)
pkg_check_modules(HWLOC REQUIRED IMPORTED_TARGET hwloc)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)

add_library(moestream_deps INTERFACE)
target_link_libraries(moestream_deps INTERFACE
  PkgConfig::URING PkgConfig::NUMA PkgConfig::HWLOC PkgConfig::PCRE2 PkgConfig::XXHASH
  Threads::Threads)
target_compile_definitions(moestream_deps INTERFACE MOESTREAM_HAVE_IO_URING=1 MOESTREAM_HAVE_NUMA=1
  MOESTREAM_HAVE_HWLOC=1)
# Listed in moestream.pc's Requires.private / Libs.private.
set(MOESTREAM_PC_REQUIRES_PRIVATE "liburing numa hwloc libpcre2-8 libxxhash")

# Python with the Debian packages (numpy, pytest) for the oracle and binding tests.
# Debian's interpreter is preferred over any other python3 on PATH.
if(EXISTS /usr/bin/python3 AND NOT Python3_EXECUTABLE)
  set(Python3_EXECUTABLE /usr/bin/python3)
endif()
find_package(Python3 COMPONENTS Interpreter)
