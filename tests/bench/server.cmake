# Backend server benchmark (included by tests/bench/CMakeLists.txt): residency_load_bench,
# model load throughput against the file-read bandwidth of the same file in the same run.
# Run with tests/bench/run_residency_load_bench.sh.
add_executable(residency_load_bench ${CMAKE_CURRENT_LIST_DIR}/residency_load_bench.cc)
target_link_libraries(residency_load_bench PRIVATE cutline_backend_server)
