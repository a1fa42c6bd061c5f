# cnnb_add_plugin(<target> SOURCES <files...> [LIBRARIES <libs...>])
#
# Builds a cnnbench plugin the way the ABI wants it: a MODULE library named lib<target>.so
# that exports only `cnnb_plugin_entry` (hidden visibility plus a version script), refuses
# to link with an unresolved symbol (-Wl,-z,defs: a missing library is a build error, not
# a load-time surprise), compiles as C11 (the SDK headers need it), and links the SDK.
# Used in tree and, after find_package(CNNBench), by third parties.
if(CMAKE_VERSION VERSION_LESS 3.17)
  message(FATAL_ERROR "cnnb_add_plugin() needs CMake 3.17 or newer (this is ${CMAKE_VERSION})")
endif()

function(cnnb_add_plugin target)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBRARIES" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "cnnb_add_plugin(${target}): SOURCES is required")
  endif()
  # The version script sits beside this file, in the source tree or the installed package.
  set(_map "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/cnnb_plugin.map")
  add_library(${target} MODULE ${ARG_SOURCES})
  set_target_properties(${target} PROPERTIES
    PREFIX "lib"
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    # Libraries found outside the build (CUDA, oneDNN in a custom prefix) stay findable
    # after installing.
    INSTALL_RPATH_USE_LINK_PATH ON
    LINK_DEPENDS "${_map}")
  target_compile_features(${target} PRIVATE c_std_11)
  if(TARGET CNNBench::cnnb)
    target_link_libraries(${target} PRIVATE CNNBench::cnnb ${ARG_LIBRARIES})
  else()
    target_link_libraries(${target} PRIVATE cnnb ${ARG_LIBRARIES})
  endif()
  target_link_options(${target} PRIVATE "LINKER:--version-script=${_map}")
  # Clang's sanitizers leave their runtime's symbols for the executable to provide, which
  # -z,defs refuses; the plain builds (and gcc's sanitizer builds) still check.
  if(NOT (CNNB_SANITIZE AND CMAKE_C_COMPILER_ID MATCHES "Clang"))
    target_link_options(${target} PRIVATE "LINKER:-z,defs")
  endif()
  if(DEFINED CNNB_BUILD_PLUGIN_DIR)       # in tree: build next to the host, install with it
    # From <libdir>/cnnbench/plugins back to <libdir>, where libcnnb is installed.
    file(RELATIVE_PATH _to_libdir "/${CNNB_PLUGIN_INSTALL_DIR}" "/${CMAKE_INSTALL_LIBDIR}")
    set_target_properties(${target} PROPERTIES
      LIBRARY_OUTPUT_DIRECTORY "${CNNB_BUILD_PLUGIN_DIR}"
      INSTALL_RPATH "$ORIGIN/${_to_libdir}")
    install(TARGETS ${target} LIBRARY DESTINATION "${CNNB_PLUGIN_INSTALL_DIR}")
  endif()
endfunction()
