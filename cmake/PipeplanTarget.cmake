# Per-target settings shared by every pipeplan target (no global flags, so a
# parent project's settings are left alone).

# C++17 (a usage requirement of the libraries: their headers need it), no
# compiler extensions, and warnings for pipeplan's own sources only.
function(pipeplan_target_defaults target)
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "EXECUTABLE")
    target_compile_features(${target} PRIVATE cxx_std_17)
  else()
    target_compile_features(${target} PUBLIC cxx_std_17)
  endif()
  set_target_properties(${target} PROPERTIES CXX_EXTENSIONS OFF)
  pipeplan_warnings(${target})
endfunction()

# -Wall -Wextra on GCC and Clang (AppleClang included), /W4 on MSVC.
function(pipeplan_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANG_AND_ID:CXX,GNU,Clang,AppleClang>:-Wall -Wextra>
    $<$<COMPILE_LANG_AND_ID:CXX,MSVC>:/W4>)
endfunction()
