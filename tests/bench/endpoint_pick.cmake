# endpoint_pick_bench: Google Benchmark of EndpointPool::pick() (the per-request cost of
# choosing an endpoint) with 1 and 16 endpoints, for each balance and with residency and prefix
# affinity on. Run: build/tests/bench/endpoint_pick_bench
if(TARGET benchmark::benchmark)
  add_executable(endpoint_pick_bench ${CMAKE_CURRENT_LIST_DIR}/endpoint_pick_bench.cc)
  target_link_libraries(endpoint_pick_bench PRIVATE cutline_gateway benchmark::benchmark)
endif()
