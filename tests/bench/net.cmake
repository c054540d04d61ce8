# Network benchmark (included by tests/bench/CMakeLists.txt): proto_http_bench, a small main
# measuring RSS per open stream and CPU per relayed chunk of the HTTP/1.1 libevent core.
add_executable(proto_http_bench ${CMAKE_CURRENT_LIST_DIR}/proto_http_bench.cc)
target_link_libraries(proto_http_bench PRIVATE cutline_proto_net cutline_proto_http)
