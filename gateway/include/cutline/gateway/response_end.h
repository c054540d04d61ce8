#pragma once
// How every response the gateway gives ends, whichever path produced it: its one stop record goes
// to the client (body and Cutline-Stop header, or trailer), to the access log and to the metrics,
// once. A request that runs the phases (Stream, Passthrough, ModelsList) reaches
// record_response_end() only through its RequestLifecycle's finish guard (request_lifecycle.h:
// begin_finish(), then record() exactly once); an answer given before any of them began (the
// HTTP layer's own 4xx, a request target that does not parse, a request during a drain) goes
// through answer_refused().
//
//   record_headers()       the headers of an answer that carries the record in Cutline-Stop;
//   record_response_end()  the access-log line and the metrics, before the last bytes go out
//                          (a client that reads /metrics or the log right after its answer finds
//                          its request counted);
//   answer_refused()       the whole answer of a request refused before it became a Stream,
//                          Passthrough or ModelsList.
//
// Threading: any worker thread (the host's metrics and access log are thread-safe).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "cutline/base/result.h"
#include "cutline/gateway/access_log.h"
#include "cutline/gateway/metrics.h"
#include "cutline/proto/http1/http_message.h"
#include "cutline/proto/wire/stop_record.h"

namespace cutline::gateway {

class StreamHost;

// An ended response: its access-log line (with the one stop record), and what the metrics count
// it under beside that.
struct ResponseEnd {
  AccessLogEntry log;      // stop, status (499: the client left first), arrival, sizes, ...
  std::string_view route;  // the metrics' route: an OpenAI route, "/v1/models" or "other"
  std::string_view policy;
  const ItlBuckets* itl = nullptr;
  std::string_view clamp_rule;
};

// Content-Type, the record (Cutline-Stop: proto::stop_header_value) and the request id under both
// of its names, in that order.
proto::HttpHeaders record_headers(std::string_view content_type, std::string_view stop_header,
                                  std::string_view request_id);

// One access-log line (when the policy keeps a log) and the metrics of `end`.
void record_response_end(StreamHost& host, const ResponseEnd& end);

// A request answered before it became a Stream, Passthrough or ModelsList: an OpenAI-style error
// body with the record in error.cutline (`cause`, `rule`, `limit` in bytes when given), the
// record and request-id headers added to `headers`, and the end recorded.
void answer_refused(StreamHost& host, const proto::HttpRequest& request, const Error& error,
                    proto::Cause cause, std::string rule, std::optional<double> limit,
                    proto::HttpHeaders& headers, std::string& body);

}  // namespace cutline::gateway
