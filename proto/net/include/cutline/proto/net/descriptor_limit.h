#pragma once
// The process's open-descriptor limit. A proxy holds two descriptors per stream (client and
// upstream) and Debian starts services with a soft limit of 1024, so a server raises its soft
// limit to the hard limit at start-up (the kernel lets any process do that) and says so in its
// log. Past the limit, accept() fails with EMFILE and the listeners back off (listener.h).

#include <cstdint>
#include <string>

namespace cutline::proto {

struct DescriptorLimit {
  uint64_t before = 0;  // the soft limit found (RLIM_INFINITY as UINT64_MAX)
  uint64_t after = 0;   // the soft limit now
  std::string error;    // why it could not be raised ("" when it was, or did not need to be)
};

// Sets RLIMIT_NOFILE's soft limit to its hard limit. Call once, before threads start.
DescriptorLimit raise_descriptor_limit();

// raise_descriptor_limit(), then one line on stderr, e.g.
// "cutline-gateway: open files limit 1024 -> 1048576".
DescriptorLimit raise_descriptor_limit_and_log(const char* program);

}  // namespace cutline::proto
