#include "cutline/proto/net/descriptor_limit.h"

#include <sys/resource.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace cutline::proto {

namespace {

uint64_t as_u64(rlim_t v) { return v == RLIM_INFINITY ? UINT64_MAX : static_cast<uint64_t>(v); }

std::string limit_text(uint64_t v) { return v == UINT64_MAX ? "unlimited" : std::to_string(v); }

}  // namespace

DescriptorLimit raise_descriptor_limit() {
  DescriptorLimit out;
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) {
    out.error = std::string("getrlimit: ") + std::strerror(errno);
    return out;
  }
  out.before = as_u64(lim.rlim_cur);
  out.after = out.before;
  if (lim.rlim_cur == lim.rlim_max) return out;
  rlimit raised = lim;
  raised.rlim_cur = lim.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &raised) != 0) {
    out.error = std::string("setrlimit: ") + std::strerror(errno);
    return out;
  }
  out.after = as_u64(raised.rlim_cur);
  return out;
}

DescriptorLimit raise_descriptor_limit_and_log(const char* program) {
  DescriptorLimit d = raise_descriptor_limit();
  if (!d.error.empty()) {
    std::fprintf(stderr, "%s: open files limit stays %s (%s)\n", program,
                 limit_text(d.before).c_str(), d.error.c_str());
  } else {
    std::fprintf(stderr, "%s: open files limit %s -> %s\n", program, limit_text(d.before).c_str(),
                 limit_text(d.after).c_str());
  }
  return d;
}

}  // namespace cutline::proto
