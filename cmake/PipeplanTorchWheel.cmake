# PyPI's CUDA torch (a "wheel" LibTorch): libtorch_cuda.so finds the CUDA
# libraries of the nvidia-* wheels beside it through its RPATH at run time,
# but the linker resolves them (for the symbols libtorch_cuda needs) along
# the executable's -rpath first, where Torch's CUDA targets put an older
# toolkit's lib/ (its NCCL lacks symbols torch uses). Naming the wheels'
# folders with -rpath-link puts them ahead. Used by the build
# (src/exec/CMakeLists.txt) and by the installed package (pipeplanConfig).
function(pipeplan_torch_wheel_link_dirs out)
  set(dirs "")
  if(TARGET torch_cuda AND Torch_DIR)
    file(GLOB candidates LIST_DIRECTORIES true "${Torch_DIR}/../../../../nvidia/*/lib")
    foreach(dir IN LISTS candidates)
      get_filename_component(dir "${dir}" REALPATH)
      list(APPEND dirs "${dir}")
    endforeach()
  endif()
  set(${out} "${dirs}" PARENT_SCOPE)
endfunction()
