#include "cutline/proto/http/server_budget.h"

namespace cutline::proto {

bool ServerBudget::try_open_connection() {
  const size_t now = connections_.fetch_add(1, std::memory_order_relaxed);
  if (max_connections_ != 0 && now >= max_connections_) {
    connections_.fetch_sub(1, std::memory_order_relaxed);
    refused_connections_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  return true;
}

bool ServerBudget::try_reserve(size_t bytes) {
  const size_t before = request_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  if (max_request_bytes_ != 0 && before + bytes > max_request_bytes_) {
    request_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
    refused_requests_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  return true;
}

}  // namespace cutline::proto
