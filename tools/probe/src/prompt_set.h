#pragma once
// PromptSet: the fixed prompts a probe replays. The built-in set has one short, one medium and
// one long prompt (the long one makes prefill visible in TTFT); --prompts FILE reads one prompt
// per non-empty line ('#' lines are comments).

#include <string>
#include <vector>

#include "cutline/base/result.h"

namespace cutline::tools::probe {

struct Prompt {
  std::string name;  // "short" | "medium" | "long" | "file:<line>"
  std::string text;
};

std::vector<Prompt> builtin_prompts();
Result<std::vector<Prompt>> load_prompts(const std::string& path);

}  // namespace cutline::tools::probe
