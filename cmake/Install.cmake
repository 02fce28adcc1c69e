include(CMakePackageConfigHelpers)

install(TARGETS moestream EXPORT moestreamTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  PUBLIC_HEADER DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(MOESTREAM_BUILD_CLI)
  install(TARGETS moestream_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

set(MOESTREAM_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/moestream)
install(EXPORT moestreamTargets NAMESPACE moestream:: DESTINATION ${MOESTREAM_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/moestreamConfig.cmake.in
  ${PROJECT_BINARY_DIR}/moestreamConfig.cmake INSTALL_DESTINATION ${MOESTREAM_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/moestreamConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/moestreamConfig.cmake ${PROJECT_BINARY_DIR}/moestreamConfigVersion.cmake
  DESTINATION ${MOESTREAM_CMAKE_DIR})

# The Python binding: pure Python, installed beside the interpreter's packages
# under the prefix (PREFIX/lib/python3/dist-packages on Debian layouts).
set(MOESTREAM_PYTHON_INSTALL_DIR "${CMAKE_INSTALL_LIBDIR}/python3/dist-packages" CACHE STRING
    "Where to install the moestream Python package, relative to the prefix")
install(DIRECTORY ${PROJECT_SOURCE_DIR}/python/moestream DESTINATION ${MOESTREAM_PYTHON_INSTALL_DIR}
  PATTERN "__pycache__" EXCLUDE)

# moestream.pc and the Python package's _install_paths.py are written at install
# time (cmake/InstallPaths.cmake) so that they name the prefix actually installed
# to (cmake --install --prefix), not the one configured.
install(CODE "
  set(MOESTREAM_PC_IN [[${PROJECT_SOURCE_DIR}/pkgconfig/moestream.pc.in]])
  set(MOESTREAM_LIBDIR [[${CMAKE_INSTALL_LIBDIR}]])
  set(MOESTREAM_INCLUDEDIR [[${CMAKE_INSTALL_INCLUDEDIR}]])
  set(MOESTREAM_PYTHON_DIR [[${MOESTREAM_PYTHON_INSTALL_DIR}]])
  set(PROJECT_VERSION [[${PROJECT_VERSION}]])
  set(PROJECT_DESCRIPTION [[${PROJECT_DESCRIPTION}]])
  set(MOESTREAM_PC_REQUIRES_PRIVATE [[${MOESTREAM_PC_REQUIRES_PRIVATE}]])
")
install(SCRIPT ${PROJECT_SOURCE_DIR}/cmake/InstallPaths.cmake)
