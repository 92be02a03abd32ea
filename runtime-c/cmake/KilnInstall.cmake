# Install rules of runtime-c (included by CMakeLists.txt after the targets).
#
#   lib/libkiln_runtime.so.X.Y.Z (+ SOVERSION and development links)
#   lib/libkiln_runtime_static.a, lib/libkiln_io.a
#   include/kiln/{runtime,constants,kernel_abi}.h, include/kiln_io.h
#   bin/kiln-run
#   lib/cmake/kiln/: kilnConfig.cmake, kilnConfigVersion.cmake, kilnTargets*.cmake
#   lib/pkgconfig/: kiln.pc, kiln-static.pc, kiln-io.pc
#
# Every installed path is relative to the prefix, so the tree can be installed
# with `cmake --install BUILD --prefix DIR` and moved afterwards.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(KILN_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)
set(KILN_PKGCONFIG_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

set_target_properties(kiln_runtime PROPERTIES EXPORT_NAME runtime)
set_target_properties(kiln_runtime_static PROPERTIES EXPORT_NAME runtime_static)
set_target_properties(kiln_tools_io PROPERTIES EXPORT_NAME io)
set(KILN_INSTALLED_TARGETS kiln_runtime kiln_runtime_static kiln_tools_io)
if(TARGET kiln-run)
  list(APPEND KILN_INSTALLED_TARGETS kiln-run)
endif()
install(TARGETS ${KILN_INSTALLED_TARGETS} EXPORT kilnTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# constants.h is generated from schemas/runtime_constants.toml; runtime.h includes it.
install(FILES ${PROJECT_SOURCE_DIR}/include/kiln/runtime.h
              ${PROJECT_SOURCE_DIR}/include/kiln/constants.h
              ${PROJECT_SOURCE_DIR}/include/kiln/kernel_abi.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kiln)
install(FILES ${PROJECT_SOURCE_DIR}/tools/io/kiln_io.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

# ---- CMake package ----------------------------------------------------------
install(EXPORT kilnTargets NAMESPACE kiln:: DESTINATION ${KILN_CMAKE_DIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/kilnConfig.cmake.in
  ${PROJECT_BINARY_DIR}/kilnConfig.cmake
  INSTALL_DESTINATION ${KILN_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/kilnConfigVersion.cmake
  VERSION ${KILN_VERSION}
  COMPATIBILITY ${KILN_VERSION_COMPATIBILITY})
install(FILES ${PROJECT_BINARY_DIR}/kilnConfig.cmake
              ${PROJECT_BINARY_DIR}/kilnConfigVersion.cmake
        DESTINATION ${KILN_CMAKE_DIR})

# ---- pkg-config ---------------------------------------------------------------
# prefix is found from the .pc file's own place (${pcfiledir}), so the files
# hold no absolute path unless GNUInstallDirs was given absolute folders.
file(RELATIVE_PATH KILN_PC_UP /kiln-prefix/${KILN_PKGCONFIG_DIR} /kiln-prefix)
string(REGEX REPLACE "/$" "" KILN_PC_UP "${KILN_PC_UP}")
foreach(kind LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${kind}}")
    set(KILN_PC_${kind} "${CMAKE_INSTALL_${kind}}")
  else()
    set(KILN_PC_${kind} "\${prefix}/${CMAKE_INSTALL_${kind}}")
  endif()
endforeach()
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(KILN_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  set(KILN_PC_PREFIX "\${pcfiledir}/${KILN_PC_UP}")
endif()
foreach(pc kiln kiln-static kiln-io)
  configure_file(${CMAKE_CURRENT_LIST_DIR}/${pc}.pc.in ${PROJECT_BINARY_DIR}/pkgconfig/${pc}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/pkgconfig/${pc}.pc DESTINATION ${KILN_PKGCONFIG_DIR})
endforeach()
