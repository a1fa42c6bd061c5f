# cnnb_add_plugin(<target> SOURCES <files...> [LIBRARIES <libs...>])
#
# Builds a cnnbench plugin the way the ABI wants it: a MODULE library that exports only
# `cnnb_plugin_entry` (hidden visibility plus a version script), refuses to link with an
# unresolved symbol (-Wl,-z,defs), and links the SDK. Used in tree and, after
# find_package(CNNBench), by third parties.
set(_CNNB_PLUGIN_CMAKE_DIR "${CMAKE_CURRENT_LIST_DIR}")

function(cnnb_add_plugin target)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBRARIES" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "cnnb_add_plugin(${target}): SOURCES is required")
  endif()
  add_library(${target} MODULE ${ARG_SOURCES})
  set_target_properties(${target} PROPERTIES
    PREFIX "lib"
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  if(TARGET CNNBench::cnnb)
    target_link_libraries(${target} PRIVATE CNNBench::cnnb ${ARG_LIBRARIES})
  else()
    target_link_libraries(${target} PRIVATE cnnb ${ARG_LIBRARIES})
  endif()
  target_link_options(${target} PRIVATE
    "LINKER:--version-script=${_CNNB_PLUGIN_CMAKE_DIR}/cnnb_plugin.map"
    "LINKER:-z,defs")
  if(DEFINED CNNB_BUILD_PLUGIN_DIR)       # in tree: build next to the host, install with it
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${CNNB_BUILD_PLUGIN_DIR}")
    install(TARGETS ${target} LIBRARY DESTINATION "${CNNB_PLUGIN_INSTALL_DIR}")
  endif()
endfunction()
