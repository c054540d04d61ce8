# Gateway benchmark (included by tests/bench/CMakeLists.txt): gateway_load, the client
# of tests/bench/run_gateway_bench.sh (gateway vs direct vs nginx, side by side in one run).
add_executable(gateway_load ${CMAKE_CURRENT_LIST_DIR}/gateway_load.cc)
target_link_libraries(gateway_load PRIVATE PkgConfig::LIBEVENT)
