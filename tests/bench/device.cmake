# Device benchmarks (included by tests/bench/CMakeLists.txt): decode_bench, a small main
# run by tests/bench/run_decode_bench.sh (CPU decode vs memory-bandwidth roofline, batch scaling,
# prefill throughput on a synthesized >= 1 GiB model).
add_executable(decode_bench ${CMAKE_CURRENT_LIST_DIR}/decode_bench.cc)
target_link_libraries(decode_bench PRIVATE cutline_backend_model cutline_backend_device)
# matmul_bench: the CPU matmul alone per type and batch size, in the calling thread's CPU time.
add_executable(matmul_bench ${CMAKE_CURRENT_LIST_DIR}/matmul_bench.cc)
target_link_libraries(matmul_bench PRIVATE cutline_backend_device)
