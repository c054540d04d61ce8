// engine_bench: the serving engine end to end on the real LlamaRunner (CPU device) over
// synthesized models. Two scenarios, each printed as a table:
//
//   stall:       4 streams decode steadily; a 2,048-token prompt arrives. For each
//                --max-step-tokens value: the streams' inter-token latency before the prompt
//                arrived (steady state, p50/p99) and while it was prefilled (p50/p99/max), the
//                ratio p99(during) / p50(steady) (target <= 1.5 with chunking), and the prompt's
//                TTFT. The largest value (>= 2,048 + 4) prefills in one step: the unchunked spike.
//   throughput:  c sequences (16-token prompts, --gen output tokens each, ignore_eos) at
//                c = 1, 2, 4, 8, 16: aggregate output tokens/s from the first add to the last
//                finish (prefill included), the same over the decode phase only (after every
//                sequence has its first token), and their ratios to c = 1 (target >= 5x at 8 on
//                CPU).
//
// The engine is driven with Engine::step() on this thread (the same code path as the engine
// thread) and token times are taken when each step's events are drained. Run by
// tests/bench/run_engine_bench.sh, not by ctest.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <sys/stat.h>
#include <time.h>

#include "cutline/device/device.h"
#include "cutline/engine/counter_rng.h"
#include "cutline/engine/engine.h"
#include "cutline/model/gguf_file.h"
#include "cutline/model/llama_runner.h"
#include "cutline/model/synth.h"
#include "cutline/model/tokenizer_loader.h"

namespace {

using namespace cutline;
using SteadyTime = std::chrono::steady_clock;

// --clock cpu: every time in the tables is CPU time of this thread (CLOCK_THREAD_CPUTIME_ID)
// instead of wall time. With --threads 1 the engine step runs entirely on this thread, so the
// figures are the steps' compute cost, unaffected by other processes on a loaded machine.
bool g_cpu_clock = false;

double now_ms() {
  if (g_cpu_clock) {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
  }
  return std::chrono::duration<double, std::milli>(SteadyTime::now().time_since_epoch()).count();
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = static_cast<size_t>(p / 100.0 * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

struct Loaded {
  std::string label;
  std::shared_ptr<const model::GgufFile> file;
  std::unique_ptr<model::Tokenizer> tokenizer;
  std::unique_ptr<model::LlamaRunner> runner;
};

std::unique_ptr<Loaded> load(const std::string& dir, const std::string& label,
                             const model::SynthOptions& o, int threads) {
  const std::string path = dir + "/engine_bench_" + label + ".gguf";
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    std::fprintf(stderr, "synthesizing %s ...\n", path.c_str());
    Status s = model::synthesize_tiny_model(o, path + ".tmp");
    if (!s.ok() || std::rename((path + ".tmp").c_str(), path.c_str()) != 0) {
      std::fprintf(stderr, "synth failed: %s\n", s.ok() ? "rename" : s.error().message.c_str());
      return nullptr;
    }
  }
  auto out = std::make_unique<Loaded>();
  out->label = label;
  auto file = model::GgufFile::open(path);
  if (!file.ok()) {
    std::fprintf(stderr, "%s\n", file.error().message.c_str());
    return nullptr;
  }
  out->file = std::shared_ptr<const model::GgufFile>(std::move(file).value());
  out->tokenizer = std::move(model::load_tokenizer(*out->file).value());
  auto dev = device::make_device(
      {.kind = device::DeviceKind::kCpu, .cpu_threads = threads, .cpu_isa = ""});
  if (!dev.ok()) return nullptr;
  auto runner = model::LlamaRunner::load(
      out->file, std::shared_ptr<device::Device>(std::move(dev).value()), {.name = label});
  if (!runner.ok()) {
    std::fprintf(stderr, "%s\n", runner.error().message.c_str());
    return nullptr;
  }
  out->runner = std::move(runner).value();
  std::fprintf(stderr, "%s: %.1f MiB of weights, %s\n", label.c_str(),
               static_cast<double>(out->runner->info().weight_bytes) / (1 << 20),
               out->runner->device().description().c_str());
  return out;
}

std::vector<int32_t> random_prompt(uint64_t seed, int n, int32_t vocab) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i)
    p.push_back(4 + static_cast<int32_t>(engine::counter_bits(seed, i) % (vocab - 4)));
  return p;
}

