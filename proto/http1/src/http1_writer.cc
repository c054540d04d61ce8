#include "cutline/proto/http1/http1_writer.h"

#include <charconv>

#include "cutline/base/json_writer.h"

namespace cutline::proto {

namespace {

bool is_framing_header(std::string_view name) {
  return iequals(name, "content-length") || iequals(name, "transfer-encoding") ||
         iequals(name, "connection");
}

void append_number(std::string& out, uint64_t n) {
  char buf[24];
  const auto res = std::to_chars(buf, buf + sizeof(buf), n);
  out.append(buf, static_cast<size_t>(res.ptr - buf));
}

void write_headers_and_framing(std::string& out, const HttpHeaders& headers, BodyFraming framing,
                               bool keep_alive, bool is_request, int status) {
  for (const auto& h : headers) {
    if (is_framing_header(h.name)) continue;
    out.append(h.name).append(": ").append(h.value).append("\r\n");
  }
  switch (framing.mode) {
    case BodyMode::kNone:
      // A response without a body still says so, unless its status forbids a body.
      if (!is_request && status >= 200 && status != 204 && status != 304) {
        out.append("Content-Length: 0\r\n");
      }
      break;
    case BodyMode::kContentLength:
      out.append("Content-Length: ");
      append_number(out, framing.content_length);
      out.append("\r\n");
      break;
    case BodyMode::kChunked:
      out.append("Transfer-Encoding: chunked\r\n");
      break;
    case BodyMode::kUntilClose:
      keep_alive = false;
      break;
  }
  if (!keep_alive) out.append("Connection: close\r\n");
  out.append("\r\n");
}

// Room for the whole head at once: `first_line` bytes, the header lines, and framing,
// Connection and the blank line (~64 bytes at most).
void reserve_head(std::string& out, size_t first_line, const HttpHeaders& headers) {
  size_t bytes = out.size() + first_line + 64;
  for (const auto& h : headers) bytes += h.name.size() + h.value.size() + 4;
  out.reserve(bytes);
}

}  // namespace

void write_request_head(std::string& out, std::string_view method, std::string_view target,
                        const HttpHeaders& headers, BodyFraming framing, bool keep_alive) {
  reserve_head(out, method.size() + target.size() + 11, headers);
  out.append(method).append(" ").append(target).append(" HTTP/1.1\r\n");
  write_headers_and_framing(out, headers, framing, keep_alive, /*is_request=*/true, 0);
}

void write_response_head(std::string& out, int status, const HttpHeaders& headers,
                         BodyFraming framing, bool keep_alive) {
  reserve_head(out, 48, headers);
  out.append("HTTP/1.1 ");
  append_number(out, static_cast<uint64_t>(status));
  out.append(" ").append(reason_phrase(status)).append("\r\n");
  write_headers_and_framing(out, headers, framing, keep_alive, /*is_request=*/false, status);
}

size_t format_chunk_size_line(char (&buf)[24], size_t size) {
  const auto res = std::to_chars(buf, buf + 20, size, 16);
  char* p = res.ptr;
  *p++ = '\r';
  *p++ = '\n';
  return static_cast<size_t>(p - buf);
}

void write_chunk(std::string& out, std::string_view data) {
  if (data.empty()) return;
  char buf[24];
  out.append(buf, format_chunk_size_line(buf, data.size()));
  out.append(data).append("\r\n");
}

void write_last_chunk(std::string& out, const HttpHeaders& trailers) {
  out.append("0\r\n");
  for (const auto& h : trailers) out.append(h.name).append(": ").append(h.value).append("\r\n");
  out.append("\r\n");
}

std::string protocol_error_json(const Error& error) {
  std::string out;
  base::JsonWriter w(out);
  w.begin_object().key("error").begin_object();
  w.field("message", std::string_view(error.message));
  w.field("type",
          error.side() == ErrorSide::kDownstream ? "invalid_request_error" : "server_error");
  w.field("code", to_string(error.kind));
  w.end_object().end_object();
  return out;
}

void write_error_response(std::string& out, const Error& error) {
  const std::string body = protocol_error_json(error);
  HttpHeaders headers{{"Content-Type", "application/json"}};
  write_response_head(out, error.status(), headers, BodyFraming::length(body.size()),
                      /*keep_alive=*/false);
  out.append(body);
}

}  // namespace cutline::proto
