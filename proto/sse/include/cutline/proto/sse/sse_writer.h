#pragma once
// SSE writer: appends server-sent-event frames to a caller-owned buffer (the gateway's and the
// backend's streaming responses). Appending into a reused std::string allocates nothing once the
// buffer has grown. A payload that contains line breaks (LF, CR or CRLF) is split into several
// `data:` lines, so any string round-trips through SseParser unchanged (line breaks become '\n').

#include <string>
#include <string_view>

namespace cutline::proto {

// `data: <data>\n\n`
void append_sse_data(std::string& out, std::string_view data);
// `event: <event>\ndata: <data>\n\n`. `event` must not contain line breaks (they are replaced by
// spaces).
void append_sse_event(std::string& out, std::string_view event, std::string_view data);
// `event: error\ndata: <data>\n\n`: how Cutline signals a mid-stream error (data is an OpenAI
// error body, see openai_error.h).
void append_sse_error(std::string& out, std::string_view data);
// `data: [DONE]\n\n`: the OpenAI end-of-stream sentinel.
void append_sse_done(std::string& out);
// `: <text>\n\n`: a comment, used as a keep-alive. Line breaks in `text` become spaces.
void append_sse_comment(std::string& out, std::string_view text);

}  // namespace cutline::proto
