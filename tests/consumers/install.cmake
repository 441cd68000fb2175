# cmake -DBUILD_DIR=.. -DPREFIX=.. -DWORK=.. -P install.cmake: a fresh install
# of the build into PREFIX (and an empty WORK for the consumer builds).
file(REMOVE_RECURSE ${PREFIX} ${WORK})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX}
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed (${rc})")
endif()
foreach(f include/pipeplan/planner.h include/pipeplan/version.h)
  if(NOT EXISTS ${PREFIX}/${f})
    message(FATAL_ERROR "not installed: ${f}")
  endif()
endforeach()
file(GLOB_RECURSE config ${PREFIX}/*/pipeplanConfig.cmake)
file(GLOB_RECURSE version ${PREFIX}/*/pipeplanConfigVersion.cmake)
file(GLOB_RECURSE pc ${PREFIX}/*/pipeplan.pc)
if(NOT config OR NOT version OR NOT pc)
  message(FATAL_ERROR "missing pipeplanConfig.cmake, its version file or pipeplan.pc")
endif()
