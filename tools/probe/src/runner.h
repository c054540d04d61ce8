#pragma once
// Runner: issues streaming OpenAI requests with a fixed number in flight (a closed loop: when
// one answer ends the next job starts) on one libevent loop and HttpClient, and records each on
// one monotonic clock. The probe's load sweep calls run() once per concurrency level; the switch
// scenarios call it with concurrency 1, one step at a time.
//
// Threading: run() drives its own EventLoop on the calling thread and returns when every job has
// ended (answer, error, or the per-request timeout, after which the request is cancelled: the
// endpoint sees the client go away). on_done runs on that thread after each request.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cutline/base/clock.h"
#include "cutline/tools/probe/record.h"

namespace cutline::tools::probe {

struct Job {
  std::string run = "load";
  int prompt_index = 0;
  std::string prompt_name;
  std::string prompt_text;
  int repeat = 0;
  std::optional<int64_t> seed;
  std::string model;
};

struct RunnerConfig {
  std::string host;
  uint16_t port = 80;
  std::string target = "/v1/chat/completions";  // "/v1/completions" sends `prompt`
  std::string api_key;
  std::vector<std::pair<std::string, std::string>> headers;
  int64_t max_tokens = 64;
  double temperature = 0;
  std::optional<double> top_p;
  int64_t timeout_ms = 60000;
};

// The OpenAI request body for a job (streaming, usage requested).
std::string request_body(const RunnerConfig& config, const Job& job);

class Runner {
 public:
  // `clock` is the probe's one monotonic clock; times are ms since `origin_ns` on it.
  Runner(RunnerConfig config, const base::Clock& clock, int64_t origin_ns);

  std::vector<RequestRecord> run(const std::vector<Job>& jobs, int concurrency,
                                 const std::function<void(const RequestRecord&)>& on_done = {});

 private:
  RunnerConfig config_;
  const base::Clock& clock_;
  int64_t origin_ns_;
};

}  // namespace cutline::tools::probe
