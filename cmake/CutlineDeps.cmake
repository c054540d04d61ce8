# Dependencies: Debian 12 packages only (deploy/setup.sh installs them).
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
find_package(OpenSSL REQUIRED)
find_package(yaml-cpp REQUIRED)          # target: yaml-cpp
find_package(simdjson REQUIRED)          # target: simdjson::simdjson
find_package(prometheus-cpp REQUIRED)    # target: prometheus-cpp::core (no version: Debian's config)
pkg_check_modules(LIBEVENT REQUIRED IMPORTED_TARGET libevent libevent_pthreads libevent_openssl)
pkg_check_modules(NGHTTP2 REQUIRED IMPORTED_TARGET libnghttp2)
pkg_check_modules(HIREDIS REQUIRED IMPORTED_TARGET hiredis)

# llhttp: Debian's node-llhttp ships the generated C sources under /usr/share/llhttp.
set(CUTLINE_LLHTTP_DIR "/usr/share/llhttp" CACHE PATH "llhttp C sources (node-llhttp)")
find_path(LLHTTP_INCLUDE_DIR llhttp.h PATHS /usr/share/include/llhttp ${CUTLINE_LLHTTP_DIR}/include
          ${CUTLINE_LLHTTP_DIR} NO_DEFAULT_PATH)
file(GLOB LLHTTP_SOURCES ${CUTLINE_LLHTTP_DIR}/src/*.c ${CUTLINE_LLHTTP_DIR}/*.c)
if(NOT LLHTTP_INCLUDE_DIR OR NOT LLHTTP_SOURCES)
  message(FATAL_ERROR "llhttp sources not found under ${CUTLINE_LLHTTP_DIR}: apt-get install node-llhttp")
endif()
add_library(cutline_llhttp STATIC ${LLHTTP_SOURCES})
target_include_directories(cutline_llhttp SYSTEM PUBLIC ${LLHTTP_INCLUDE_DIR})
set_target_properties(cutline_llhttp PROPERTIES POSITION_INDEPENDENT_CODE ON C_STANDARD 11)
target_compile_options(cutline_llhttp PRIVATE -w)

if(CUTLINE_BUILD_TESTS)
  find_package(GTest REQUIRED)           # GTest::gtest_main
endif()
if(CUTLINE_BUILD_BENCH)
  find_package(benchmark QUIET)
endif()
