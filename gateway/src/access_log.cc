#include "cutline/gateway/access_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <utility>

#include "cutline/base/json_writer.h"
#include "cutline/gateway/printable.h"

namespace cutline::gateway {
namespace {

// The file at `path` for appending, created 0640 (owner read-write, group read: the package's
// log directory gives new files the `adm` group) rather than fopen's 0666 less umask, since
// requests' targets and clients' addresses are not for every local user.
std::FILE* open_for_append(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
  if (fd < 0) return nullptr;
  std::FILE* f = ::fdopen(fd, "a");
  if (!f) {
    const int saved = errno;
    ::close(fd);
    errno = saved;
  }
  return f;
}

}  // namespace

std::string access_log_line(const AccessLogEntry& e) {
  std::string out;
  out.reserve(768);
  base::JsonWriter w(out);
  w.begin_object();
  w.field("ts", e.ts_unix_s).field("request_id", e.request_id);
  // The method and the target are as the client sent them when the request was refused before
  // routing (e.g. a target with bytes over 0x7e): escaped, so the line stays valid JSON in UTF-8.
  std::string escaped;
  const auto safe = [&escaped](std::string_view v) {
    if (is_printable(v)) return v;
    escaped = printable(v, v.size());
    return std::string_view(escaped);
  };
  w.field("method", safe(e.method));
  w.field("path", safe(e.path));
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

Result<std::unique_ptr<AccessLog>> AccessLog::open(const std::string& path,
                                                   size_t max_queued_bytes) {
  if (path.empty() || path == "-") return over(stdout, false, max_queued_bytes);
  std::FILE* f = open_for_append(path);
  if (!f) {
    return make_error(ErrorKind::kIo,
                      "access log " + path + ": " + std::string(std::strerror(errno)));
  }
  return std::unique_ptr<AccessLog>(new AccessLog(f, true, path, max_queued_bytes));
}

std::unique_ptr<AccessLog> AccessLog::over(std::FILE* file, bool owned, size_t max_queued_bytes) {
  return std::unique_ptr<AccessLog>(new AccessLog(file, owned, "", max_queued_bytes));
}

AccessLog::AccessLog(std::FILE* f, bool owned, std::string path, size_t max_queued_bytes)
    : file_(f), owned_(owned), path_(std::move(path)), max_queued_bytes_(max_queued_bytes) {
  writer_ = std::thread([this] { run(); });
}

AccessLog::~AccessLog() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  writer_.join();
  if (reopened_) std::fclose(reopened_);
  if (owned_) std::fclose(file_);
}

Status AccessLog::reopen() {
  if (!owned_ || path_.empty()) return {};
  std::FILE* f = open_for_append(path_);
  if (!f) {
    return make_error(ErrorKind::kIo,
                      "access log " + path_ + ": " + std::string(std::strerror(errno)));
  }
  std::FILE* superseded = nullptr;
  {
    std::lock_guard lock(mu_);
    superseded = std::exchange(reopened_, f);  // two reopens before a batch: the newest wins
  }
  if (superseded) std::fclose(superseded);
  return {};
}

void AccessLog::write(const AccessLogEntry& e) { write_line(access_log_line(e)); }

void AccessLog::write_line(std::string line) {
  line.push_back('\n');
  {
    std::lock_guard lock(mu_);
    if (queued_bytes_ + line.size() > max_queued_bytes_) {
      ++dropped_;
      return;
    }
    queued_bytes_ += line.size();
    queue_.push_back(std::move(line));
    ++enqueued_;
  }
  wake_.notify_one();
}

uint64_t AccessLog::dropped_lines() const {
  std::lock_guard lock(mu_);
  return dropped_;
}

void AccessLog::flush() {
  std::unique_lock lock(mu_);
  const uint64_t target = enqueued_;
  written_.wait(lock, [&] { return done_ >= target || stop_; });
}

void AccessLog::run() {
  std::deque<std::string> batch;
  std::string out;
  std::unique_lock lock(mu_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty() && stop_) break;
    batch.swap(queue_);
    queued_bytes_ = 0;
    std::FILE* reopened = std::exchange(reopened_, nullptr);
    lock.unlock();
    if (reopened) {
      std::fclose(file_);
      file_ = reopened;
    }
    out.clear();
    for (const std::string& line : batch) out.append(line);
    std::fwrite(out.data(), 1, out.size(), file_);
    std::fflush(file_);
    lock.lock();
    done_ += batch.size();
    batch.clear();
    written_.notify_all();
  }
}

}  // namespace cutline::gateway
