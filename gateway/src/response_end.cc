// How every response ends (response_end.h): the record's headers, the access-log line and the
// metrics, and the answer of a request refused before its phases began.
#include "cutline/gateway/response_end.h"

#include "cutline/base/clock.h"
#include "cutline/gateway/request_id.h"
#include "cutline/gateway/stream_host.h"
#include "cutline/proto/wire/openai_error.h"

namespace cutline::gateway {

proto::HttpHeaders record_headers(std::string_view content_type, std::string_view stop_header,
                                  std::string_view request_id) {
  return proto::HttpHeaders{{"Content-Type", content_type},
                            {"Cutline-Stop", stop_header},
                            {"Cutline-Request-Id", request_id},
                            {"X-Request-Id", request_id}};
}

void record_response_end(StreamHost& host, const ResponseEnd& end) {
  if (AccessLog* log = host.access_log()) log->write(end.log);
  RequestOutcome o;
  o.route = end.route;
  o.model = end.log.model;
  o.tenant = end.log.tenant;
  o.policy = end.policy;
  o.code = end.log.status;
  o.stop = end.log.stop;
  o.itl = end.itl;
  o.clamp_rule = end.clamp_rule;
  host.metrics().record(o);
}

void answer_refused(StreamHost& host, const proto::HttpRequest& req, const Error& error,
                    proto::Cause cause, std::string rule, std::optional<double> limit,
                    proto::HttpHeaders& headers, std::string& body) {
  const std::string id = request_id_for(req.headers);
  proto::StopRecord record;
  record.cause = cause;
  record.reporter = "gateway";
  record.message = error.message;
  record.request_id = id;
  record.rule = std::move(rule);
  record.limit = limit;
  if (limit) record.unit = "bytes";
  proto::ErrorBodyFields fields;
  fields.cutline = &record;
  body = proto::error_body(error, fields);
  headers.add("Cutline-Stop", proto::stop_header_value(record));
  headers.add("Cutline-Request-Id", id);
  headers.add("X-Request-Id", id);
  const std::string path(req.path());
  const bool openai = path == "/v1/chat/completions" || path == "/v1/completions" ||
                      path == "/v1/responses" || path == "/v1/embeddings";
  ResponseEnd end;
  end.log.stop = &record;
  end.log.status = error.status();
  end.log.ts_unix_s = base::wall_time_s();
  end.log.request_id = id;
  end.log.method = req.method;
  end.log.path = path;
  end.route = openai ? std::string_view(path) : std::string_view("other");
  end.log.bytes_in = static_cast<int64_t>(req.body.size());
  end.log.bytes_out = static_cast<int64_t>(body.size());
  record_response_end(host, end);
}

}  // namespace cutline::gateway
