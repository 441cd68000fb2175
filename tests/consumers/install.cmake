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
# The executor's package: its benchmark is installed with pipeplan-train, and
# its targets name no library path of the build machine (Torch's libraries
# come from the consumer's find_package(Torch)).
file(GLOB_RECURSE exec_targets ${PREFIX}/*/pipeplanExecTargets.cmake)
if(exec_targets)
  if(NOT EXISTS ${PREFIX}/bin/pipeplan-exec-bench)
    message(FATAL_ERROR "not installed: bin/pipeplan-exec-bench")
  endif()
  file(READ "${exec_targets}" text)
  if(text MATCHES "[/\\\\]lib[A-Za-z0-9_]+\\.(so|a|dylib)")
    message(FATAL_ERROR "${exec_targets} names a library by its path (${CMAKE_MATCH_0}): "
                        "the installed package is not relocatable")
  endif()
endif()
