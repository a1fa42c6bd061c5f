# The strategies' NCCL layer (nccl_load.c, nccl_gpus.c) and whether its implementation,
# libcnnb_nccl_impl.so (../nccl_impl), is built: with the NCCL component, and not under
# CNNB_SANITIZE (its kernel needs nvcc, which sanitizer builds leave out) — except in the
# test-only tree against the fake CUDA (CNNB_CUDA_FAKE, with the cuda device), where it is
# host code linked against the fake's NCCL (plugins/devices/cuda/fake), sanitizers or not.
#
# cnnb_strategy_nccl(<target> <name>): links the layer (cnnb_strategy_nccl_layer, built in
# this folder's CMakeLists.txt) into a strategy plugin (which links no NCCL and no CUDA: it
# opens the implementation when a run asks for NCCL), makes building the plugin build the
# implementation, and says at configure time whether the plugin can use NCCL.
set(CNNB_NCCL_IMPL_FAKE OFF)
if(CNNB_HAVE_NCCL AND CNNB_CUDA_FAKE AND CNNB_HAVE_CUDA)
  set(CNNB_NCCL_IMPL ON)
  set(CNNB_NCCL_IMPL_FAKE ON)
  set(CNNB_NCCL_WHY "")
elseif(CNNB_HAVE_NCCL AND NOT CNNB_SANITIZE)
  set(CNNB_NCCL_IMPL ON)
  set(CNNB_NCCL_WHY "")
elseif(CNNB_HAVE_NCCL)
  set(CNNB_NCCL_IMPL OFF)
  set(CNNB_NCCL_WHY "sanitizer builds leave out its nvcc-built implementation")
else()
  set(CNNB_NCCL_IMPL OFF)
  set(CNNB_NCCL_WHY "component NCCL is off")
endif()

function(cnnb_strategy_nccl target name)
  target_link_libraries(${target} PRIVATE cnnb_strategy_nccl_layer)
  if(CNNB_NCCL_IMPL)
    add_dependencies(${target} cnnb_nccl_impl)
    if(CNNB_NCCL_IMPL_FAKE)
      message(STATUS "cnnbench strategy ${name}: NCCL on the test-only fake CUDA (CNNB_CUDA_FAKE)")
    else()
      message(STATUS "cnnbench strategy ${name}: NCCL on (loads nccl/libcnnb_nccl_impl.so on GPUs)")
    endif()
  else()
    message(STATUS "cnnbench strategy ${name}: NCCL off (${CNNB_NCCL_WHY}): host algorithms only")
  endif()
endfunction()
