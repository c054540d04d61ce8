#pragma once
// Passthrough: every path and method that is not an OpenAI completion route (/v1/models,
// /v1/embeddings, anything else) is forwarded to an upstream unchanged — method, target,
// headers except hop-by-hop, body — and the response streams back the same way (status,
// headers except hop-by-hop, body, back-pressure included). Authentication applies when tenants
// are configured. One access-log line per request (no stop record: nothing is generated).
//
// The upstream is chosen by the model the request names — "model" in a JSON object body
// (/v1/embeddings, ...) or the {model} of /v1/models/{model} — with the upstreams' model globs;
// a request that names none (or a model no upstream serves) goes to the first upstream
// configured. Runs on the request's worker loop.

#include <cstdint>
#include <memory>
#include <string>

#include "cutline/policy/policy.h"
#include "cutline/proto/http_client.h"
#include "cutline/proto/server_stream.h"

namespace cutline::gateway {

class Gateway;
struct Worker;

class Passthrough : public std::enable_shared_from_this<Passthrough> {
 public:
  Passthrough(Gateway& gateway, Worker& worker, std::shared_ptr<proto::ServerStream> client,
              uint64_t id);
  void start();

 private:
  void on_head(int status, proto::HttpHeaders& headers);
  void on_body(std::string_view data);
  void on_complete(proto::HttpHeaders& trailers);
  void on_error(const proto::ClientError& error);
  void respond_error(const Error& error);
  void done();

  Gateway& gw_;
  Worker& worker_;
  std::shared_ptr<proto::ServerStream> client_;
  const uint64_t id_;
  std::shared_ptr<const policy::Policy> policy_;
  const policy::Upstream* upstream_ = nullptr;
  std::string tenant_;
  proto::ClientHandle call_;
  int status_ = 0;
  int64_t bytes_in_ = 0;
  int64_t bytes_out_ = 0;
  double arrival_unix_s_ = 0;
  bool paused_ = false;
  bool done_ = false;
};

}  // namespace cutline::gateway
