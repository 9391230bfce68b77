# Installed: the shared library, the public headers, the CLIs, a CMake package
# (find_package(Ringlet) -> Ringlet::ringlet) and a pkg-config file (ringlet.pc).
#
# Under scikit-build-core (pip install .) the install prefix is the wheel's
# site-packages: the library goes into the package beside the extension
# module, and the commands into ringlet/bin, run by the console scripts of
# ringlet/_commands.py.
if(SKBUILD)
  install(TARGETS ringlet LIBRARY DESTINATION ringlet)
  foreach(tool ringletrun ringlet-bench ringlet-topo)
    if(TARGET ${tool})
      set_target_properties(${tool} PROPERTIES INSTALL_RPATH "$ORIGIN/..")
      install(TARGETS ${tool} RUNTIME DESTINATION ringlet/bin)
    endif()
  endforeach()
  # One file, not three: a wheel would copy the version symlinks.
  set_property(TARGET ringlet PROPERTY VERSION)
  set_property(TARGET ringlet PROPERTY SOVERSION)
  set_target_properties(ringlet PROPERTIES INSTALL_RPATH "$ORIGIN")
  return()
endif()

include(CMakePackageConfigHelpers)

install(TARGETS ringlet EXPORT RingletTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES
  ${PROJECT_SOURCE_DIR}/api/include/ringlet/ringlet.h
  ${PROJECT_SOURCE_DIR}/api/include/ringlet/ringlet_c.h
  ${PROJECT_SOURCE_DIR}/common/include/ringlet/types.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ringlet)
foreach(tool ringletrun ringlet-bench ringlet-topo)
  if(TARGET ${tool})
    install(TARGETS ${tool} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endforeach()
set_target_properties(ringlet PROPERTIES INSTALL_RPATH "$ORIGIN")

install(EXPORT RingletTargets NAMESPACE Ringlet::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Ringlet)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/RingletConfig.cmake.in
  ${PROJECT_BINARY_DIR}/RingletConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Ringlet)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/RingletConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/RingletConfig.cmake ${PROJECT_BINARY_DIR}/RingletConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Ringlet)

# The prefix is relative to the .pc file, so the installed tree can be moved.
file(RELATIVE_PATH RINGLET_PC_PREFIX_FROM_PCDIR
  /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
configure_file(${PROJECT_SOURCE_DIR}/cmake/ringlet.pc.in ${PROJECT_BINARY_DIR}/ringlet.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/ringlet.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
