# Runs inside cmake --install (after the files are copied). Writes the files
# that must name the real install prefix:
#  - LIBDIR/pkgconfig/moestream.pc
#  - the Python package's _install_paths.py: the libdir relative to the package,
#    which is how the installed package finds the installed library.
# Inputs (set by Install.cmake): MOESTREAM_PC_IN, MOESTREAM_LIBDIR,
# MOESTREAM_INCLUDEDIR, MOESTREAM_PYTHON_DIR, PROJECT_VERSION,
# PROJECT_DESCRIPTION, MOESTREAM_PC_REQUIRES_PRIVATE. DESTDIR is honoured.

foreach(dir LIBDIR INCLUDEDIR PYTHON_DIR)
  cmake_path(ABSOLUTE_PATH MOESTREAM_${dir} BASE_DIRECTORY "${CMAKE_INSTALL_PREFIX}" NORMALIZE
             OUTPUT_VARIABLE _moestream_full_${dir})
endforeach()

set(CMAKE_INSTALL_FULL_LIBDIR "${_moestream_full_LIBDIR}")
set(CMAKE_INSTALL_FULL_INCLUDEDIR "${_moestream_full_INCLUDEDIR}")
set(_moestream_pc "$ENV{DESTDIR}${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig/moestream.pc")
message(STATUS "Installing: ${_moestream_pc}")
configure_file("${MOESTREAM_PC_IN}" "${_moestream_pc}" @ONLY)

set(_moestream_pkg "${_moestream_full_PYTHON_DIR}/moestream")
file(RELATIVE_PATH _moestream_rel "${_moestream_pkg}" "${CMAKE_INSTALL_FULL_LIBDIR}")
set(_moestream_paths "$ENV{DESTDIR}${_moestream_pkg}/_install_paths.py")
message(STATUS "Installing: ${_moestream_paths}")
file(WRITE "${_moestream_paths}"
     "# Written by cmake --install: the libdir relative to this package's directory.\n"
     "LIB_DIR_FROM_PACKAGE = \"${_moestream_rel}\"\n")
