# Helpers for the strategy plugins that compile the shared code in this folder.
#
# cnnb_strategy_mpi_world(<target> [WITHOUT_MPI]): the MPI layer (mpi_world.c), the
# watchdog that bounds its waits MPI gives no timeout (mpi_watchdog.c) and the 16-bit
# conversions it uses. With MPI found it defines CNNB_HAVE_MPI=1 and links libmpi;
# without (or WITHOUT_MPI, which the tests use to build that variant too)
# CNNB_HAVE_MPI=0 gives a world of one that refuses mpirun with a message.
#
# cnnb_strategy_compact16(<target>): the 16-bit conversions alone (compact16.c). Their
# loops vectorise at -O3 (gcc's -O2 leaves them scalar: bf16 packing of 100 MiB took
# 34 ms instead of 20), and gcc's fp16 ones only without trapping math (their float
# products are computed for every value, then selected).
function(cnnb_strategy_compact16 target)
  set(_src "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/compact16.c")
  target_sources(${target} PRIVATE "${_src}")
  target_include_directories(${target} PRIVATE "${CMAKE_CURRENT_FUNCTION_LIST_DIR}")
  set_source_files_properties("${_src}" TARGET_DIRECTORY ${target}
                              PROPERTIES COMPILE_OPTIONS "-O3;-fno-trapping-math")
endfunction()

function(cnnb_strategy_mpi_world target)
  cmake_parse_arguments(ARG "WITHOUT_MPI" "" "" ${ARGN})
  target_sources(${target} PRIVATE "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/mpi_world.c"
                                   "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/mpi_watchdog.c")
  find_package(Threads REQUIRED)
  target_link_libraries(${target} PRIVATE Threads::Threads)
  cnnb_strategy_compact16(${target})
  if(CNNB_HAVE_MPI AND NOT ARG_WITHOUT_MPI)
    target_compile_definitions(${target} PRIVATE CNNB_HAVE_MPI=1)
    target_link_libraries(${target} PRIVATE MPI::MPI_C ${CMAKE_DL_LIBS})
  else()
    target_compile_definitions(${target} PRIVATE CNNB_HAVE_MPI=0)
  endif()
endfunction()
