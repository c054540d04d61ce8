#pragma once
// Private to proto/: the top-level fields an upstream's completion body and its stream chunks
// share — "usage", "cutline" (the stop record), "error" (an object or a bare string) and vLLM's
// top-level error form ({"object":"error","message":...}). ChunkParser and
// parse_completion_response read their own fields (choices, id, model, ...) and hand every other
// key to a SharedFieldReader, so both parse the shared ones alike and word their errors alike.

#include <optional>
#include <string_view>

#include <simdjson.h>

#include "cutline/base/result.h"
#include "cutline/proto/wire/openai_chunk.h"
#include "cutline/proto/wire/stop_record.h"
#include "json_scan.h"

namespace cutline::proto {

class SharedFieldReader {
 public:
  // `context` begins every error message ("upstream chunk: "); usage and cutline are written in
  // place. The referenced objects must outlive this reader.
  SharedFieldReader(std::string_view context, std::optional<Usage>& usage,
                    std::optional<StopRecord>& cutline)
      : context_(context), usage_(usage), cutline_(cutline) {}

  // Reads `value` when `key` is a shared field: returns true with `status` set (an error names
  // the field and what it must be). Returns false, leaving the value unread, for any other key.
  bool read(std::string_view key, simdjson::ondemand::value& value, Status& status);

  // The error the body reports: its "error" field, else the top-level error fields when the
  // body's "object" is "error"; nullopt when neither. Views into the parser's buffers.
  std::optional<json_scan::ErrorFields> error(std::string_view object) const;

  // "<context><field> <what>", as ErrorKind::kUpstream.
  Error field_error(std::string_view field, std::string_view what) const;

 private:
  std::string_view context_;
  std::optional<Usage>& usage_;
  std::optional<StopRecord>& cutline_;
  std::optional<json_scan::ErrorFields> error_;  // the "error" field
  json_scan::ErrorFields top_error_;             // vLLM's top-level message/type/param/code
};

}  // namespace cutline::proto
