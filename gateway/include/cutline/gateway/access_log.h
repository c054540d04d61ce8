#pragma once
// AccessLog: one JSON line per request, to a file (appended) or to stdout ("-"). The line carries
// every field of the stop record (flattened at the top level for grep and jq, and the full
// "cutline" object) plus the request facts below. Written by `finish` on every path; thread-safe
// (one mutex around one write + flush per line).

#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>

#include "cutline/proto/result.h"
#include "cutline/proto/stop_record.h"

namespace cutline::gateway {

// The request facts logged beside the stop record.
struct AccessLogEntry {
  double ts_unix_s = 0;  // wall-clock arrival time
  std::string_view request_id;
  std::string_view method;
  std::string_view path;
  std::string_view tenant;
  std::string_view model;
  std::string_view upstream;
  int status = 0;
  int64_t bytes_in = 0;
  int64_t bytes_out = 0;
  bool stream = false;
  const proto::StopRecord* stop = nullptr;  // null for passthrough requests
};

// Renders one log line (no trailing newline).
std::string access_log_line(const AccessLogEntry& e);

class AccessLog {
 public:
  // "-" or "" = stdout; otherwise the file is opened for appending.
  static Result<std::unique_ptr<AccessLog>> open(const std::string& path);
  ~AccessLog();
  AccessLog(const AccessLog&) = delete;
  AccessLog& operator=(const AccessLog&) = delete;

  void write(const AccessLogEntry& e);

  // Opens the file's path again and writes there from now on (logrotate renames the file, then
  // the gateway's SIGUSR1 handler calls this). The old file is closed after the last line that
  // was being written to it. On error the old file stays in use. Stdout: nothing to do.
  Status reopen();

 private:
  AccessLog(std::FILE* f, bool owned, std::string path)
      : file_(f), owned_(owned), path_(std::move(path)) {}
  std::mutex mu_;
  std::FILE* file_;  // guarded by mu_
  bool owned_;
  std::string path_;
};

}  // namespace cutline::gateway
