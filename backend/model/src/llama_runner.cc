// LlamaRunner: loading (phase-timed) and the batched forward step over paged KV.
#include "cutline/model/llama_runner.h"

#include <chrono>
#include <cmath>
#include <string>

namespace cutline::model {

using device::Buffer;
using device::DType;
using device::Weight;

struct LlamaRunner::Layer {
  Buffer attn_norm, ffn_norm;
  Buffer q_bias, k_bias, v_bias;  // qwen2 only
  Weight wq, wk, wv, wo, w_gate, w_up, w_down;
};

// Activations for up to `rows` tokens, regrown when a bigger step arrives.
struct LlamaRunner::Scratch {
  int64_t rows = 0;
  Buffer x, h, q, k, v, attn, gate, up, ints, logits_in, logits;
};

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

Error bad(std::string message) { return make_error(ErrorKind::kBadRequest, std::move(message)); }

// Copies a 1-D tensor (any supported type) to the device as F32.
Status load_vector(const GgufFile& file, device::Device& dev, std::string_view name, int64_t n,
                   Buffer& out, LoadReport& report) {
  const GgufTensor* t = file.tensor(name);
  if (t == nullptr || t->n_elements != n) {
    return file.error(ErrorKind::kBadRequest, "tensor '" + std::string(name) + "' missing or not " +
                                                  std::to_string(n) + " elements");
  }
  auto type = device::dtype_from_ggml(static_cast<uint32_t>(t->type));
  if (!type) {
    return file.error(ErrorKind::kUnsupported,
                      "tensor '" + std::string(name) + "' has type " + tensor_type_name(t->type));
  }
  const auto t0 = Clock::now();
  std::vector<float> host(n);
  device::dequantize_row(*type, t->data, host.data(), n);
  report.convert_ms += ms_since(t0);
  auto buf = dev.alloc(n * 4);
  if (!buf.ok()) return std::move(buf).error();
  const auto t1 = Clock::now();
  dev.upload(buf->data(), host.data(), n * 4);
  report.upload_ms += ms_since(t1);
  out = std::move(buf).value();
  return {};
}

Status load_matrix(const GgufFile& file, device::Device& dev, std::string_view name, Weight& out,
                   LoadReport& report) {
  const GgufTensor* t = file.tensor(name);
  if (t == nullptr)
    return file.error(ErrorKind::kBadRequest, "tensor '" + std::string(name) + "' missing");
  auto type = device::dtype_from_ggml(static_cast<uint32_t>(t->type));
  if (!type) {
    return file.error(ErrorKind::kUnsupported,
                      "tensor '" + std::string(name) + "' has type " + tensor_type_name(t->type) +
                          " (supported: " + supported_tensor_types() + ")");
  }
  device::WeightLoadTiming timing;
  auto w = dev.load_weight(t->data, *type, t->rows(), t->shape[0], &timing);
  if (!w.ok()) {
    return file.error(w.error().kind, "tensor '" + std::string(name) + "': " + w.error().message);
  }
  report.convert_ms += timing.convert_ms;
  report.upload_ms += timing.upload_ms;
  report.device_bytes += timing.device_bytes;
  out = std::move(w).value();
  return {};
}

// Reads one byte per page of every tensor so that the bytes are in memory before the first step
// (what "read" costs with a cold page cache). The sum is returned so the loop is not elided.
uint64_t touch_pages(const GgufFile& file, int64_t& bytes) {
  uint64_t sum = 0;
  for (const GgufTensor& t : file.tensors()) {
    for (int64_t i = 0; i < t.n_bytes; i += 4096) sum += t.data[i];
    bytes += t.n_bytes;
  }
  return sum;
}

}  // namespace

LlamaRunner::~LlamaRunner() = default;

