#include "prompt_set.h"

#include <fstream>

namespace cutline::tools::probe {

std::vector<Prompt> builtin_prompts() {
  std::string long_text =
      "Summarise the following operations log in three sentences, then list every distinct "
      "error you find.\n";
  for (int i = 0; i < 24; ++i) {
    long_text += "line " + std::to_string(i) +
                 ": worker restarted after the health check failed twice; the queue drained "
                 "and requests resumed with normal latency.\n";
  }
  return {
      {"short", "Name three colours."},
      {"medium",
       "Explain in a short paragraph why a wall-clock deadline can make a streamed answer "
       "shorter when many requests share one server."},
      {"long", long_text},
  };
}

Result<std::vector<Prompt>> load_prompts(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error(ErrorKind::kNotFound, "cannot read prompts file " + path);
  std::vector<Prompt> out;
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    out.push_back({"file:" + std::to_string(n), line});
  }
  if (out.empty()) return make_error(ErrorKind::kBadRequest, path + ": no prompts");
  return out;
}

}  // namespace cutline::tools::probe
