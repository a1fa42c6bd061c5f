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
# dnnl-config.cmake find_package()s its own dependencies REQUIRED: Debian's libdnnl-dev
# (DNNL_GPU_RUNTIME OCL) wants OpenCL, whose headers the package only Recommends, and a
# TBB-threaded build wants TBB. A REQUIRED miss inside it is a configure error that QUIET
# cannot stop, so the config file is located and read first, and oneDNN is "off, and why"
# when what it needs is missing; find_package(dnnl) runs only when its dependencies are met.
set(_dnnl_why "oneDNN not found: apt-get install libdnnl-dev")
set(_dnnl_load ON)
set(_dnnl_paths "")
if(dnnl_DIR)
  list(APPEND _dnnl_paths "${dnnl_DIR}")
endif()
foreach(_prefix ${dnnl_ROOT} $ENV{dnnl_ROOT} $ENV{DNNLROOT} ${CMAKE_PREFIX_PATH}
                $ENV{CMAKE_PREFIX_PATH} ${CMAKE_SYSTEM_PREFIX_PATH})
  foreach(_lib lib/${CMAKE_LIBRARY_ARCHITECTURE} lib lib64)
    list(APPEND _dnnl_paths "${_prefix}/${_lib}/cmake/dnnl")
  endforeach()
endforeach()
find_file(CNNB_DNNL_CONFIG NAMES dnnl-config.cmake dnnlConfig.cmake
          PATHS ${_dnnl_paths} NO_DEFAULT_PATH NO_CMAKE_FIND_ROOT_PATH)
if(CNNB_DNNL_CONFIG)
  get_filename_component(_dnnl_dir "${CNNB_DNNL_CONFIG}" DIRECTORY)
  file(STRINGS "${CNNB_DNNL_CONFIG}" _dnnl_runtimes
       REGEX "^[ \t]*set\\((DNNL_GPU_RUNTIME|DNNL_CPU_THREADING_RUNTIME) ")
  # CMake's own FindOpenCL, which prints nothing (Debian's copy beside the config prints
  # "Found OpenCL headers" even when they are not); both cache the same OpenCL_* variables,
  # so the config's own find_package(OpenCL REQUIRED) then finds what this one found.
  if(_dnnl_runtimes MATCHES "DNNL_GPU_RUNTIME \"OCL\"")
    find_package(OpenCL QUIET)
    if(NOT OpenCL_FOUND)
      set(_dnnl_load OFF)
      set(_dnnl_why "oneDNN's CMake package needs the OpenCL headers: apt-get install ocl-icd-opencl-dev")
    endif()
  endif()
  if(_dnnl_load AND _dnnl_runtimes MATCHES "DNNL_CPU_THREADING_RUNTIME \"TBB\"")
    find_package(TBB QUIET COMPONENTS tbb)
    if(NOT TBB_FOUND)
      set(_dnnl_load OFF)
      set(_dnnl_why "oneDNN's CMake package needs TBB: apt-get install libtbb-dev")
    endif()
  endif()
endif()
if(_dnnl_load)
  # Where the file was found (and checked) is where it is loaded from.
  if(CNNB_DNNL_CONFIG AND NOT dnnl_DIR)
    set(dnnl_DIR "${_dnnl_dir}" CACHE PATH "The directory containing oneDNN's CMake package")
  endif()
  find_package(dnnl CONFIG QUIET)
else()
  set(dnnl_FOUND FALSE)
endif()
cnnb_component(ONEDNN "${dnnl_FOUND}" "${_dnnl_why}")

# Check: unit tests.
if(PkgConfig_FOUND)
  pkg_check_modules(CHECK QUIET IMPORTED_TARGET check)
endif()
cnnb_component(CHECK "${CHECK_FOUND}" "Check not found: apt-get install check pkg-config")

# libjpeg-turbo: the ImageNet datasource decodes JPEG through its TurboJPEG API and through
# libjpeg's own (jpeglib.h: region, skipped-row and DCT-scaled decodes); both are needed.
if(PkgConfig_FOUND)
  pkg_check_modules(TURBOJPEG QUIET IMPORTED_TARGET libturbojpeg)
  pkg_check_modules(LIBJPEG QUIET IMPORTED_TARGET libjpeg)
