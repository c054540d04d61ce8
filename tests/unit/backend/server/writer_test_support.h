#pragma once
// What the backend's writer tests share: a ServerStream that records what a writer sends, a
// tokenizer whose ids 0..255 are bytes, and the SSE events of a recorded body.

#include <cstdlib>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cutline/model/tokenizer.h"
#include "cutline/proto/http/server_stream.h"
#include "cutline/proto/sse/sse_parser.h"

namespace cutline::server::test {

// Records what a writer sends; never closed.
class RecordingStream final : public proto::ServerStream {
 public:
  proto::HttpRequest& request() override { return request_; }
  proto::EventLoop& loop() const override { std::abort(); }
  std::string_view protocol() const override { return "HTTP/1.1"; }
  std::string peer_address() const override { return "127.0.0.1:1"; }
  bool send_head(int status, const proto::HttpHeaders&, proto::BodyFraming) override {
    status_ = status;
    return true;
  }
  bool send_body(std::string_view data) override {
    body_.append(data);
    return true;
  }
  bool finish(const proto::HttpHeaders& trailers) override {
    trailers_ = trailers;
    finished_ = true;
    return true;
  }
  bool send_simple(int status, const proto::HttpHeaders&, std::string_view body) override {
    status_ = status;
    body_.assign(body);
    finished_ = true;
    return true;
  }
  void reset() override {}
  void on_writable(std::function<void()>) override {}
  void on_close(std::function<void()>) override {}
  bool closed() const override { return false; }
  bool head_sent() const override { return status_ != 0; }
  bool finished() const override { return finished_; }
  size_t buffered_bytes() const override { return 0; }

  int status_ = 0;
  std::string body_;
  proto::HttpHeaders trailers_;
  bool finished_ = false;

 private:
  proto::HttpRequest request_;
};

// Ids 0..255 are bytes.
class ByteTokenizer : public model::Tokenizer {
 public:
  ByteTokenizer() {
    for (int i = 0; i < 256; ++i) bytes_.emplace_back(1, static_cast<char>(i));
  }
  int32_t vocab_size() const override { return 256; }
  std::vector<int32_t> encode(std::string_view, bool) const override { return {}; }
  std::string_view token_bytes(int32_t id) const override { return bytes_[id]; }
  int32_t special_token_id(std::string_view) const override { return -1; }
  int32_t bos_id() const override { return -1; }
  std::span<const int32_t> eos_ids() const override { return {}; }
  bool is_control(int32_t) const override { return false; }

 private:
  std::vector<std::string> bytes_;
};

// (event type, data) of each SSE event in `body`.
inline std::vector<std::pair<std::string, std::string>> events_of(const std::string& body) {
  proto::SseParser p;
  std::string_view in = body;
  std::vector<std::pair<std::string, std::string>> out;
  while (p.next(in) == proto::SseParser::Step::kEvent)
    out.emplace_back(std::string(p.event().event), std::string(p.event().data));
  return out;
}

}  // namespace cutline::server::test