Result<std::unique_ptr<LlamaRunner>> LlamaRunner::load(std::shared_ptr<const GgufFile> file,
                                                       std::shared_ptr<device::Device> device,
                                                       const LlamaLoadOptions& options) {
  auto config = load_model_config(*file);
  if (!config.ok()) return std::move(config).error();
  std::unique_ptr<LlamaRunner> r(new LlamaRunner());
  r->file_ = std::move(file);
  r->device_ = std::move(device);
  r->config_ = std::move(config).value();
  r->scratch_ = std::make_unique<Scratch>();
  const ModelConfig& c = r->config_;

  LoadReport report;
  const auto t_read = Clock::now();
  volatile uint64_t sink = touch_pages(*r->file_, report.bytes_read);
  (void)sink;
  report.read_ms = ms_since(t_read);
  if (Status s = r->load_weights(report); !s.ok()) return std::move(s).error();

  ModelInfo& info = r->info_;
  info.name = !options.name.empty() ? options.name : c.name;
  info.architecture = c.architecture;
  info.vocab_size = c.vocab_size;
  info.context_length = c.context_length;
  info.n_layers = c.n_layers;
  info.n_kv_heads = c.n_kv_heads;
  info.head_dim = c.head_dim;
  info.kv_bytes_per_token = int64_t{2} * c.n_layers * c.kv_dim() * 4;
  // Zero-copy (CPU): the file's tensors are what is resident; otherwise the device copies.
  info.weight_bytes = report.device_bytes > 0 ? report.device_bytes : r->file_->tensor_bytes();

  if (options.warmup) {
    const auto t0 = Clock::now();
    if (Status s = r->allocate_kv(1, 16); !s.ok()) return std::move(s).error();
    const int32_t token = 0, block = 0;
    ForwardBatch batch;
    batch.steps.push_back(SequenceStep{.seq_id = 0,
                                       .tokens = {&token, 1},
                                       .start_pos = 0,
                                       .block_table = {&block, 1},
                                       .want_logits = true});
    std::vector<float> logits;
    if (Status s = r->forward(batch, logits); !s.ok()) return std::move(s).error();
    r->kv_.reset();
    r->kv_blocks_ = 0;
    report.warmup_ms = ms_since(t0);
  }
  r->report_ = report;
  return r;
}

Status LlamaRunner::load_weights(LoadReport& report) {
  const GgufFile& f = *file_;
  device::Device& dev = *device_;
  const ModelConfig& c = config_;
  if (Status s = load_matrix(f, dev, "token_embd.weight", token_embd_, report); !s.ok()) return s;
  if (!c.tied_output) {
    if (Status s = load_matrix(f, dev, "output.weight", output_, report); !s.ok()) return s;
  }
  if (Status s = load_vector(f, dev, "output_norm.weight", c.dim, output_norm_, report); !s.ok())
    return s;
  if (c.rope_freq_factors) {
    if (Status s = load_vector(f, dev, "rope_freqs.weight", c.rope_dim / 2, rope_factors_, report);
        !s.ok()) {
      return s;
    }
  }
  layers_.resize(c.n_layers);
  for (int32_t i = 0; i < c.n_layers; ++i) {
    Layer& l = layers_[i];
    const std::string p = "blk." + std::to_string(i) + ".";
    for (auto [name, w] : {std::pair{"attn_q", &l.wq},
                           {"attn_k", &l.wk},
                           {"attn_v", &l.wv},
                           {"attn_output", &l.wo},
                           {"ffn_gate", &l.w_gate},
                           {"ffn_up", &l.w_up},
                           {"ffn_down", &l.w_down}}) {
      if (Status s = load_matrix(f, dev, p + name + ".weight", *w, report); !s.ok()) return s;
    }
    if (Status s = load_vector(f, dev, p + "attn_norm.weight", c.dim, l.attn_norm, report); !s.ok())
      return s;
    if (Status s = load_vector(f, dev, p + "ffn_norm.weight", c.dim, l.ffn_norm, report); !s.ok())
      return s;
    if (c.qkv_bias) {
      if (Status s = load_vector(f, dev, p + "attn_q.bias", c.q_dim(), l.q_bias, report); !s.ok())
        return s;
      if (Status s = load_vector(f, dev, p + "attn_k.bias", c.kv_dim(), l.k_bias, report); !s.ok())
        return s;
      if (Status s = load_vector(f, dev, p + "attn_v.bias", c.kv_dim(), l.v_bias, report); !s.ok())
        return s;
    }
  }
  return {};
}

Status LlamaRunner::allocate_kv(int32_t n_blocks, int32_t block_size) {
  if (n_blocks <= 0 || block_size <= 0) {
    return bad("allocate_kv: n_blocks and block_size must be positive");
  }
  const auto t0 = Clock::now();
  kv_.reset();
  kv_blocks_ = 0;
  const int64_t bytes = int64_t{n_blocks} * block_size * info_.kv_bytes_per_token;
  auto buf = device_->alloc(bytes);
  if (!buf.ok()) {
    return make_error(ErrorKind::kExhausted, "kv cache of " + std::to_string(n_blocks) + " x " +
                                                 std::to_string(block_size) + " tokens (" +
                                                 std::to_string(bytes) +
                                                 " bytes): " + buf.error().message);
  }
  kv_ = std::move(buf).value();
  kv_blocks_ = n_blocks;
  block_size_ = block_size;
  report_.kv_alloc_ms = ms_since(t0);
  return {};
}

