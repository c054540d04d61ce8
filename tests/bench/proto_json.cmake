# Wire-format benchmark (included by tests/bench/CMakeLists.txt): proto_json_bench, Google
# Benchmark timings of the per-token path (SSE parse + chunk parse, chunk write) and the
# per-request path (request parse + rewrite).
if(TARGET benchmark::benchmark)
  add_executable(proto_json_bench ${CMAKE_CURRENT_LIST_DIR}/proto_json_bench.cc)
  target_link_libraries(proto_json_bench PRIVATE cutline_proto_wire cutline_proto_sse
                                                 benchmark::benchmark)
endif()
