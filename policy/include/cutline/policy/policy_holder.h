#pragma once
// PolicyHolder: the policy in force, swapped atomically on reload. The gateway takes one
// snapshot per request at `decide` and keeps it for the stream's life, so a reload applies to
// new requests only. reload() validates the new file first and keeps the old policy when it has
// errors (the gateway logs LoadResult::error_text() and counts
// cutline_policy_reload_total{result="error"}). File watching and SIGHUP live in the gateway.
//
// Thread-safety: snapshot() may be called from any thread concurrently with reload(); the swap
// is under a mutex held only to copy or replace the shared_ptr.

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "cutline/policy/loader.h"
#include "cutline/policy/policy.h"

namespace cutline::policy {

class PolicyHolder {
 public:
  explicit PolicyHolder(std::shared_ptr<const Policy> initial);

  std::shared_ptr<const Policy> snapshot() const;
  // Starts at 1, +1 per successful reload or replace().
  uint64_t generation() const;

  // Loads `path`; on success swaps it in. On error the old policy stays. The result's policy is
  // the newly loaded one on success (null on error).
  LoadResult reload(const std::string& path, const LoadOptions& options = {});

  void replace(std::shared_ptr<const Policy> policy);

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const Policy> current_;
  uint64_t generation_ = 1;
};

}  // namespace cutline::policy
