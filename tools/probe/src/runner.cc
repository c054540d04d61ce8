#include "runner.h"

#include <map>
#include <memory>

#include "cutline/base/json_writer.h"
#include "cutline/proto/http/http_client.h"
#include "cutline/proto/net/event_loop.h"
#include "cutline/proto/net/timer.h"
#include "cutline/proto/sse/sse_parser.h"
#include "cutline/proto/wire/openai_chunk.h"
#include "cutline/proto/wire/openai_response.h"

namespace cutline::tools::probe {

std::string request_body(const RunnerConfig& config, const Job& job) {
  std::string out;
  base::JsonWriter w(out);
  w.begin_object().field("model", job.model);
  if (config.target.find("/chat/") != std::string::npos) {
    w.key("messages").begin_array().begin_object();
    w.field("role", "user").field("content", job.prompt_text).end_object().end_array();
  } else {
    w.field("prompt", job.prompt_text);
  }
  w.field("max_tokens", config.max_tokens).field("temperature", config.temperature);
  if (config.top_p) w.field("top_p", *config.top_p);
  if (job.seed) w.field("seed", *job.seed);
  w.field("stream", true);
  w.key("stream_options").begin_object().field("include_usage", true).end_object();
  w.end_object();
  return out;
}

namespace {

// One request in flight: its record and the parsers reading its response.
struct InFlight {
  RequestRecord rec;
  proto::ClientHandle handle;
  proto::SseParser sse;
  proto::ChunkParser chunks;
  std::unique_ptr<proto::Timer> timeout;
  int64_t sent_ns = 0;
  int64_t last_token_ns = 0;
  bool is_sse = false;
  bool saw_done = false;
  bool have_usage = false;
  std::optional<proto::StopRecord> stop;
  std::string body;  // a non-SSE body (error or non-streaming answer)
};

class Sweep {
 public:
  Sweep(const RunnerConfig& config, const base::Clock& clock, int64_t origin_ns,
        const std::vector<Job>& jobs, int concurrency,
        const std::function<void(const RequestRecord&)>& on_done)
      : config_(config),
        clock_(clock),
        origin_ns_(origin_ns),
        jobs_(jobs),
        concurrency_(concurrency),
        on_done_(on_done),
        client_(loop_) {
    records_.resize(jobs.size());
  }

  std::vector<RequestRecord> run() {
    if (jobs_.empty()) return {};
    loop_.post([this] {
      for (int i = 0; i < concurrency_ && next_ < jobs_.size(); ++i) start_next();
    });
    loop_.run();
    return std::move(records_);
  }

 private:
  double ms_since_origin(int64_t ns) const { return static_cast<double>(ns - origin_ns_) / 1e6; }

  void start_next() {
    const size_t index = next_++;
    const Job& job = jobs_[index];
    auto f = std::make_shared<InFlight>();
    RequestRecord& r = f->rec;
    r.run = job.run;
    r.concurrency = concurrency_;
    r.sequence = static_cast<int>(index);
    r.prompt_index = job.prompt_index;
    r.prompt_name = job.prompt_name;
    r.repeat = job.repeat;
    r.seed = job.seed;
    r.model = job.model;
    r.max_tokens_requested = config_.max_tokens;

    proto::ClientRequest req;
    req.method = "POST";
    req.host = config_.host;
    req.port = config_.port;
    req.target = config_.target;
    req.headers.add("Content-Type", "application/json");
    req.headers.add("Accept", "text/event-stream");
    if (!config_.api_key.empty()) req.headers.add("Authorization", "Bearer " + config_.api_key);
    for (const auto& [k, v] : config_.headers) req.headers.add(k, v);
    req.body = request_body(config_, job);

    proto::ClientCallbacks cb;
    InFlight* raw = f.get();
    cb.on_head = [this, raw](int status, proto::HttpHeaders& headers) {
      raw->rec.http_status = status;
      auto ct = headers.get("Content-Type");
      raw->is_sse = status == 200 && ct && ct->find("text/event-stream") != std::string_view::npos;
    };
    cb.on_body = [this, raw](std::string_view data) { on_body(*raw, data); };
    cb.on_complete = [this, index](proto::HttpHeaders& trailers) {
      auto& fl = *in_flight_[index];
      if (!fl.stop) {
        if (auto t = trailers.get("cutline-stop")) {
          if (auto rec = proto::parse_stop_header(*t); rec.ok()) fl.stop = std::move(rec).value();
        }
      }
      finish(index);
    };
    cb.on_error = [this, index](const proto::ClientError& e) {
      auto& fl = *in_flight_[index];
      fl.rec.transport_error = std::string(proto::to_string(e.kind));
      fl.rec.error = e.message;
      finish(index);
    };
    in_flight_[index] = f;
    f->sent_ns = clock_.now_ns();
    r.start_ms = ms_since_origin(f->sent_ns);
    f->timeout = std::make_unique<proto::Timer>(loop_, [this, index] {
      auto& fl = *in_flight_[index];
      fl.handle.cancel();
      fl.rec.client_timeout = true;
      fl.rec.error = "the probe gave up after " + std::to_string(config_.timeout_ms) +
                     " ms (--timeout) and disconnected";
      finish(index);
    });
    f->timeout->arm(config_.timeout_ms);
    f->handle = client_.start(std::move(req), std::move(cb));
  }

