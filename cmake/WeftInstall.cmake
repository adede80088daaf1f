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
# weft-c.pc is for C programs (weft/weft.h): no -std=c++20 in its Cflags, and
# the C++ runtime libweft is built on among its libraries, since a C
# compiler driver does not add it. A static libweft needs it in Libs; a
# shared one brings it along (needed only for --static).
if(BUILD_SHARED_LIBS)
  set(WEFT_PC_C_LIBS "")
  set(WEFT_PC_C_LIBS_PRIVATE "Libs.private: -lstdc++ -lm -lpthread")
else()
  set(WEFT_PC_C_LIBS "-lstdc++ -lm -lpthread")
  set(WEFT_PC_C_LIBS_PRIVATE "")
endif()
configure_file(cmake/weft-c.pc.in ${PROJECT_BINARY_DIR}/weft-c.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/weft.pc ${PROJECT_BINARY_DIR}/weft-c.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The gdb extension (tools/gdb/weft_gdb.py, docs/debugging.md). Always as
# <datadir>/weft/gdb/weft_gdb.py, for `source`. With a shared libweft, also
# where gdb auto-loads it when it loads the library (the script's name is
# the library's real file name plus -gdb.py): next to the library (loaded if
# the library's directory is in gdb's auto-load safe-path), and under
# <datadir>/gdb/auto-load/<absolute libdir>, which is gdb's own
# $datadir/auto-load (in the default safe-path) when the prefix is /usr.
install(FILES tools/gdb/weft_gdb.py DESTINATION ${CMAKE_INSTALL_DATADIR}/weft/gdb)
# The trace tools (docs/debugging.md) beside it: the plotter, and the script
# that screenshots a trace in speedscope.
install(PROGRAMS tools/trace/weft_trace_plot.py DESTINATION ${CMAKE_INSTALL_DATADIR}/weft/trace)
install(FILES tools/trace/speedscope_screenshot.js DESTINATION ${CMAKE_INSTALL_DATADIR}/weft/trace)
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
