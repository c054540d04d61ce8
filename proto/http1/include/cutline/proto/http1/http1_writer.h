#pragma once
// HTTP/1.1 serialization: request and response heads, chunked framing (chunks, the last chunk
// with trailers), and the small OpenAI-style error the codec answers with on a protocol error or
// a limit (400/413/431). Appends to a caller-owned std::string so buffers can be reused; the
// server and client copy the result into their bufferevent's output.
//
// Framing headers are written by these functions, not taken from the caller: pass the body mode
// and the writer adds Content-Length or Transfer-Encoding (any such header in `headers` is
// skipped, as are Connection headers: keep-alive is a parameter). Announce trailers with a
// `Trailer: name` header in `headers` (it is passed through).

#include <cstdint>
#include <string>
#include <string_view>

#include "cutline/base/result.h"
#include "cutline/proto/http1/http_message.h"

namespace cutline::proto {

// How a message body is delimited on the wire.
enum class BodyMode {
  kNone,           // no body (e.g. 204, 304, a GET request); Content-Length: 0 for responses
                   // other than 1xx/204/304
  kContentLength,  // exactly `content_length` bytes follow
  kChunked,        // Transfer-Encoding: chunked, ends with the last chunk and optional trailers
  kUntilClose,     // responses only: the body ends when the connection closes (implies close)
};

struct BodyFraming {
  BodyMode mode = BodyMode::kNone;
  uint64_t content_length = 0;  // kContentLength only

  static BodyFraming none() { return {BodyMode::kNone, 0}; }
  static BodyFraming length(uint64_t n) { return {BodyMode::kContentLength, n}; }
  static BodyFraming chunked() { return {BodyMode::kChunked, 0}; }
  static BodyFraming until_close() { return {BodyMode::kUntilClose, 0}; }
};

// "METHOD target HTTP/1.1\r\n" + headers + framing + "\r\n". `keep_alive` false adds
// "Connection: close".
void write_request_head(std::string& out, std::string_view method, std::string_view target,
                        const HttpHeaders& headers, BodyFraming framing, bool keep_alive = true);

// "HTTP/1.1 status reason\r\n" + headers + framing + "\r\n". `keep_alive` false (or kUntilClose)
// adds "Connection: close".
void write_response_head(std::string& out, int status, const HttpHeaders& headers,
                         BodyFraming framing, bool keep_alive = true);

// One chunk: hex size CRLF data CRLF. Empty `data` writes nothing (an empty chunk would end the
// body).
void write_chunk(std::string& out, std::string_view data);
// The chunk-size line for `size` bytes ("1a\r\n") into `buf`; returns its length. For writers
// that put the data itself into an evbuffer without copying.
size_t format_chunk_size_line(char (&buf)[24], size_t size);
// The last chunk "0\r\n", the trailer fields, then the final CRLF.
void write_last_chunk(std::string& out, const HttpHeaders& trailers);

// {"error":{"message":...,"type":"invalid_request_error","code":<to_string(error.kind)>}} for
// downstream errors; "type" is "server_error" for upstream/internal kinds.
std::string protocol_error_json(const Error& error);
// A complete response for `error`: status from error.status(), the JSON above with
// Content-Type: application/json, Content-Length, and "Connection: close".
void write_error_response(std::string& out, const Error& error);

}  // namespace cutline::proto
