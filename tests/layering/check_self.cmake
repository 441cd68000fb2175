# The layering check fails where it should: on a tree (fixture/) with an
# include that runs up, a folder of src/ no module owns and a header of
# include/pipeplan/ no module owns. Each must be named; the includes that
# point down must not be.
#
#   cmake -DCHECK=<check_layers.cmake> -DFIXTURE=<fixture dir> -P check_self.cmake
execute_process(
  COMMAND ${CMAKE_COMMAND} -DROOT=${FIXTURE} -DMAP=${FIXTURE}/map.md -P ${CHECK}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(text "${out}${err}")
if(rc EQUAL 0)
  message(FATAL_ERROR "check_layers accepted a tree that breaks its layering:\n${text}")
endif()
foreach(expected
    "src/low/low.cc: #include \"pipeplan/high.h\" (high) runs up the layering: low may include low"
    "src/stray/ is in no module"
    "include/pipeplan/orphan.h is in no module"
    "3 problem(s)")
  string(FIND "${text}" "${expected}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "check_layers did not say: ${expected}\nIt said:\n${text}")
  endif()
endforeach()
message(STATUS "check_layers refuses the fixture with the expected 3 problems")