Status LlamaRunner::check_batch(const ForwardBatch& batch) const {
  if (kv_blocks_ == 0) return make_error(ErrorKind::kInternal, "forward before allocate_kv");
  for (const SequenceStep& s : batch.steps) {
    const std::string seq = "sequence " + std::to_string(s.seq_id) + ": ";
    if (s.tokens.empty()) return bad(seq + "step has no tokens");
    for (int32_t t : s.tokens) {
      if (t < 0 || t >= config_.vocab_size) {
        return bad(seq + "token id " + std::to_string(t) + " out of range [0, " +
                   std::to_string(config_.vocab_size) + ")");
      }
    }
    const int64_t end = int64_t{s.start_pos} + static_cast<int64_t>(s.tokens.size());
    if (s.start_pos < 0 || end > config_.context_length) {
      return bad(seq + "positions [" + std::to_string(s.start_pos) + ", " + std::to_string(end) +
                 ") exceed the context window of " + std::to_string(config_.context_length));
    }
    if (static_cast<int64_t>(s.block_table.size()) * block_size_ < end) {
      return bad(seq + "block table of " + std::to_string(s.block_table.size()) +
                 " blocks is too short for " + std::to_string(end) + " positions");
    }
    for (int32_t b : s.block_table) {
      if (b < 0 || b >= kv_blocks_) {
        return bad(seq + "block id " + std::to_string(b) + " out of range [0, " +
                   std::to_string(kv_blocks_) + ")");
      }
    }
  }
  return {};
}

