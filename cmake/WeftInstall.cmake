# WeftInstall.cmake: install tree, find_package(weft) config, pkg-config file.
include(CMakePackageConfigHelpers)

install(TARGETS weft EXPORT weftTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/weft DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.hpp" PATTERN "*.h")
install(FILES ${PROJECT_BINARY_DIR}/include/weft/version.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/weft)

set(WEFT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/weft)
install(EXPORT weftTargets NAMESPACE weft:: DESTINATION ${WEFT_CMAKE_DIR})
configure_package_config_file(cmake/weftConfig.cmake.in ${PROJECT_BINARY_DIR}/weftConfig.cmake
  INSTALL_DESTINATION ${WEFT_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/weftConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/weftConfig.cmake ${PROJECT_BINARY_DIR}/weftConfigVersion.cmake
  DESTINATION ${WEFT_CMAKE_DIR})

# The .pc file locates the prefix relative to itself, so that an install
# with `cmake --install --prefix` elsewhere still points at the right place.
file(RELATIVE_PATH WEFT_PC_RELATIVE_PREFIX "${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig" "${CMAKE_INSTALL_PREFIX}")
configure_file(cmake/weft.pc.in ${PROJECT_BINARY_DIR}/weft.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/weft.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The gdb extension (tools/gdb/weft_gdb.py, docs/debugging.md). Always as
# <datadir>/weft/gdb/weft_gdb.py, for `source`. With a shared libweft, also
# where gdb auto-loads it when it loads the library (the script's name is
# the library's real file name plus -gdb.py): next to the library (loaded if
# the library's directory is in gdb's auto-load safe-path), and under
# <datadir>/gdb/auto-load/<absolute libdir>, which is gdb's own
# $datadir/auto-load (in the default safe-path) when the prefix is /usr.
install(FILES tools/gdb/weft_gdb.py DESTINATION ${CMAKE_INSTALL_DATADIR}/weft/gdb)
if(BUILD_SHARED_LIBS)
  set(WEFT_GDB_AUTOLOAD_NAME libweft.so.${PROJECT_VERSION}-gdb.py)
  install(FILES tools/gdb/weft_gdb.py DESTINATION ${CMAKE_INSTALL_LIBDIR} RENAME ${WEFT_GDB_AUTOLOAD_NAME})
  # The absolute libdir under the prefix given at install time
  # (`cmake --install --prefix` changes it after configuring): escaped, so
  # cmake_install.cmake expands it then.
  if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
    set(WEFT_GDB_AUTOLOAD_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
  else()
    set(WEFT_GDB_AUTOLOAD_LIBDIR "\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}")
  endif()
  install(FILES tools/gdb/weft_gdb.py DESTINATION "${CMAKE_INSTALL_DATADIR}/gdb/auto-load${WEFT_GDB_AUTOLOAD_LIBDIR}"
          RENAME ${WEFT_GDB_AUTOLOAD_NAME})
endif()
