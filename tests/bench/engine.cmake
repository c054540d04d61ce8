# Engine benchmark (included by tests/bench/CMakeLists.txt): engine_bench, a small main
# run by tests/bench/run_engine_bench.sh — stall-free chunked prefill (inter-token latency of 4
# decoding streams while a 2,048-token prompt is prefilled, chunked vs one-step) and aggregate
# throughput at concurrency 1, 2, 4, 8, 16 on synthesized models through the real LlamaRunner.
add_executable(engine_bench ${CMAKE_CURRENT_LIST_DIR}/engine_bench.cc)
target_link_libraries(engine_bench PRIVATE cutline_backend_engine cutline_backend_model
                                           cutline_backend_device)
