// Fuzz target for the upstream chunk parser, the non-streaming response and error-body parsers,
// and patch_chunk: none may crash, and a patched chunk must parse with the patched finish_reason
// on every choice and the injected stop record.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <simdjson.h>

#include "cutline/proto/wire/openai_chunk.h"
#include "cutline/proto/wire/openai_error.h"
#include "cutline/proto/wire/openai_response.h"
#include "cutline/proto/wire/openai_writer.h"

using namespace cutline::proto;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view json(reinterpret_cast<const char*>(data), size);
  ChunkParser parser;
  const bool chunk_ok = parser.parse(json).ok();
  if (chunk_ok) {
    // Touch every view: they must point at live memory.
    const ParsedChunk& c = parser.chunk();
    size_t sum = c.id.size() + c.model.size() + c.object.size() + c.finish_reason().size();
    for (const auto& choice : c.choices) sum += choice.content.size() + choice.role.size();
    if (c.error) sum += c.error->message.size() + c.error->code.size();
    if (sum == SIZE_MAX) std::abort();
  }
  (void)parse_completion_response(json);
  (void)parse_error_body(json);

  StopRecord rec;
  rec.cause = Cause::kGatewayDeadline;
  rec.reporter = "gateway";
  ChunkPatch patch;
  patch.cutline = &rec;
  patch.finish_reason = "length";
  std::string out;
  if (patch_chunk(json, patch, out).ok() && chunk_ok) {
    simdjson::dom::parser dom;
    simdjson::dom::element element;
    const bool input_valid =
        dom.parse(simdjson::padded_string(json)).get(element) == simdjson::SUCCESS;
    if (input_valid) {
      if (dom.parse(simdjson::padded_string(out)).get(element) != simdjson::SUCCESS) std::abort();
      ChunkParser check;
      if (!check.parse(out).ok()) std::abort();
      const ParsedChunk& c = check.chunk();
      if (!c.cutline || c.cutline->cause != Cause::kGatewayDeadline) std::abort();
      for (const auto& choice : c.choices) {
        if (choice.finish_reason != "length") std::abort();
      }
    }
  }
  return 0;
}
