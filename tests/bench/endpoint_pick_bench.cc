// EndpointPool::pick() per request: 1 vs 16 endpoints, each balance, and the full path a
// request takes with load reports (residency) and prefix affinity. The lease is reported at once,
// as a request that ends would.
#include <benchmark/benchmark.h>

#include <string>

#include "cutline/gateway/endpoint_pool.h"
#include "cutline/policy/loader.h"

namespace {

using namespace cutline;

std::shared_ptr<const policy::Policy> load(int endpoints, const std::string& keys) {
  std::string list;
  for (int i = 0; i < endpoints; ++i) {
    list += std::string(i ? ", " : "") + "\"http://10.0." + std::to_string(i / 200) + "." +
            std::to_string(i % 200 + 1) + ":8081\"";
  }
  auto r = policy::load_policy_text(
      "listen:\n  - address: 127.0.0.1:8080\nupstreams:\n  - name: pool\n    endpoints: [" + list +
          "]\n" + keys + "policies:\n  - name: all\n",
      "bench.yaml");
  if (!r.ok()) std::abort();
  return r.policy;
}

void run(benchmark::State& state, const std::string& keys, bool with_reports, bool prompt) {
  const int n = static_cast<int>(state.range(0));
  auto policy = load(n, keys);
  base::MonotonicClock clock;
  auto pool = gateway::EndpointPool::create(policy->upstreams[0], clock, 1);
  if (with_reports) {
    int i = 0;
    for (auto& e : pool->endpoints()) {
      gateway::LoadSnapshot s;
      s.at_ns = clock.now_ns();
      s.waiting = i % 3;
      s.running = i % 5;
      s.reports_models = true;
      s.resident_models = {i % 2 ? "model-a" : "model-b"};
      e->set_load(s);
      ++i;
    }
  }
  const std::string text =
      "<|system|>You are a helpful assistant that answers briefly.<|user|>What is the capital of "
      "France?";
  gateway::PickRequest req;
  req.model = "model-a";
  if (prompt) req.prompt = text;
  for (auto _ : state) {
    gateway::EndpointLease lease = pool->pick(req);
    benchmark::DoNotOptimize(lease.endpoint_id());
    lease.report(gateway::EndpointOutcome::kSuccess);
  }
}

void BM_PickLeastRequest(benchmark::State& s) { run(s, "", false, false); }
void BM_PickRoundRobin(benchmark::State& s) { run(s, "    balance: round_robin\n", false, false); }
void BM_PickLoadAware(benchmark::State& s) {
  run(s, "    balance: load_aware\n    load_report: vllm\n", true, false);
}
void BM_PickResidencyAndAffinity(benchmark::State& s) {
  run(s, "    load_report: cutline\n    prefix_affinity: {bytes: 64}\n", true, true);
}

BENCHMARK(BM_PickLeastRequest)->Arg(1)->Arg(16);
BENCHMARK(BM_PickRoundRobin)->Arg(1)->Arg(16);
BENCHMARK(BM_PickLoadAware)->Arg(1)->Arg(16);
BENCHMARK(BM_PickResidencyAndAffinity)->Arg(1)->Arg(16);

}  // namespace

BENCHMARK_MAIN();
