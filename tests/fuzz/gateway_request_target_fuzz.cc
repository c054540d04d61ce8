// Fuzz target for request-target canonicalization (gateway/request_target.h). The input is the
// request-target of a POST with Host "gw" (absolute-form, fragments, ';' parameters, escapes and
// case variants included). Invariants checked on every target accepted:
// - the canonical target is origin-form, printable ASCII, without a fragment, and canonicalizes
//   to itself (what goes upstream would route the same way a second time);
// - its path either is a core route exactly or is no variant of one: folded to lower case, with
//   each segment's ";parameters" and surrounding blanks or %-encoded blanks dropped, it does not
//   become a core route (the checks here are written apart from the code under test).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "cutline/gateway/request_target.h"

using cutline::gateway::canonical_target;
using cutline::gateway::kCoreRoutePaths;

namespace {

bool is_core(std::string_view path) {
  for (std::string_view core : kCoreRoutePaths) {
    if (path == core) return true;
  }
  return false;
}

// The path folded the simple way a lenient router folds it: lower case, ";..." cut from each
// segment, blanks and %20/%09/%0A/%0D around a segment trimmed, empty segments dropped.
std::string folded(std::string_view path) {
  std::string out;
  size_t i = 0;
  while (i < path.size()) {
    size_t end = path.find('/', i);
    if (end == std::string_view::npos) end = path.size();
    std::string_view seg = path.substr(i, end - i);
    seg = seg.substr(0, seg.find(';'));
    for (bool trimmed = true; trimmed;) {
      trimmed = false;
      for (std::string_view blank : {" ", "%20", "%09", "%0A", "%0D"}) {
        if (seg.size() >= blank.size() && seg.substr(0, blank.size()) == blank) {
          seg.remove_prefix(blank.size());
          trimmed = true;
        }
        if (seg.size() >= blank.size() && seg.substr(seg.size() - blank.size()) == blank) {
          seg.remove_suffix(blank.size());
          trimmed = true;
        }
      }
    }
    if (!seg.empty()) {
      out.push_back('/');
      for (char c : seg) out.push_back(c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c);
    }
    i = end + 1;
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  cutline::proto::HttpRequest request;
  request.method = "POST";
  request.target.assign(reinterpret_cast<const char*>(data), size);
  request.headers.add("Host", "gw");
  auto canonical = canonical_target(request);
  if (!canonical.ok()) return 0;
  const std::string& out = *canonical;
  if (out.empty() || out.front() != '/') std::abort();
  if (out.find('#') != std::string::npos) std::abort();
  for (char c : out.substr(0, out.find('?'))) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f) std::abort();
  }
  cutline::proto::HttpRequest again;
  again.method = "POST";
  again.target = out;
  again.headers.add("Host", "gw");
  auto twice = canonical_target(again);
  if (!twice.ok() || *twice != out) std::abort();
  const std::string_view path = std::string_view(out).substr(0, out.find('?'));
  if (!is_core(path) && is_core(folded(path))) std::abort();
  return 0;
}
