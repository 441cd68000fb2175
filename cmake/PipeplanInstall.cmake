# `cmake --install`: headers, libraries, the CMake package (pipeplan::core,
# and pipeplan::exec as component `exec`) and pipeplan.pc for the core.
include(CMakePackageConfigHelpers)

set(PIPEPLAN_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/pipeplan)

# Public headers; the executor's only when it is built (they need Torch).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/pipeplan
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  COMPONENT core
  FILES_MATCHING PATTERN "*.h"
  PATTERN "exec" EXCLUDE)
install(FILES ${PROJECT_BINARY_DIR}/include/pipeplan/version.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/pipeplan COMPONENT core)

install(TARGETS pipeplan_core EXPORT pipeplanCoreTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT core
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT core)
install(EXPORT pipeplanCoreTargets NAMESPACE pipeplan::
  FILE pipeplanCoreTargets.cmake DESTINATION ${PIPEPLAN_CMAKE_DIR} COMPONENT core)

set(PIPEPLAN_EXEC_INSTALLED OFF)
if(TARGET pipeplan_exec)
  set(PIPEPLAN_EXEC_INSTALLED ON)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/pipeplan/exec
    DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/pipeplan COMPONENT exec
    FILES_MATCHING PATTERN "*.h")
  install(TARGETS pipeplan_exec EXPORT pipeplanExecTargets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT exec
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT exec)
  install(EXPORT pipeplanExecTargets NAMESPACE pipeplan::
    FILE pipeplanExecTargets.cmake DESTINATION ${PIPEPLAN_CMAKE_DIR} COMPONENT exec)
endif()

if(TARGET pipeplan)
  set(PIPEPLAN_CLI_TARGETS pipeplan)
  if(TARGET pipeplan-train)
    list(APPEND PIPEPLAN_CLI_TARGETS pipeplan-train pipeplan-exec-bench)
  endif()
  install(TARGETS ${PIPEPLAN_CLI_TARGETS} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
    COMPONENT cli)
endif()

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/pipeplanConfig.cmake.in
  ${PROJECT_BINARY_DIR}/pipeplanConfig.cmake
  INSTALL_DESTINATION ${PIPEPLAN_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/pipeplanConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/pipeplanConfig.cmake
  ${PROJECT_BINARY_DIR}/pipeplanConfigVersion.cmake
  ${CMAKE_CURRENT_LIST_DIR}/PipeplanTorchWheel.cmake
  DESTINATION ${PIPEPLAN_CMAKE_DIR} COMPONENT core)

# pkg-config: the core only (the executor's flags come from Torch's CMake).
# The prefix is found relative to the .pc file, so `cmake --install --prefix`
# anywhere yields a working file.
file(RELATIVE_PATH PIPEPLAN_PC_UP "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
string(REGEX REPLACE "/$" "" PIPEPLAN_PC_UP "${PIPEPLAN_PC_UP}")
set(PIPEPLAN_PC_PREFIX "\${pcfiledir}/${PIPEPLAN_PC_UP}")
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(PIPEPLAN_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
endif()
set(PIPEPLAN_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
set(PIPEPLAN_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(PIPEPLAN_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(PIPEPLAN_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file(${CMAKE_CURRENT_LIST_DIR}/pipeplan.pc.in ${PROJECT_BINARY_DIR}/pipeplan.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/pipeplan.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT core)
