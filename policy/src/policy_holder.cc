// PolicyHolder: the policy in force, swapped on a successful reload (policy_holder.h).
#include "cutline/policy/policy_holder.h"

namespace cutline::policy {

PolicyHolder::PolicyHolder(std::shared_ptr<const Policy> initial) : current_(std::move(initial)) {}

std::shared_ptr<const Policy> PolicyHolder::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return current_;
}

uint64_t PolicyHolder::generation() const {
  std::lock_guard<std::mutex> lock(mu_);
  return generation_;
}

LoadResult PolicyHolder::reload(const std::string& path, const LoadOptions& options) {
  // Load and validate outside the lock: readers never wait for file I/O.
  LoadResult result = load_policy_file(path, options);
  if (result.ok()) replace(result.policy);
  return result;
}

void PolicyHolder::replace(std::shared_ptr<const Policy> policy) {
  std::shared_ptr<const Policy> old;
  {
    std::lock_guard<std::mutex> lock(mu_);
    old = std::move(current_);
    current_ = std::move(policy);
    ++generation_;
  }
  // `old` is released here, outside the lock (its last holder may be a finishing stream).
}

}  // namespace cutline::policy