engine::AddRequest request(std::vector<int32_t> prompt, int64_t max_tokens, uint64_t seed) {
  engine::AddRequest r;
  r.prompt = std::move(prompt);
  r.sampling.temperature = 0.8f;
  r.sampling.seed = seed;
  r.stop.max_tokens = max_tokens;
  r.stop.ignore_eos = true;
  return r;
}

// ---- stall-free chunked prefill ----

// One scheduler setting of the stall scenario: "--budgets 16,64:256,4096" gives
// max_step_tokens 16; 64 with attention_positions_per_token 256; 4096 (one-step prefill).
struct StallConfig {
  int budget = 0;
  int attention_positions = 0;
  std::string label() const {
    return std::to_string(budget) +
           (attention_positions > 0 ? ":" + std::to_string(attention_positions) : "");
  }
};

std::vector<StallConfig> parse_stall_configs(const std::string& s) {
  std::vector<StallConfig> out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t comma = s.find(',', pos);
    if (comma == std::string::npos) comma = s.size();
    const std::string item = s.substr(pos, comma - pos);
    const size_t colon = item.find(':');
    StallConfig c;
    c.budget = std::atoi(item.substr(0, colon).c_str());
    if (colon != std::string::npos)
      c.attention_positions = std::atoi(item.substr(colon + 1).c_str());
    out.push_back(c);
    pos = comma + 1;
  }
  return out;
}

// Per setting: the 4 streams' ITL before the prompt arrived (steady, p50/p99), while it was
// prefilled (during, p50/p99/max) and in the 24 steps after its first token (after, p50: the
// same stream context lengths as at the end of the prefill, so it shows how much of "during"
// is the streams' own longer context rather than the prompt), the ratios of during p99 to the
// steady and after p50, and the prompt's TTFT.
void run_stall(Loaded& m, const std::vector<StallConfig>& configs, int prompt_len) {
  const int32_t vocab = m.runner->info().vocab_size;
  std::printf("\n[stall] model %s: 4 decoding streams, a %d-token prompt arrives\n",
              m.label.c_str(), prompt_len);
  std::printf("%14s %9s %9s %9s %9s %9s %9s %11s %10s %9s %6s\n", "budget[:attn]", "steady50",
              "steady99", "during50", "during99", "duringmx", "after50", "p99/steady", "p99/after",
              "ttft_ms", "steps");
  struct Row {
    std::string label;
    double steady = 0, p99 = 0, ttft = 0;
  };
  std::vector<Row> rows;
  for (const StallConfig& sc : configs) {
    engine::EngineConfig cfg;
    // Room for the prompt and for the 4 streams to grow by one token per step while it is
    // prefilled (up to prompt_len steps at the smallest budget): a preemption would measure
    // recompute, not chunking.
    cfg.num_blocks = (prompt_len + 4 * (prompt_len + 1024)) / 16 + 64;
    cfg.max_step_tokens = sc.budget;
    cfg.attention_positions_per_token = sc.attention_positions;
    cfg.prefix_caching = false;
    auto engine = engine::Engine::create(*m.runner, *m.tokenizer, cfg);
    if (!engine.ok()) {
      std::fprintf(stderr, "engine: %s\n", engine.error().message.c_str());
      return;
    }
    engine::Engine& e = **engine;
    std::vector<engine::SeqId> streams;
    for (int i = 0; i < 4; ++i)
      streams.push_back(*e.add(request(random_prompt(10 + i, 16, vocab), 100000, i)));
    std::map<engine::SeqId, double> last;
    std::map<engine::SeqId, int> count;
    std::vector<double> steady, during, after;
    std::vector<engine::EngineEvent> events;
    enum { kWarm, kSteady, kDuring, kAfter, kDone } phase = kWarm;
    int steady_steps = 0, during_steps = 0, after_steps = 0;
    double arrival = 0, ttft = 0;
    engine::SeqId big = -1;
    while (phase != kDone) {
      e.step();
      const double t = now_ms();
      events.clear();
      e.drain_events(events);
      bool big_done = false;
      for (const auto& ev : events) {
        if (ev.seq_id == big) {
          if (!ev.tokens.empty()) {
            ttft = t - arrival;
            big_done = true;
          }
          continue;
        }
        if (ev.tokens.empty()) continue;
        if (last.count(ev.seq_id)) {
          const double gap = t - last[ev.seq_id];
          if (phase == kSteady) steady.push_back(gap);
          if (phase == kDuring) during.push_back(gap);
          if (phase == kAfter) after.push_back(gap);
        }
        last[ev.seq_id] = t;
        ++count[ev.seq_id];
      }
      if (phase == kWarm && count.size() == 4 &&
          std::all_of(count.begin(), count.end(), [](auto& kv) { return kv.second >= 4; })) {
        phase = kSteady;
      } else if (phase == kSteady && ++steady_steps == 24) {
        big = *e.add(request(random_prompt(99, prompt_len, vocab), 1, 99));
        arrival = now_ms();
        phase = kDuring;
      } else if (phase == kDuring) {
        ++during_steps;  // the step that finished the prefill included
        if (big_done) phase = kAfter;
      } else if (phase == kAfter && ++after_steps == 24) {
        phase = kDone;
      }
    }
    // The first gap of each stream after the arrival spans the step that took the prompt in.
    const double s50 = percentile(steady, 50), a50 = percentile(after, 50);
    const double d99 = percentile(during, 99);
    std::printf("%14s %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %11.2f %10.2f %9.1f %6d\n",
                sc.label().c_str(), s50, percentile(steady, 99), percentile(during, 50), d99,
                during.empty() ? 0.0 : *std::max_element(during.begin(), during.end()), a50,
                s50 > 0 ? d99 / s50 : 0.0, a50 > 0 ? d99 / a50 : 0.0, ttft, during_steps);
    std::fflush(stdout);
    rows.push_back({sc.label(), s50, d99, ttft});
    for (auto id : streams) e.abort(id);
    while (!e.idle()) {
      e.step();
      events.clear();
      e.drain_events(events);
    }
  }
  if (rows.size() >= 2) {
    // The first setting is the chunked one to judge, the last the one-step (unchunked) prefill.
    const Row &c = rows.front(), &u = rows.back();
    std::printf(
        "summary %s: steady ITL p50 %.2f ms; chunked (%s) ITL p99 %.2f ms = %.2fx steady, TTFT "
        "%.0f ms; unchunked (%s) ITL p99 %.2f ms = %.1fx steady, TTFT %.0f ms (target <= 1.5x)\n",
        m.label.c_str(), c.steady, c.label.c_str(), c.p99, c.steady > 0 ? c.p99 / c.steady : 0.0,
        c.ttft, u.label.c_str(), u.p99, u.steady > 0 ? u.p99 / u.steady : 0.0, u.ttft);
  }
}