endif()
set(_jpeg_found OFF)
set(_jpeg_why "libjpeg-turbo not found: apt-get install libturbojpeg0-dev libjpeg62-turbo-dev")
if(TURBOJPEG_FOUND AND LIBJPEG_FOUND)
  set(_jpeg_found ON)
elseif(TURBOJPEG_FOUND)
  set(_jpeg_why "libjpeg (jpeglib.h) not found: apt-get install libjpeg62-turbo-dev")
elseif(LIBJPEG_FOUND)
  set(_jpeg_why "TurboJPEG not found: apt-get install libturbojpeg0-dev")
endif()
cnnb_component(JPEG "${_jpeg_found}" "${_jpeg_why}")

# OpenMPI: the MPI strategies.
find_package(MPI QUIET COMPONENTS C)
cnnb_component(MPI "${MPI_C_FOUND}" "MPI not found: apt-get install libopenmpi-dev openmpi-bin")

# CUDA toolkit with cuDNN: the cuda device (compiles without a GPU).
find_package(CUDAToolkit QUIET)
set(_cuda_ok OFF)
set(_cuda_why "CUDA toolkit not found (nvcc in /usr/local/cuda)")
if(CUDAToolkit_FOUND)
  # Debian / Ubuntu's cuDNN packages put the headers under include/<multiarch>.
  find_library(CNNB_CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR})
  find_path(CNNB_CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS}
            PATH_SUFFIXES ${CMAKE_LIBRARY_ARCHITECTURE})
  if(NOT CNNB_CUDNN_LIBRARY OR NOT CNNB_CUDNN_INCLUDE_DIR)
    set(_cuda_why "cuDNN not found beside CUDA ${CUDAToolkit_VERSION}")
  else()
    set(_cuda_ok ON)
  endif()
endif()
cnnb_component(CUDA "${_cuda_ok}" "${_cuda_why}")

# NCCL beside CUDA: the strategies' collectives on GPUs (plugins/strategies/nccl_impl;
# replicated --all_reduce_spec=nccl, horovod and parameter_server on the cuda device).
set(_nccl_ok OFF)
set(_nccl_why "needs the CUDA toolkit (nvcc in /usr/local/cuda)")
if(CUDAToolkit_FOUND)
  find_library(CNNB_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
  find_path(CNNB_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS}
            PATH_SUFFIXES ${CMAKE_LIBRARY_ARCHITECTURE})
  if(NOT CNNB_NCCL_LIBRARY OR NOT CNNB_NCCL_INCLUDE_DIR)
    set(_nccl_why "NCCL not found beside CUDA ${CUDAToolkit_VERSION} (nccl.h, libnccl.so)")
    # PyTorch's pip wheels bring NCCL as nvidia-nccl-cu*, a libnccl.so.2 with no header
    # and no libnccl.so: name it, since "not found" reads wrong to whoever sees it in pip.
    find_program(_cnnb_python3 python3)
    if(_cnnb_python3)
      execute_process(
        COMMAND "${_cnnb_python3}" -c "import nvidia.nccl as m; print(list(m.__path__)[0])"
        OUTPUT_VARIABLE _nccl_wheel OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
      if(_nccl_wheel AND EXISTS "${_nccl_wheel}/lib/libnccl.so.2")
        set(_nccl_why "NCCL found only inside a Python wheel (${_nccl_wheel}/lib/libnccl.so.2), "
                      "which has no nccl.h to build against: install NCCL's development files "
                      "(NVIDIA's libnccl-dev, or the NCCL tarball into ${CUDAToolkit_LIBRARY_ROOT})")
        string(CONCAT _nccl_why ${_nccl_why})
      endif()
    endif()
  else()
    set(_nccl_ok ON)
  endif()
endif()
cnnb_component(NCCL "${_nccl_ok}" "${_nccl_why}")

if(CNNB_REQUIRE_ALL AND _cnnb_missing)
  string(REPLACE ";" "\n  " _list "${_cnnb_missing}")
  message(FATAL_ERROR "CNNB_REQUIRE_ALL=ON but components are missing:\n  ${_list}")
endif()
