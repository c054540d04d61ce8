// cutline-fake-upstream: the X-Fake-Script text (or a "fake-..." model name) -> Script.
#include <cstdlib>
#include <string>

#include "fake_upstream.h"

namespace cutline::fake_upstream {

Script parse_script(const std::string& text) {
  Script s;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(pos, end - pos);
    pos = end + 1;
    size_t eq = item.find('=');
    if (eq == std::string::npos) continue;
    std::string k = item.substr(0, eq), v = item.substr(eq + 1);
    int n = std::atoi(v.c_str());
    if (k == "tokens")
      s.tokens = n;
    else if (k == "interval_ms")
      s.interval_ms = n;
    else if (k == "ttft_ms")
      s.ttft_ms = n;
    else if (k == "stall_at")
      s.stall_at = n;
    else if (k == "stall_ms")
      s.stall_ms = n;
    else if (k == "finish") {
      s.finish = v;
      s.finish_set = true;
    } else if (k == "code")
      s.code = v;
    else if (k == "type")
      s.type = v;
    else if (k == "tools")
      s.tools = n;
    else if (k == "event")
      s.event = v;
    else if (k == "require_key")
      s.require_key = v;
    else if (k == "shape")
      s.shape = v;
    else if (k == "stop_reason")
      s.stop_reason = v;
    else if (k == "usage")
      s.usage = n;
    else if (k == "status")
      s.status = n;
    else if (k == "error_at")
      s.error_at = n;
    else if (k == "drop_at")
      s.drop_at = n;
    else if (k == "cutline")
      s.cutline = v;
    else if (k == "stamp")
      s.stamp = n != 0;
    else if (k == "hang")
      s.hang = n != 0;
  }
  return s;
}

}  // namespace cutline::fake_upstream
