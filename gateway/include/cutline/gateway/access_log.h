#pragma once
// AccessLog: one JSON line per request, to a file (appended) or to stdout ("-"). The line
// carries every field of the stop record (flattened at the top level for grep and jq, and the
// full "cutline" object) plus the request facts below. Written by `finish` on every path.
//
// Writing never blocks the event loop on the disk: write() renders the line and queues it (a
// short lock, no I/O); a writer thread of its own takes what is queued in batches, writes each
// batch and flushes once. The queue is bounded (max_queued_bytes): while a stalled disk keeps it
// full, new lines are dropped and counted (dropped_lines(); the gateway exports it as
// cutline_access_log_dropped_total) rather than held in memory or waited for. The destructor
// writes what is still queued, then joins the thread. Thread-safe.

#include <condition_variable>
#include <cstdio>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "cutline/base/result.h"
#include "cutline/proto/wire/stop_record.h"

namespace cutline::gateway {

// The request facts logged beside the stop record.
struct AccessLogEntry {
  double ts_unix_s = 0;  // wall-clock arrival time
  std::string_view request_id;
  // As received (a request refused before routing) or as routed; a byte outside printable
  // ASCII is logged as \xNN (printable.h), so the line stays valid UTF-8.
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
  static constexpr size_t kDefaultMaxQueuedBytes = 16 << 20;

  // "-" or "" = stdout; otherwise the file is opened for appending (close-on-exec).
  static Result<std::unique_ptr<AccessLog>> open(const std::string& path,
                                                 size_t max_queued_bytes = kDefaultMaxQueuedBytes);
  // Over any stream (tests: a pipe nobody reads stalls like a full disk). Takes ownership when
  // `owned`.
  static std::unique_ptr<AccessLog> over(std::FILE* file, bool owned, size_t max_queued_bytes);
  ~AccessLog();
  AccessLog(const AccessLog&) = delete;
  AccessLog& operator=(const AccessLog&) = delete;

  // Queues one line (never waits for the disk); drops it when the queue is full.
  void write(const AccessLogEntry& e);
  // Queues an already rendered line (no trailing newline).
  void write_line(std::string line);
  // Lines dropped because the queue was full (any thread).
  uint64_t dropped_lines() const;
  // Waits until everything queued so far is written and flushed (tests, shutdown).
  void flush();

  // Opens the file's path again; the writer moves to it before its next batch (logrotate renames
  // the file, then the gateway's SIGUSR1 handler calls this). On error the old file stays in
  // use. Stdout, or a stream given to over(): nothing to do.
  Status reopen();

 private:
  AccessLog(std::FILE* f, bool owned, std::string path, size_t max_queued_bytes);
  void run();

  std::FILE* file_;  // the writer thread's (and the destructor's, after the join)
  bool owned_;
  const std::string path_;  // what reopen() opens; empty for stdout and over()
  const size_t max_queued_bytes_;
  mutable std::mutex mu_;
  std::condition_variable wake_;     // the writer: lines queued, or stop
  std::condition_variable written_;  // flush(): a batch was written
  std::deque<std::string> queue_;    // guarded by mu_
  size_t queued_bytes_ = 0;          // guarded by mu_
  uint64_t enqueued_ = 0;            // guarded by mu_: lines ever queued
  uint64_t done_ = 0;                // guarded by mu_: lines ever written (or given up on)
  uint64_t dropped_ = 0;             // guarded by mu_
  bool stop_ = false;                // guarded by mu_
  std::FILE* reopened_ = nullptr;    // guarded by mu_: from reopen(), taken before a batch
  std::thread writer_;
};

}  // namespace cutline::gateway