Status LlamaRunner::forward(const ForwardBatch& batch, std::vector<float>& logits) {
  logits.clear();
  if (Status s = check_batch(batch); !s.ok()) return s;
  if (batch.steps.empty()) return {};
  device::Device& dev = *device_;
  const ModelConfig& c = config_;

  // Host-side index arrays, uploaded once: ids | positions | slots | logit rows | tables | tokens.
  std::vector<int32_t> ids, positions, slots, logit_rows, tables;
  std::vector<int64_t> logit_seqs;
  std::vector<device::AttentionToken> attn_tokens;
  int32_t max_pos = 0;
  for (const SequenceStep& s : batch.steps) {
    const int32_t table_begin = static_cast<int32_t>(tables.size());
    tables.insert(tables.end(), s.block_table.begin(), s.block_table.end());
    for (size_t i = 0; i < s.tokens.size(); ++i) {
      const int32_t pos = s.start_pos + static_cast<int32_t>(i);
      ids.push_back(s.tokens[i]);
      positions.push_back(pos);
      slots.push_back(s.block_table[pos / block_size_] * block_size_ + pos % block_size_);
      attn_tokens.push_back({pos, table_begin});
      max_pos = std::max(max_pos, pos);
    }
    if (s.want_logits) {
      logit_rows.push_back(static_cast<int32_t>(ids.size()) - 1);
      logit_seqs.push_back(s.seq_id);
    }
  }
  const int64_t n = static_cast<int64_t>(ids.size());
  const int64_t n_logits = static_cast<int64_t>(logit_rows.size());

  Scratch& sc = *scratch_;
  const int64_t n_ints = 4 * n + static_cast<int64_t>(tables.size()) + 2 * n;
  if (sc.rows < n || sc.ints.bytes() < n_ints * 4) {
    const int64_t rows = std::max<int64_t>(n, sc.rows);
    auto grow = [&](Buffer& b, int64_t floats) -> Status {
      auto r = dev.alloc(floats * 4);
      if (!r.ok()) return std::move(r).error();
      b = std::move(r).value();
      return {};
    };
    for (auto [buf, width] : {std::pair{&sc.x, int64_t{c.dim}},
                              {&sc.h, int64_t{c.dim}},
                              {&sc.q, int64_t{c.q_dim()}},
                              {&sc.k, int64_t{c.kv_dim()}},
                              {&sc.v, int64_t{c.kv_dim()}},
                              {&sc.attn, int64_t{c.q_dim()}},
                              {&sc.gate, int64_t{c.ffn_dim}},
                              {&sc.up, int64_t{c.ffn_dim}},
                              {&sc.logits_in, int64_t{c.dim}},
                              {&sc.logits, int64_t{c.vocab_size}}}) {
      if (Status s = grow(*buf, rows * width); !s.ok()) return s;
    }
    if (Status s = grow(sc.ints, std::max(n_ints, int64_t{4} * rows + 1024)); !s.ok()) return s;
    sc.rows = rows;
  }
  int32_t* d_ids = sc.ints.as<int32_t>();
  int32_t* d_pos = d_ids + n;
  int32_t* d_slots = d_pos + n;
  int32_t* d_logit_rows = d_slots + n;
  int32_t* d_tables = d_logit_rows + n;
  auto* d_tokens = reinterpret_cast<device::AttentionToken*>(d_tables + tables.size());
  dev.upload(d_ids, ids.data(), n * 4);
  dev.upload(d_pos, positions.data(), n * 4);
  dev.upload(d_slots, slots.data(), n * 4);
  if (n_logits > 0) dev.upload(d_logit_rows, logit_rows.data(), n_logits * 4);
  dev.upload(d_tables, tables.data(), static_cast<int64_t>(tables.size()) * 4);
  dev.upload(d_tokens, attn_tokens.data(),
             n * static_cast<int64_t>(sizeof(device::AttentionToken)));

  float* x = sc.x.as<float>();
  float* h = sc.h.as<float>();
  float* q = sc.q.as<float>();
  float* k = sc.k.as<float>();
  float* v = sc.v.as<float>();
  float* attn = sc.attn.as<float>();
  float* gate = sc.gate.as<float>();
  float* up = sc.up.as<float>();

  device::RopeParams rope;
  rope.freq_base = c.rope_freq_base;
  rope.freq_scale = 1.0f / c.rope_linear_scale;
  rope.n_rot = c.rope_dim;
  rope.neox = c.rope_style == RopeStyle::kNeox;
  rope.freq_factors = c.rope_freq_factors ? rope_factors_.as<float>() : nullptr;

  const int64_t cache_rows = int64_t{kv_blocks_} * block_size_;
  device::AttentionArgs aa;
  aa.q = q;
  aa.out = attn;
  aa.block_tables = d_tables;
  aa.tokens = d_tokens;
  aa.n_tokens = static_cast<int32_t>(n);
  aa.n_heads = c.n_heads;
  aa.n_kv_heads = c.n_kv_heads;
  aa.head_dim = c.head_dim;
  aa.block_size = block_size_;
  aa.max_pos = max_pos;
  aa.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));

  dev.embed(token_embd_, d_ids, n, x);
  for (int32_t li = 0; li < c.n_layers; ++li) {
    const Layer& l = layers_[li];
    float* k_cache = kv_.as<float>() + (int64_t{2} * li) * cache_rows * c.kv_dim();
    float* v_cache = k_cache + cache_rows * c.kv_dim();
    dev.rms_norm(x, l.attn_norm.as<float>(), n, c.dim, c.rms_eps, h);
    dev.matmul(h, n, l.wq, q);
    dev.matmul(h, n, l.wk, k);
    dev.matmul(h, n, l.wv, v);
    if (c.qkv_bias) {
      dev.add_bias(q, l.q_bias.as<float>(), n, c.q_dim());
      dev.add_bias(k, l.k_bias.as<float>(), n, c.kv_dim());
      dev.add_bias(v, l.v_bias.as<float>(), n, c.kv_dim());
    }
    dev.rope(q, d_pos, n, c.n_heads, c.head_dim, rope);
    dev.rope(k, d_pos, n, c.n_kv_heads, c.head_dim, rope);
    dev.kv_write(k_cache, v_cache, k, v, d_slots, n, c.kv_dim());
    aa.k_cache = k_cache;
    aa.v_cache = v_cache;
    dev.paged_attention(aa);
    dev.matmul(attn, n, l.wo, h);
    dev.add(x, h, n * c.dim, x);
    dev.rms_norm(x, l.ffn_norm.as<float>(), n, c.dim, c.rms_eps, h);
    dev.matmul(h, n, l.w_gate, gate);
    dev.matmul(h, n, l.w_up, up);
    dev.swiglu(gate, up, n * c.ffn_dim, gate);
    dev.matmul(gate, n, l.w_down, h);
    dev.add(x, h, n * c.dim, x);
  }
  if (n_logits > 0) {
    float* sel = sc.logits_in.as<float>();
    dev.gather_rows(x, d_logit_rows, n_logits, c.dim, h);
    dev.rms_norm(h, output_norm_.as<float>(), n_logits, c.dim, c.rms_eps, sel);
    dev.matmul(sel, n_logits, c.tied_output ? token_embd_ : output_, sc.logits.as<float>());
    logits.resize(n_logits * c.vocab_size);
    dev.download(logits.data(), sc.logits.data(), static_cast<int64_t>(logits.size()) * 4);
  }
  if (Status s = dev.sync(); !s.ok()) return s;
  for (int64_t r = 0; r < n_logits; ++r) {
    for (int32_t i = 0; i < c.vocab_size; ++i) {
      if (!std::isfinite(logits[r * c.vocab_size + i])) {
        logits.clear();
        return make_error(ErrorKind::kInternal, "sequence " + std::to_string(logit_seqs[r]) +
                                                    ": non-finite logit (NaN or Inf) at token " +
                                                    std::to_string(i) + "; not sampled");
      }
    }
  }
  return {};
}

}  // namespace cutline::model