  void on_body(InFlight& f, std::string_view data) {
    if (!f.is_sse) {
      f.body.append(data);
      return;
    }
    auto st = f.sse.feed(data, [&](const proto::SseEvent& ev) {
      if (ev.done) {
        f.saw_done = true;
        return;
      }
      on_chunk(f, ev.data);
    });
    if (!st.ok() && f.rec.error.empty()) f.rec.error = st.error().message;
  }

  void on_chunk(InFlight& f, std::string_view data) {
    if (!f.chunks.parse(data).ok()) {
      if (f.rec.error.empty()) f.rec.error = "unparsable chunk";
      return;
    }
    const proto::ParsedChunk& c = f.chunks.chunk();
    if (c.error) {
      f.rec.error = std::string(c.error->message);
    }
    if (!c.content().empty()) {
      const int64_t now = clock_.now_ns();
      if (!f.rec.ttft_ms) {
        f.rec.ttft_ms = static_cast<double>(now - f.sent_ns) / 1e6;
      } else {
        f.rec.itl_ms.push_back(static_cast<double>(now - f.last_token_ns) / 1e6);
      }
      f.last_token_ns = now;
      f.rec.content.append(c.content());
      if (!f.have_usage) {
        ++f.rec.output_tokens;
        f.rec.count_method = "chunks";
      }
    }
    if (auto fr = c.finish_reason(); !fr.empty()) f.rec.finish_reason = std::string(fr);
    if (c.usage) {
      f.have_usage = true;
      f.rec.output_tokens = c.usage->completion_tokens;
      f.rec.count_method = "usage";
    }
    if (c.cutline) f.stop = *c.cutline;
  }

  void finish(size_t index) {
    std::shared_ptr<InFlight> f = in_flight_[index];
    if (f->timeout) f->timeout->cancel();
    RequestRecord& r = f->rec;
    r.end_ms = ms_since_origin(clock_.now_ns());
    if (!f->is_sse && !f->body.empty()) {
      if (auto parsed = proto::parse_completion_response(f->body); parsed.ok()) {
        if (parsed->error) r.error = parsed->error->message;
        if (parsed->cutline) f->stop = parsed->cutline;
        if (r.http_status == 200 && !parsed->error) {
          r.content = parsed->content;
          r.finish_reason = parsed->finish_reason;
          if (parsed->usage) {
            r.output_tokens = parsed->usage->completion_tokens;
            r.count_method = "usage";
          }
        }
      } else if (r.error.empty()) {
        r.error = f->body.substr(0, 200);
      }
    }
    r.content_hash = content_hash(r.content);
    if (f->stop && !r.client_timeout && r.transport_error.empty()) {
      apply_stop_record(r, *f->stop);
    } else {
      if (f->stop) apply_stop_record(r, *f->stop);
      derive_cause(r, f->saw_done);
    }
    records_[index] = std::move(r);
    if (on_done_) on_done_(records_[index]);
    // Drop the in-flight state after the callback stack unwinds (we may be inside its callback).
    loop_.post([this, index] { in_flight_.erase(index); });
    ++finished_;
    if (next_ < jobs_.size()) start_next();
    if (finished_ == jobs_.size()) loop_.post([this] { loop_.stop(); });
  }

  const RunnerConfig& config_;
  const base::Clock& clock_;
  int64_t origin_ns_;
  const std::vector<Job>& jobs_;
  int concurrency_;
  const std::function<void(const RequestRecord&)>& on_done_;
  proto::EventLoop loop_;
  proto::HttpClient client_;
  std::map<size_t, std::shared_ptr<InFlight>> in_flight_;
  std::vector<RequestRecord> records_;
  size_t next_ = 0;
  size_t finished_ = 0;
};

}  // namespace

Runner::Runner(RunnerConfig config, const base::Clock& clock, int64_t origin_ns)
    : config_(std::move(config)), clock_(clock), origin_ns_(origin_ns) {}

std::vector<RequestRecord> Runner::run(const std::vector<Job>& jobs, int concurrency,
                                       const std::function<void(const RequestRecord&)>& on_done) {
  Sweep sweep(config_, clock_, origin_ns_, jobs, concurrency, on_done);
  return sweep.run();
}

}  // namespace cutline::tools::probe
