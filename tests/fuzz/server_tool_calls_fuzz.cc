// Fuzz target for the tool-calling parsers: the model-output reader (ToolCallParser) and the
// request's tool fields (parse_tool_request, template_tojson). Any bytes: the output reader loses
// no text (a call's block or the content carries every non-space byte it was given, fed whole or
// cut at any point), every call it returns has a name and arguments that are a JSON object; the
// request reader either refuses with a 400 or returns tools printed as JSON.
#include <simdjson.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "cutline/server/template_json.h"
#include "cutline/server/tool_call_parser.h"
#include "cutline/server/tool_request.h"

using namespace cutline;

namespace {

struct Read {
  std::string content;
  std::vector<server::ParsedToolCall> calls;
};

Read read(std::string_view text, size_t cut) {
  server::ToolCallParser p("", true, [] { return std::string("call_x"); });
  Read out;
  p.push(text.substr(0, cut), out.content, out.calls);
  p.push(text.substr(cut), out.content, out.calls);
  p.finish(out.content);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const Read whole = read(text, text.size());
  const Read split = read(text, size == 0 ? 0 : data[0] % (size + 1));
  if (whole.content != split.content || whole.calls.size() != split.calls.size()) std::abort();
  for (const auto& call : whole.calls) {
    simdjson::dom::parser parser;
    simdjson::padded_string args(call.arguments);
    simdjson::dom::object object;
    if (call.name.empty() || parser.parse(args).get_object().get(object) != simdjson::SUCCESS)
      std::abort();
  }
  if (whole.calls.empty() && whole.content.size() > text.size()) std::abort();

  std::string param;
  auto tools = server::parse_tool_request(text, 2, param);
  if (!tools.ok() && tools.error().status() != 400) std::abort();
  if (tools.ok() && tools->tools.size() != tools->names.size()) std::abort();
  auto json = server::template_tojson(text);
  if (json.ok() && json->empty()) std::abort();
  return 0;
}
