#include "cutline/gateway/access_log.h"

#include <cerrno>
#include <cstring>
#include <memory>

#include "cutline/proto/json_writer.h"

namespace cutline::gateway {

std::string access_log_line(const AccessLogEntry& e) {
  std::string out;
  out.reserve(768);
  proto::JsonWriter w(out);
  w.begin_object();
  w.field("ts", e.ts_unix_s).field("request_id", e.request_id);
  w.field("method", e.method).field("path", e.path);
  w.field("tenant", e.tenant).field("model", e.model).field("upstream", e.upstream);
  w.field("status", e.status).field("stream", e.stream);
  w.field("bytes_in", e.bytes_in).field("bytes_out", e.bytes_out);
  if (const proto::StopRecord* s = e.stop) {
    w.field("cause", proto::to_string(s->cause)).field("origin", proto::to_string(s->origin()));
    w.field("truncated", s->truncated());
    w.field("policy", s->policy).field("rule", s->rule);
    w.optional_field("limit", s->limit).optional_field("observed", s->observed);
    w.field("unit", s->unit);
    w.optional_field("requested_max_tokens", s->requested_max_tokens);
    w.optional_field("effective_max_tokens", s->effective_max_tokens);
    w.optional_field("input_tokens", s->input_tokens);
    w.field("output_tokens", s->output_tokens);
    w.field("count_method", proto::to_string(s->count_method));
    w.optional_field("queue_ms", s->queue_ms).optional_field("ttft_ms", s->ttft_ms);
    w.optional_field("itl_mean_ms", s->itl_mean_ms).optional_field("itl_max_ms", s->itl_max_ms);
    w.optional_field("duration_ms", s->duration_ms);
    w.optional_field("preemptions", s->preemptions);
    w.optional_field("kv_bytes_peak", s->kv_bytes_peak);
    w.optional_field("device_free_bytes", s->device_free_bytes);
    if (s->upstream_cause) w.field("upstream_cause", proto::to_string(*s->upstream_cause));
    w.field("message", s->message);
    w.key("cutline");
    proto::write_stop_record(w, *s);
  }
  w.end_object();
  return out;
}

Result<std::unique_ptr<AccessLog>> AccessLog::open(const std::string& path) {
  if (path.empty() || path == "-")
    return std::unique_ptr<AccessLog>(new AccessLog(stdout, false, "-"));
  std::FILE* f = std::fopen(path.c_str(), "a");
  if (!f) {
    return make_error(ErrorKind::kIo,
                      "access log " + path + ": " + std::string(std::strerror(errno)));
  }
  return std::unique_ptr<AccessLog>(new AccessLog(f, true, path));
}

Status AccessLog::reopen() {
  if (!owned_) return {};  // stdout: nothing to reopen
  std::FILE* f = std::fopen(path_.c_str(), "a");
  if (!f) {
    return make_error(ErrorKind::kIo,
                      "access log " + path_ + ": " + std::string(std::strerror(errno)));
  }
  std::FILE* old = nullptr;
  {
    std::lock_guard lock(mu_);
    old = file_;
    file_ = f;
  }
  std::fclose(old);
  return {};
}

AccessLog::~AccessLog() {
  if (owned_) std::fclose(file_);
}

void AccessLog::write(const AccessLogEntry& e) {
  std::string line = access_log_line(e);
  line.push_back('\n');
  std::lock_guard lock(mu_);
  std::fwrite(line.data(), 1, line.size(), file_);
  std::fflush(file_);
}

}  // namespace cutline::gateway
