# Finds the optional components and prints one line for each: on, or off and why.
# CNNB_REQUIRE_ALL=ON turns any "off" into a configuration error (CI uses it).
include(CheckLanguage)
find_package(PkgConfig QUIET)
set(_cnnb_missing "")

macro(cnnb_component name found why)
  if(${found})
    set(CNNB_HAVE_${name} ON)
    message(STATUS "cnnbench component ${name}: on")
  else()
    set(CNNB_HAVE_${name} OFF)
    message(STATUS "cnnbench component ${name}: off (${why})")
    list(APPEND _cnnb_missing "${name}: ${why}")
  endif()
endmacro()

# oneDNN: the CPU device.
find_package(dnnl CONFIG QUIET)
cnnb_component(ONEDNN "${dnnl_FOUND}" "oneDNN not found: apt-get install libdnnl-dev")

# Check: unit tests.
if(PkgConfig_FOUND)
  pkg_check_modules(CHECK QUIET IMPORTED_TARGET check)
endif()
cnnb_component(CHECK "${CHECK_FOUND}" "Check not found: apt-get install check pkg-config")

# libjpeg-turbo: the ImageNet datasource decodes JPEG through its TurboJPEG API.
if(PkgConfig_FOUND)
  pkg_check_modules(TURBOJPEG QUIET IMPORTED_TARGET libturbojpeg)
endif()
cnnb_component(JPEG "${TURBOJPEG_FOUND}" "libjpeg-turbo not found: apt-get install libturbojpeg0-dev")

# OpenMPI: the MPI strategies.
find_package(MPI QUIET COMPONENTS C)
cnnb_component(MPI "${MPI_C_FOUND}" "MPI not found: apt-get install libopenmpi-dev openmpi-bin")

# CUDA toolkit with cuDNN and NCCL: the cuda device (compiles without a GPU).
find_package(CUDAToolkit QUIET)
set(_cuda_ok OFF)
set(_cuda_why "CUDA toolkit not found (nvcc in /usr/local/cuda)")
if(CUDAToolkit_FOUND)
  find_library(CNNB_CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR})
  find_path(CNNB_CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  find_library(CNNB_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
  find_path(CNNB_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  if(NOT CNNB_CUDNN_LIBRARY OR NOT CNNB_CUDNN_INCLUDE_DIR)
    set(_cuda_why "cuDNN not found beside CUDA ${CUDAToolkit_VERSION}")
  elseif(NOT CNNB_NCCL_LIBRARY OR NOT CNNB_NCCL_INCLUDE_DIR)
    set(_cuda_why "NCCL not found beside CUDA ${CUDAToolkit_VERSION}")
  else()
    set(_cuda_ok ON)
  endif()
endif()
cnnb_component(CUDA "${_cuda_ok}" "${_cuda_why}")

if(CNNB_REQUIRE_ALL AND _cnnb_missing)
  string(REPLACE ";" "\n  " _list "${_cnnb_missing}")
  message(FATAL_ERROR "CNNB_REQUIRE_ALL=ON but components are missing:\n  ${_list}")
endif()
