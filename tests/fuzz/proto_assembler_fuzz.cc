// Fuzz target for CompletionAssembler + write_completion: each line of the input is one stream
// chunk. Whatever the chunks, assembling never crashes, a refused chunk changes nothing, and the
// answer written from the choices is valid JSON.
#include <simdjson.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "cutline/proto/wire/completion_assembler.h"
#include "cutline/proto/wire/openai_writer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cutline::proto;
  std::string_view input(reinterpret_cast<const char*>(data), size);
  CompletionAssembler assembler;
  while (!input.empty()) {
    const size_t nl = input.find('\n');
    const std::string_view line = input.substr(0, nl);
    input.remove_prefix(nl == std::string_view::npos ? input.size() : nl + 1);
    const size_t before = assembler.choices().size();
    if (!assembler.add(line).ok() && assembler.choices().size() != before) std::abort();
  }
  for (Endpoint endpoint : {Endpoint::kChatCompletions, Endpoint::kCompletions}) {
    CompletionFields f;
    f.endpoint = endpoint;
    f.id = "c";
    f.model = "m";
    f.choices = &assembler.choices();
    std::string out;
    write_completion(out, f);
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    if (parser.parse(out).get(doc) != simdjson::SUCCESS) std::abort();
  }
  return 0;
}