// ---- throughput under load ----

void run_throughput(Loaded& m, const std::vector<int>& levels, int gen) {
  const int32_t vocab = m.runner->info().vocab_size;
  std::printf("\n[throughput] model %s: 16-token prompts, %d output tokens each\n", m.label.c_str(),
              gen);
  std::printf("%11s %12s %10s %12s %8s %14s %10s\n", "concurrency", "output_tok", "wall_s",
              "tok_per_s", "vs_c1", "decode_tok_s", "vs_c1");
  double base = 0, decode_base = 0;
  for (int c : levels) {
    engine::EngineConfig cfg;
    cfg.num_blocks = c * ((16 + gen) / 16 + 2) + 16;
    auto engine = engine::Engine::create(*m.runner, *m.tokenizer, cfg);
    if (!engine.ok()) return;
    engine::Engine& e = **engine;
    const double t0 = now_ms();
    for (int i = 0; i < c; ++i) (void)e.add(request(random_prompt(1000 + i, 16, vocab), gen, i));
    // Decode phase: from the step where every sequence has its first token (all prompts done)
    // to the last step; tokens emitted in it.
    int64_t tokens = 0, decode_tokens = 0;
    std::map<engine::SeqId, bool> started;
    double decode_t0 = 0, t_end = 0;
    std::vector<engine::EngineEvent> events;
    while (!e.idle()) {
      e.step();
      const double t = now_ms();
      events.clear();
      e.drain_events(events);
      for (const auto& ev : events) {
        tokens += static_cast<int64_t>(ev.tokens.size());
        if (decode_t0 > 0) decode_tokens += static_cast<int64_t>(ev.tokens.size());
        if (!ev.tokens.empty()) started[ev.seq_id] = true;
      }
      if (decode_t0 == 0 && static_cast<int>(started.size()) == c) decode_t0 = t;
      t_end = t;
    }
    const double wall_s = (t_end - t0) / 1000.0;
    const double tps = static_cast<double>(tokens) / wall_s;
    const double decode_s = (t_end - decode_t0) / 1000.0;
    const double dtps = decode_s > 0 ? static_cast<double>(decode_tokens) / decode_s : 0.0;
    if (c == levels.front()) {
      base = tps;
      decode_base = dtps;
    }
    std::printf("%11d %12lld %10.2f %12.1f %8.2f %14.1f %10.2f\n", c,
                static_cast<long long>(tokens), wall_s, tps, base > 0 ? tps / base : 0.0, dtps,
                decode_base > 0 ? dtps / decode_base : 0.0);
    std::fflush(stdout);
  }
}

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t comma = s.find(',', pos);
    if (comma == std::string::npos) comma = s.size();
    out.push_back(std::atoi(s.substr(pos, comma - pos).c_str()));
    pos = comma + 1;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = "/tmp", scenario = "all", models = "tiny,medium,large";
  int threads = 0, gen = 32, prompt_len = 2048, large_layers = 12;
  std::vector<StallConfig> budgets = parse_stall_configs("16,32,64,512,4096");
  std::vector<int> levels{1, 2, 4, 8, 16};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--dir")
      dir = next();
    else if (a == "--scenario")
      scenario = next();
    else if (a == "--models")
      models = next();
    else if (a == "--threads")
      threads = std::atoi(next().c_str());
    else if (a == "--gen")
      gen = std::atoi(next().c_str());
    else if (a == "--prompt")
      prompt_len = std::atoi(next().c_str());
    else if (a == "--budgets")
      budgets = parse_stall_configs(next());
    else if (a == "--levels")
      levels = parse_list(next());
    else if (a == "--clock")
      g_cpu_clock = next() == "cpu";
    else if (a == "--large-layers")
      large_layers = std::atoi(next().c_str());
    else {
      std::fprintf(stderr,
                   "usage: engine_bench [--dir DIR] [--scenario all|stall|throughput] [--models "
                   "tiny,medium,large,large_q8] [--threads N] [--gen N] [--prompt N] [--budgets "
                   "16,64:256,4096] "
                   "[--levels 1,2,4,8,16] [--large-layers N] [--clock wall|cpu]\n");
      return 2;
    }
  }
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::printf("engine_bench: %d CPU threads, %s clock\n", threads,
              g_cpu_clock ? "thread CPU" : "wall");
  if (g_cpu_clock && threads != 1)
    std::fprintf(stderr, "note: --clock cpu counts this thread only; use --threads 1\n");

  // tiny: the built-in default; medium: a model whose 2,048-token prefill is long next to a
  // decode step; large: >= 1 GiB of F16 weights (12 layers of dim 2048); large_q8: Q8_0.
  std::map<std::string, model::SynthOptions> specs;
  specs["tiny"] = model::SynthOptions{};
  specs["tiny"].context = 4096;
  model::SynthOptions medium;
  medium.layers = 4;
  medium.dim = 512;
  medium.heads = 8;
  medium.kv_heads = 4;
  medium.context = 4096;
  specs["medium"] = medium;
  model::SynthOptions large;
  large.layers = large_layers;
  large.dim = 2048;
  large.heads = 16;
  large.kv_heads = 4;
  large.ffn = 5632;
  large.context = 4096;
  specs["large"] = large;
  // large_q8: >= 1 GiB of Q8_0 weights (24 layers of dim 2048), for the integer matmul kernels.
  model::SynthOptions large_q8 = large;
  large_q8.layers = 2 * large_layers;
  large_q8.type = model::TensorType::kQ8_0;
  specs["large_q8"] = large_q8;

  for (const std::string& name : [&] {
         std::vector<std::string> v;
         size_t pos = 0;
         while (pos < models.size()) {
           size_t c = models.find(',', pos);
           if (c == std::string::npos) c = models.size();
           v.push_back(models.substr(pos, c - pos));
           pos = c + 1;
         }
         return v;
       }()) {
    if (!specs.count(name)) {
      std::fprintf(stderr, "unknown model %s\n", name.c_str());
      return 2;
    }
    auto m = load(dir, name, specs[name], threads);
    if (!m) return 1;
    if (scenario == "all" || scenario == "stall") run_stall(*m, budgets, prompt_len);
    if (scenario == "all" || scenario == "throughput") run_throughput(*m, levels, gen);
  }
  return 0;
}
