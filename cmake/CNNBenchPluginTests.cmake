# Tests that live beside their plugin (plugins/<kind>/<name>/tests/), registered from the
# plugin's own CMakeLists.txt. The test support library, the CLI tests' environment and
# enable_testing() belong to tests/, which is configured after the plugins, so a plugin
# folder only records its tests here; tests/CMakeLists.txt builds and registers them all
# (cnnb_build_plugin_tests) once the support library exists. Project-internal: plugins
# built out of tree against the installed SDK bring their own tests.
#
# cnnb_plugin_test(<name> SOURCES <files...> [LIBRARIES <libs...>] [INCLUDES <dirs...>]
#                  [OPTIONS <compile options...>] [DEPENDS <targets...>] [LABELS <labels...>]
#                  [SKIP_RETURN_CODE <code>])
#   builds test_<name> from SOURCES (paths relative to the calling folder: the test file
#   and any plugin sources it compiles in), linked with the test support library and
#   LIBRARIES, with the calling folder and INCLUDES on its include path; registers it as
#   ctest unit_<name>. DEPENDS: targets built before it, when they exist (the plugin it
#   loads). SKIP_RETURN_CODE: the status that means "skipped, saying why".
# cnnb_plugin_test_directory(<dir>): a folder of tests with its own CMakeLists.txt, added
#   from tests/ (its binary folder under tests/).
function(cnnb_plugin_test name)
  cmake_parse_arguments(ARG "" "SKIP_RETURN_CODE"
                        "SOURCES;LIBRARIES;INCLUDES;OPTIONS;DEPENDS;LABELS" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "cnnb_plugin_test(${name}): no SOURCES")
  endif()
  set(sources "")
  foreach(src ${ARG_SOURCES})
    get_filename_component(abs "${src}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    list(APPEND sources "${abs}")
  endforeach()
  set(includes "${CMAKE_CURRENT_SOURCE_DIR}")
  foreach(dir ${ARG_INCLUDES})
    get_filename_component(abs "${dir}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    list(APPEND includes "${abs}")
  endforeach()
  set_property(GLOBAL APPEND PROPERTY CNNB_PLUGIN_TESTS "${name}")
  set_property(GLOBAL PROPERTY CNNB_PLUGIN_TEST_${name}_SOURCES "${sources}")
  set_property(GLOBAL PROPERTY CNNB_PLUGIN_TEST_${name}_INCLUDES "${includes}")
  foreach(key LIBRARIES OPTIONS DEPENDS LABELS SKIP_RETURN_CODE)
    set_property(GLOBAL PROPERTY CNNB_PLUGIN_TEST_${name}_${key} "${ARG_${key}}")
  endforeach()
endfunction()

function(cnnb_plugin_test_directory dir)
  get_filename_component(abs "${dir}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  set_property(GLOBAL APPEND PROPERTY CNNB_PLUGIN_TEST_DIRECTORIES "${abs}")
endfunction()

# Called by tests/CMakeLists.txt: every recorded test built against `support` (the test
# support library) and registered with `env` (the tests' environment), `timeout` seconds.
function(cnnb_build_plugin_tests support env timeout)
  get_property(names GLOBAL PROPERTY CNNB_PLUGIN_TESTS)
  foreach(name ${names})
    foreach(key SOURCES INCLUDES LIBRARIES OPTIONS DEPENDS LABELS SKIP_RETURN_CODE)
      get_property(${key} GLOBAL PROPERTY CNNB_PLUGIN_TEST_${name}_${key})
    endforeach()
    add_executable(test_${name} ${SOURCES})
    target_link_libraries(test_${name} PRIVATE ${support} ${LIBRARIES})
    target_include_directories(test_${name} PRIVATE ${INCLUDES})
    target_compile_options(test_${name} PRIVATE ${OPTIONS})
    set_target_properties(test_${name} PROPERTIES ENABLE_EXPORTS ON)
    foreach(dep ${DEPENDS})
      if(TARGET ${dep})
        add_dependencies(test_${name} ${dep})
      endif()
    endforeach()
    add_test(NAME unit_${name} COMMAND test_${name})
    set_tests_properties(unit_${name} PROPERTIES ENVIRONMENT "${env}" TIMEOUT ${timeout})
    if(LABELS)
      set_tests_properties(unit_${name} PROPERTIES LABELS "${LABELS}")
    endif()
    if(NOT SKIP_RETURN_CODE STREQUAL "")
      set_tests_properties(unit_${name} PROPERTIES SKIP_RETURN_CODE ${SKIP_RETURN_CODE})
    endif()
  endforeach()
  get_property(dirs GLOBAL PROPERTY CNNB_PLUGIN_TEST_DIRECTORIES)
  foreach(dir ${dirs})
    file(RELATIVE_PATH rel "${PROJECT_SOURCE_DIR}" "${dir}")
    string(REPLACE "/" "_" bin "${rel}")
    add_subdirectory("${dir}" "${CMAKE_CURRENT_BINARY_DIR}/${bin}")
  endforeach()
endfunction()
