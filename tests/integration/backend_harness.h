#pragma once
// Harness for cutline-backend integration tests: starts the real binary on a free port (--port 0,
// the port read from its "listening on" line) with its cache directory in a fresh temp dir, and
// talks to it the way a user's client would (blocking http_fetch, or process_harness.h's
// RawClient to disconnect).
// The temp dir is removed afterwards unless CUTLINE_KEEP_TEST_DIRS is set.

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <simdjson.h>

#include "cutline/model/synth.h"
#include "cutline/proto/http/http_fetch.h"
#include "cutline/proto/wire/stop_record.h"
#include "process_harness.h"
#include "sse_events.h"

namespace cutline::test {

// Synthesizes a small model like the builtin one but with other weights (seed) and shape.
inline std::string synth_model(const std::string& dir, const std::string& name,
                               model::SynthOptions o) {
  const std::string path = dir + "/" + name + ".gguf";
  auto st = model::synthesize_tiny_model(o, path);
  return st.ok() ? path : std::string();
}

class Backend {
 public:
  // Starts cutline-backend with `args` (plus --port 0 --cache-dir DIR/cache); waits for the port.
  bool start(const std::vector<std::string>& args) {
    dir_ = dir_.empty() ? make_temp_dir("cutline-backend-test") : dir_;
    std::vector<std::string> argv = {CUTLINE_BACKEND_BIN, "--port",   "0",  "--cache-dir",
                                     dir_ + "/cache",     "--device", "cpu"};
    argv.insert(argv.end(), args.begin(), args.end());
    out_ = dir_ + "/stdout.txt";
    err_ = dir_ + "/stderr.txt";
    process_.start(argv, out_, err_);
    return wait_for(
        [&] {
          const std::string text = read_file(out_);
          const auto at = text.rfind(':');
          if (text.find("listening on") == std::string::npos || at == std::string::npos)
            return false;
          port_ = static_cast<uint16_t>(std::atoi(text.c_str() + at + 1));
          return port_ != 0;
        },
        30000);
  }
  const std::string& dir() {
    if (dir_.empty()) dir_ = make_temp_dir("cutline-backend-test");
    return dir_;
  }
  uint16_t port() const { return port_; }
  std::string stderr_text() const { return read_file(err_); }

  // SIGTERM; returns the exit status (or -1 when it had to be killed).
  int stop(int timeout_ms = 20000) { return process_.stop(timeout_ms); }
  void signal(int sig) const { process_.signal(sig); }
  ~Backend() {
    stop();
    if (!dir_.empty() && !std::getenv("CUTLINE_KEEP_TEST_DIRS")) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
    }
  }

  Result<proto::HttpResponse> get(const std::string& path) const {
    return proto::http_fetch("http://127.0.0.1:" + std::to_string(port_) + path);
  }
  Result<proto::HttpResponse> post(const std::string& path, const std::string& body) const {
    return proto::http_fetch("http://127.0.0.1:" + std::to_string(port_) + path, "POST",
                             {{"Content-Type", "application/json"}}, body, 60000);
  }

 private:
  std::string dir_;
  std::string out_;
  std::string err_;
  Process process_;
  uint16_t port_ = 0;
};

// The "cutline" object inside a JSON document (a chunk or a whole response).
inline std::optional<proto::StopRecord> cutline_of(const std::string& json) {
  const auto at = json.find("\"cutline\":");
  if (at == std::string::npos) return std::nullopt;
  // The object runs to its matching brace; no strings in the record contain braces here.
  size_t begin = at + 10, depth = 0, end = begin;
  for (; end < json.size(); ++end) {
    if (json[end] == '{') ++depth;
    if (json[end] == '}' && --depth == 0) break;
  }
  auto rec = proto::parse_stop_record(std::string_view(json).substr(begin, end - begin + 1));
  if (!rec.ok()) return std::nullopt;
  return std::move(rec).value();
}

// The string at a JSON pointer in `json`; "<absent>" when there is none, "<invalid json>".
inline std::string json_string(const std::string& json, const std::string& pointer) {
  simdjson::dom::parser parser;
  auto doc = parser.parse(json);
  if (doc.error()) return "<invalid json>";
  std::string_view s;
  if (doc.at_pointer(pointer).get_string().get(s) != simdjson::SUCCESS) return "<absent>";
  return std::string(s);
}

// A numeric field of a flat JSON path like {"a":{"b":N}} read with simdjson's DOM API.
inline double json_number(const std::string& json, const std::string& pointer) {
  simdjson::dom::parser parser;
  auto doc = parser.parse(json);
  if (doc.error()) return -1;
  auto v = doc.at_pointer(pointer);
  if (v.error()) return -1;
  if (v.is_int64()) return static_cast<double>(v.get_int64().value());
  if (v.is_uint64()) return static_cast<double>(v.get_uint64().value());
  if (v.is_double()) return v.get_double().value();
  if (v.is_bool()) return v.get_bool().value() ? 1 : 0;
  return -1;
}

}  // namespace cutline::test
