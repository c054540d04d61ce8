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
  add_executable(${T_NAME} ${_srcs})
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
  add_executable(${T_NAME} ${T_SOURCES})
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

# cutline_precompile_test_headers(DIR): the GoogleTest binaries defined in DIR or below it share
# precompiled headers (GoogleTest, simdjson and the heavier standard headers): a PCH costs 10-15 s
# of CPU, once per build tree instead of once per binary. A PCH is only used by a compile with the
# flags it was built with (GCC silently ignores another one and re-parses the headers; clang
# fails), so the binaries are grouped by what can change those flags: their own compile options
# and the compile definitions, options and features of the libraries they link (simdjson's
# SIMDJSON_THREADS_ENABLED, hiredis' _FILE_OFFSET_BITS=64). Each group builds its PCH in a small
# program cutline_test_pch_<n> that links the same libraries, and its binaries reuse that PCH.
# A binary's own definitions (CUTLINE_SOURCE_DIR, CUTLINE_GATEWAY_BIN, ...) appear in none of
# the headers, so they may differ; with GCC a PCH it rejects anyway is an error
# (-Werror=invalid-pch), not a silently slower build. CUTLINE_PCH=OFF turns it all off (e.g. to
# check that each test file includes what it uses).
function(cutline_precompile_test_headers dir)
  if(NOT CUTLINE_PCH)
    return()
  endif()
  _cutline_gtest_binaries(${dir} _binaries)
  set(_keys "")
  foreach(_t IN LISTS _binaries)
    get_target_property(_options ${_t} COMPILE_OPTIONS)
    if(NOT _options)
      set(_options "")
    endif()
    set(_carriers "")
    set(_seen "")
    _cutline_flag_carriers(${_t} _carriers _seen)
    list(SORT _carriers)
    string(SHA1 _key "${_options}|${_carriers}")
    list(FIND _keys ${_key} _n)
    if(_n EQUAL -1)
      list(LENGTH _keys _n)
      list(APPEND _keys ${_key})
      set(_host cutline_test_pch_${_n})
      set(_src ${CMAKE_CURRENT_BINARY_DIR}/${_host}.cc)
      file(CONFIGURE OUTPUT ${_src}
           CONTENT "// Builds the precompiled headers test binaries reuse.\nint main() { return 0; }\n")
      add_executable(${_host} EXCLUDE_FROM_ALL ${_src})
      set_target_properties(${_host} PROPERTIES COMPILE_OPTIONS "${_options}")
      target_link_libraries(${_host} PRIVATE ${_carriers})
      target_precompile_headers(${_host} PRIVATE <gtest/gtest.h> <simdjson.h> <chrono> <filesystem>
                                <fstream> <functional> <map> <memory> <string> <thread> <vector>)
    endif()
    target_precompile_headers(${_t} REUSE_FROM cutline_test_pch_${_n})
    target_compile_options(${_t} PRIVATE $<$<CXX_COMPILER_ID:GNU>:-Werror=invalid-pch>)
  endforeach()
endfunction()

# _cutline_gtest_binaries(DIR OUT): the executables defined in DIR or below it that link
# GTest::gtest.
function(_cutline_gtest_binaries dir out)
  set(_found "")
  get_property(_targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(_t IN LISTS _targets)
    get_target_property(_type ${_t} TYPE)
    get_target_property(_libs ${_t} LINK_LIBRARIES)
    if(_type STREQUAL "EXECUTABLE" AND "GTest::gtest" IN_LIST _libs)
      list(APPEND _found ${_t})
    endif()
  endforeach()
  get_property(_subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(_d IN LISTS _subdirs)
    _cutline_gtest_binaries(${_d} _below)
    list(APPEND _found ${_below})
  endforeach()
  set(${out} ${_found} PARENT_SCOPE)
endfunction()

# _cutline_flag_carriers(TARGET CARRIERS SEEN): appends to the list CARRIERS every library TARGET
# links, directly or through other libraries' interfaces, that gives its users compile
# definitions, options or features. SEEN: the targets already visited. A private dependency of a
# static library ($<LINK_ONLY:...>) gives its users no compile flags; any other generator
# expression is kept as it is, so binaries that link it do not share a PCH with those that don't.
function(_cutline_flag_carriers target carriers seen)
  get_target_property(_imported ${target} IMPORTED)
  get_target_property(_type ${target} TYPE)
  if(_imported OR _type STREQUAL "INTERFACE_LIBRARY")
    get_target_property(_libs ${target} INTERFACE_LINK_LIBRARIES)
  elseif(_type STREQUAL "EXECUTABLE")
    get_target_property(_libs ${target} LINK_LIBRARIES)
  else()
    get_target_property(_libs ${target} INTERFACE_LINK_LIBRARIES)
  endif()
  if(NOT _libs)
    return()
  endif()
  foreach(_lib IN LISTS _libs)
    if(_lib MATCHES "^::@" OR _lib MATCHES "^\\$<LINK_ONLY:")
      continue()
    endif()
    if(_lib MATCHES "\\$<")
      list(APPEND ${carriers} "${_lib}")
      continue()
    endif()
    if(NOT TARGET ${_lib} OR _lib IN_LIST ${seen})
      continue()
    endif()
    list(APPEND ${seen} ${_lib})
    get_target_property(_real ${_lib} ALIASED_TARGET)
    if(NOT _real)
      set(_real ${_lib})
    endif()
    foreach(_property INTERFACE_COMPILE_DEFINITIONS INTERFACE_COMPILE_OPTIONS
                      INTERFACE_COMPILE_FEATURES)
      get_target_property(_value ${_real} ${_property})
      if(_value)
        list(APPEND ${carriers} ${_lib})
        break()
      endif()
    endforeach()
    _cutline_flag_carriers(${_real} ${carriers} ${seen})
  endforeach()
  list(REMOVE_DUPLICATES ${carriers})
  set(${carriers} ${${carriers}} PARENT_SCOPE)
  set(${seen} ${${seen}} PARENT_SCOPE)
endfunction()
