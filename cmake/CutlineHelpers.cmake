# cutline_module(NAME name [DEPS ...]): a library cutline_<name> from src/*.cc (and src/*.c),
# public headers in include/. Globbing lets a new file join its module without editing CMake.
function(cutline_module)
  cmake_parse_arguments(M "" "NAME" "DEPS;PRIVATE_DEPS" ${ARGN})
  file(GLOB _srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/*.cc
       ${CMAKE_CURRENT_SOURCE_DIR}/src/*.c)
  add_library(cutline_${M_NAME} STATIC ${_srcs})
  target_include_directories(cutline_${M_NAME} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include
                                                 PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
  target_link_libraries(cutline_${M_NAME} PUBLIC ${M_DEPS} PRIVATE ${M_PRIVATE_DEPS})
  set_target_properties(cutline_${M_NAME} PROPERTIES POSITION_INDEPENDENT_CODE ON)
endfunction()

# cutline_unit_tests(NAME name DEPS ... [LABELS ...]): one gtest binary per folder from *_test.cc,
# each test registered with ctest (with the given ctest labels; `tsan`: also run under
# ThreadSanitizer by tests/sanitize/run.sh tsan).
function(cutline_unit_tests)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "DEPS;LABELS" ${ARGN})
  file(GLOB _srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*_test.cc)
  if(NOT _srcs)
    return()
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  add_executable(${T_NAME} ${_srcs} ${PROJECT_SOURCE_DIR}/tests/support/test_process.cc)
  target_link_libraries(${T_NAME} PRIVATE ${T_DEPS} cutline_test_support GTest::gtest_main
                                          GTest::gtest)
  include(GoogleTest)
  gtest_discover_tests(${T_NAME} DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT ${T_TIMEOUT})
  cutline_gtest_labels(${T_NAME} ${T_LABELS})
endfunction()

# cutline_gtest_labels(target label...): the ctest labels of every test gtest_discover_tests
# found in `target`. Not through gtest_discover_tests' PROPERTIES: it flattens a list value, so
# LABELS "integration;tsan" would arrive as LABELS integration plus a property named tsan. A
# ctest include file run after the discovered tests' own sets the list on their names instead.
function(cutline_gtest_labels target)
  if(NOT ARGN)
    return()
  endif()
  set(_file ${CMAKE_CURRENT_BINARY_DIR}/${target}_labels.cmake)
  file(WRITE ${_file} "if(${target}_TESTS)\n"
                      "  set_tests_properties(\${${target}_TESTS} PROPERTIES LABELS \"${ARGN}\")\n"
                      "endif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${_file})
endfunction()

# cutline_integration_tests(NAME name SOURCES ... [BINS ...] [LIBS ...] [DEFINITIONS ...]
#                           [TIMEOUT seconds] [LABELS ...]): one gtest binary of tests that start
# the real processes. BINS names the binaries it starts: gateway, backend, fake_upstream (the
# cutline-<name> targets, '_' as '-') and cutline; each is built before the test binary, whose
# code finds it at CUTLINE_<NAME>_BIN (CUTLINE_GATEWAY_BIN, CUTLINE_FAKE_UPSTREAM_BIN, ...;
# CUTLINE_BIN for cutline). LIBS are linked, DEFINITIONS (NAME="value") compiled in, and every
# test is registered with ctest with the TIMEOUT (default 120 s) and the ctest LABELS.
function(cutline_integration_tests)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;BINS;LIBS;DEFINITIONS;LABELS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  add_executable(${T_NAME} ${T_SOURCES} ${PROJECT_SOURCE_DIR}/tests/support/test_process.cc)
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} cutline_test_support GTest::gtest_main
                                          GTest::gtest)
  foreach(_bin IN LISTS T_BINS)
    if(_bin STREQUAL "cutline")
      set(_target cutline)
      set(_define CUTLINE_BIN)
    else()
      string(REPLACE "_" "-" _target cutline-${_bin})
      string(TOUPPER CUTLINE_${_bin}_BIN _define)
    endif()
    target_compile_definitions(${T_NAME} PRIVATE ${_define}="$<TARGET_FILE:${_target}>")
    add_dependencies(${T_NAME} ${_target})
  endforeach()
  if(T_DEFINITIONS)
    target_compile_definitions(${T_NAME} PRIVATE ${T_DEFINITIONS})
  endif()
  include(GoogleTest)
  gtest_discover_tests(${T_NAME} DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT ${T_TIMEOUT})
  cutline_gtest_labels(${T_NAME} ${T_LABELS})
endfunction()

# Adds every immediate subfolder of `dir` that has a CMakeLists.txt.
function(cutline_add_subdirs dir)
  file(GLOB _children LIST_DIRECTORIES true ${dir}/*)
  list(SORT _children)
  foreach(_child ${_children})
    if(IS_DIRECTORY ${_child} AND EXISTS ${_child}/CMakeLists.txt)
      add_subdirectory(${_child})
    endif()
  endforeach()
endfunction()

# cutline_precompile_test_headers(DIR): every GoogleTest binary defined in DIR or below it
# precompiles the headers nearly every test file includes (GoogleTest, simdjson and the heavier
# standard headers) once per binary instead of once per file; that is about a third of the
# tests' compile time, in the main tree and in both sanitizer trees. CUTLINE_PCH=OFF turns it off
# (e.g. to check that each test file includes what it uses).
function(cutline_precompile_test_headers dir)
  if(NOT CUTLINE_PCH)
    return()
  endif()
  get_property(_targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(_t IN LISTS _targets)
    get_target_property(_type ${_t} TYPE)
    get_target_property(_libs ${_t} LINK_LIBRARIES)
    if(_type STREQUAL "EXECUTABLE" AND "GTest::gtest" IN_LIST _libs)
      target_precompile_headers(${_t} PRIVATE <gtest/gtest.h> <simdjson.h> <chrono> <filesystem>
                                <fstream> <functional> <map> <memory> <string> <thread> <vector>)
    endif()
  endforeach()
  get_property(_subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(_d IN LISTS _subdirs)
    cutline_precompile_test_headers(${_d})
  endforeach()
endfunction()
