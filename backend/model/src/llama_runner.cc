// LlamaRunner: loading (phase-timed) and the batched forward step over paged KV, for every
// architecture ModelConfig describes.
#include "cutline/model/llama_runner.h"

#include <cmath>
#include <string>

#include "cutline/base/clock.h"
#include "host_ops.h"
#include "rope_scaling.h"

namespace cutline::model {

using device::Buffer;
using device::DType;
using device::Weight;

struct LlamaRunner::Layer {
  Buffer attn_norm, ffn_norm;
  Buffer q_bias, k_bias, v_bias;                // qwen2 only
  Buffer q_norm, k_norm;                        // qk_norm: [head_dim] per head
  Buffer post_attn_norm, post_ffn_norm;         // post_norms
  Weight wq, wk, wv, wo, w_gate, w_up, w_down;  // fused tensors are split into row ranges
};

// Activations for up to `rows` tokens, regrown when a bigger step arrives.
struct LlamaRunner::Scratch {
  int64_t rows = 0;
  Buffer x, h, q, k, v, attn, gate, up, ints, logits_in, logits;
};

// One forward step's index arrays on the host, and where upload_index() put the two that
// forward() itself reads.
struct LlamaRunner::BatchIndex {
  std::vector<int32_t> ids, positions, slots, logit_rows, tables;
  std::vector<int64_t> logit_seqs;
  std::vector<device::AttentionToken> attn_tokens;
  int32_t max_pos = 0;
  const int32_t* d_ids = nullptr;
  const int32_t* d_logit_rows = nullptr;
};

namespace {

// Load phases are timed on the one monotonic clock (base/): they make up the load phase of a
// request's time to first token.
int64_t now_ns() {
  static const base::MonotonicClock clock;
  return clock.now_ns();
}
double ms_since(int64_t t0_ns) { return static_cast<double>(now_ns() - t0_ns) / 1e6; }

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
  const int64_t t0 = now_ns();
  std::vector<float> host(n);
  device::dequantize_row(*type, t->data, host.data(), n);
  report.convert_ms += ms_since(t0);
  auto buf = dev.alloc(n * 4);
  if (!buf.ok()) return std::move(buf).error();
  const int64_t t1 = now_ns();
  dev.upload(buf->data(), host.data(), n * 4);
  report.upload_ms += ms_since(t1);
  out = std::move(buf).value();
  return {};
}

// Rows [row_begin, row_begin + n_rows) of a 2-D tensor (all rows when n_rows < 0): fused tensors
// (phi3's attn_qkv, ffn_up) become one Weight per part, zero-copy on the CPU.
Status load_matrix(const GgufFile& file, device::Device& dev, std::string_view name, Weight& out,
                   LoadReport& report, int64_t row_begin = 0, int64_t n_rows = -1) {
  const GgufTensor* t = file.tensor(name);
  if (t == nullptr)
    return file.error(ErrorKind::kBadRequest, "tensor '" + std::string(name) + "' missing");
  auto type = device::dtype_from_ggml(static_cast<uint32_t>(t->type));
  if (!type) {
    return file.error(ErrorKind::kUnsupported,
                      "tensor '" + std::string(name) + "' has type " + tensor_type_name(t->type) +
                          " (supported: " + supported_tensor_types() + ")");
  }
  if (n_rows < 0) n_rows = t->rows();
  if (row_begin < 0 || row_begin + n_rows > t->rows()) {
    return file.error(ErrorKind::kBadRequest, "tensor '" + std::string(name) + "' has " +
                                                  std::to_string(t->rows()) + " rows, expected " +
                                                  std::to_string(row_begin + n_rows));
  }
  device::WeightLoadTiming timing;
  const uint8_t* data = t->data + row_begin * device::row_bytes(*type, t->shape[0]);
  auto w = dev.load_weight(data, *type, n_rows, t->shape[0], &timing);
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
  const int64_t t_read = now_ns();
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
  info.kv_bytes_per_token = c.kv_bytes_per_token();
  // Zero-copy (CPU): the file's tensors are what is resident; otherwise the device copies.
  info.weight_bytes = report.device_bytes > 0 ? report.device_bytes : r->file_->tensor_bytes();

  if (options.warmup) {
    const int64_t t0 = now_ns();
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
  const RopeFactors factors = rope_factors(f, c);
  if (!factors.divisors.empty()) {
    const auto n = static_cast<int64_t>(factors.divisors.size());
    auto buf = dev.alloc(n * 4);
    if (!buf.ok()) return std::move(buf).error();
    dev.upload(buf->data(), factors.divisors.data(), n * 4);
    rope_factors_ = std::move(buf).value();
  }
  rope_global_.freq_base = c.rope_freq_base;
  rope_global_.freq_scale = factors.freq_scale;
  rope_global_.n_rot = c.rope_dim;
  rope_global_.neox = c.rope_style == RopeStyle::kNeox;
  rope_global_.freq_factors = factors.divisors.empty() ? nullptr : rope_factors_.as<float>();
  rope_mscale_ = factors.mscale;
  rope_local_ = rope_global_;
  rope_local_.freq_base = c.rope_freq_base_local;
  if (c.local_rope_unscaled) {
    rope_local_.freq_scale = 1.0f;
    rope_local_.freq_factors = nullptr;
  }

  layers_.resize(c.n_layers);
  for (int32_t i = 0; i < c.n_layers; ++i) {
    if (Status s = load_layer(i, report); !s.ok()) return s;
  }
  return {};
}

// One block's weights: fused tensors split into row ranges, norms and biases as F32 vectors.
Status LlamaRunner::load_layer(int32_t i, LoadReport& report) {
  const GgufFile& f = *file_;
  device::Device& dev = *device_;
  const ModelConfig& c = config_;
  const int64_t q = c.q_dim(), kv = c.kv_dim(), ffn = c.ffn_dim;
  Layer& l = layers_[i];
  const std::string p = "blk." + std::to_string(i) + ".";
  struct Part {
    const char* tensor;
    Weight* w;
    int64_t row_begin, n_rows;
  };
  std::vector<Part> parts = {{"attn_output", &l.wo, 0, -1}, {"ffn_down", &l.w_down, 0, -1}};
  if (c.fused_qkv) {
    parts.push_back({"attn_qkv", &l.wq, 0, q});
    parts.push_back({"attn_qkv", &l.wk, q, kv});
    parts.push_back({"attn_qkv", &l.wv, q + kv, kv});
  } else {
    parts.push_back({"attn_q", &l.wq, 0, -1});
    parts.push_back({"attn_k", &l.wk, 0, -1});
    parts.push_back({"attn_v", &l.wv, 0, -1});
  }
  if (c.fused_gate_up) {
    parts.push_back({"ffn_up", &l.w_gate, 0, ffn});
    parts.push_back({"ffn_up", &l.w_up, ffn, ffn});
  } else {
    parts.push_back({"ffn_gate", &l.w_gate, 0, -1});
    parts.push_back({"ffn_up", &l.w_up, 0, -1});
  }
  for (const Part& part : parts) {
    if (Status s = load_matrix(f, dev, p + part.tensor + ".weight", *part.w, report, part.row_begin,
                               part.n_rows);
        !s.ok()) {
      return s;
    }
  }
  struct Vec {
    const char* tensor;
    Buffer* b;
    int64_t n;
    bool wanted;
  };
  for (const Vec& v :
       {Vec{"attn_norm.weight", &l.attn_norm, c.dim, true},
        Vec{"ffn_norm.weight", &l.ffn_norm, c.dim, true},
        Vec{"attn_q.bias", &l.q_bias, q, c.qkv_bias}, Vec{"attn_k.bias", &l.k_bias, kv, c.qkv_bias},
        Vec{"attn_v.bias", &l.v_bias, kv, c.qkv_bias},
        Vec{"attn_q_norm.weight", &l.q_norm, c.head_dim, c.qk_norm},
        Vec{"attn_k_norm.weight", &l.k_norm, c.head_dim, c.qk_norm},
        Vec{"post_attention_norm.weight", &l.post_attn_norm, c.dim, c.post_norms},
        Vec{"post_ffw_norm.weight", &l.post_ffn_norm, c.dim, c.post_norms}}) {
    if (!v.wanted) continue;
    if (Status s = load_vector(f, dev, p + v.tensor, v.n, *v.b, report); !s.ok()) return s;
  }
  return {};
}

Status LlamaRunner::allocate_kv(int32_t n_blocks, int32_t block_size) {
  if (n_blocks <= 0 || block_size <= 0) {
    return bad("allocate_kv: n_blocks and block_size must be positive");
  }
  const int64_t t0 = now_ns();
  kv_.reset();
  kv_blocks_ = 0;
  int64_t bytes = 0;
  if (__builtin_mul_overflow(int64_t{n_blocks} * block_size, info_.kv_bytes_per_token, &bytes)) {
    return make_error(ErrorKind::kExhausted, "kv cache of " + std::to_string(n_blocks) + " x " +
                                                 std::to_string(block_size) +
                                                 " tokens: the byte size overflows");
  }
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

// Grows the activation buffers to `n` rows and the index buffer to `n_ints` ints.
Status LlamaRunner::ensure_scratch(int64_t n, int64_t n_ints) {
  device::Device& dev = *device_;
  const ModelConfig& c = config_;
  Scratch& sc = *scratch_;
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
  return {};
}

Status LlamaRunner::forward(const ForwardBatch& batch, std::vector<float>& logits) {
  logits.clear();
  if (Status s = check_batch(batch); !s.ok()) return s;
  if (batch.steps.empty()) return {};
  device::Device& dev = *device_;
  const ModelConfig& c = config_;

  BatchIndex index;
  index_batch(batch, index);
  Step step;
  if (Status s = upload_index(index, step); !s.ok()) return s;

  const int64_t n = step.n;
  float* x = scratch_->x.as<float>();
  dev.embed(token_embd_, index.d_ids, n, x);
  if (c.embedding_scale != 1.0f) {
    HostView view(dev);
    scale_in_place(view.map(x, n * c.dim, true), n * c.dim, c.embedding_scale);
  }
  for (int32_t li = 0; li < c.n_layers; ++li) {
    attention_block(li, step);
    ffn_block(li, step);
  }
  return output_logits(index, logits);
}

// Lays the batch out token by token: ids, positions, KV slots and attention tokens, the
// concatenated block tables, and which rows (and sequences) want logits.
void LlamaRunner::index_batch(const ForwardBatch& batch, BatchIndex& index) const {
  for (const SequenceStep& s : batch.steps) {
    const int32_t table_begin = static_cast<int32_t>(index.tables.size());
    index.tables.insert(index.tables.end(), s.block_table.begin(), s.block_table.end());
    for (size_t i = 0; i < s.tokens.size(); ++i) {
      const int32_t pos = s.start_pos + static_cast<int32_t>(i);
      index.ids.push_back(s.tokens[i]);
      index.positions.push_back(pos);
      index.slots.push_back(s.block_table[pos / block_size_] * block_size_ + pos % block_size_);
      index.attn_tokens.push_back({pos, table_begin});
      index.max_pos = std::max(index.max_pos, pos);
    }
    if (s.want_logits) {
      index.logit_rows.push_back(static_cast<int32_t>(index.ids.size()) - 1);
      index.logit_seqs.push_back(s.seq_id);
    }
  }
}

// Grows the scratch to the batch, uploads the index arrays into its ints buffer in one layout
// (ids | positions | slots | logit rows | tables | tokens) and fills `step` for the blocks.
Status LlamaRunner::upload_index(BatchIndex& index, Step& step) {
  device::Device& dev = *device_;
  const int64_t n = static_cast<int64_t>(index.ids.size());
  const int64_t n_logits = static_cast<int64_t>(index.logit_rows.size());
  const int64_t n_ints = 4 * n + static_cast<int64_t>(index.tables.size()) + 2 * n;
  if (Status st = ensure_scratch(n, n_ints); !st.ok()) return st;
  int32_t* d_ids = scratch_->ints.as<int32_t>();
  int32_t* d_pos = d_ids + n;
  int32_t* d_slots = d_pos + n;
  int32_t* d_logit_rows = d_slots + n;
  int32_t* d_tables = d_logit_rows + n;
  auto* d_tokens = reinterpret_cast<device::AttentionToken*>(d_tables + index.tables.size());
  dev.upload(d_ids, index.ids.data(), n * 4);
  dev.upload(d_pos, index.positions.data(), n * 4);
  dev.upload(d_slots, index.slots.data(), n * 4);
  if (n_logits > 0) dev.upload(d_logit_rows, index.logit_rows.data(), n_logits * 4);
  dev.upload(d_tables, index.tables.data(), static_cast<int64_t>(index.tables.size()) * 4);
  dev.upload(d_tokens, index.attn_tokens.data(),
             n * static_cast<int64_t>(sizeof(device::AttentionToken)));
  index.d_ids = d_ids;
  index.d_logit_rows = d_logit_rows;

  step.n = n;
  step.d_pos = d_pos;
  step.d_slots = d_slots;
  step.tables = &index.tables;
  step.tokens = &index.attn_tokens;
  step.attn.block_tables = d_tables;
  step.attn.tokens = d_tokens;
  step.attn.n_tokens = static_cast<int32_t>(n);
  step.attn.max_pos = index.max_pos;
  return {};
}

// The output head for the rows that want logits (final norm, projection, soft-cap), then the
// step's sync; a non-finite logit fails the step rather than being sampled.
Status LlamaRunner::output_logits(const BatchIndex& index, std::vector<float>& logits) {
  device::Device& dev = *device_;
  const ModelConfig& c = config_;
  Scratch& sc = *scratch_;
  const int64_t n_logits = static_cast<int64_t>(index.logit_rows.size());
  if (n_logits > 0) {
    float* sel = sc.logits_in.as<float>();
    float* h = sc.h.as<float>();
    dev.gather_rows(sc.x.as<float>(), index.d_logit_rows, n_logits, c.dim, h);
    dev.rms_norm(h, output_norm_.as<float>(), n_logits, c.dim, c.rms_eps, sel);
    dev.matmul(sel, n_logits, c.tied_output ? token_embd_ : output_, sc.logits.as<float>());
    logits.resize(n_logits * c.vocab_size);
    dev.download(logits.data(), sc.logits.data(), static_cast<int64_t>(logits.size()) * 4);
  }
  if (Status s = dev.sync(); !s.ok()) return s;
  if (c.final_softcap > 0.0f) {
    soft_cap(logits.data(), static_cast<int64_t>(logits.size()), c.final_softcap);
  }
  for (int64_t r = 0; r < n_logits; ++r) {
    for (int32_t i = 0; i < c.vocab_size; ++i) {
      if (!std::isfinite(logits[r * c.vocab_size + i])) {
        logits.clear();
        return make_error(ErrorKind::kInternal, "sequence " + std::to_string(index.logit_seqs[r]) +
                                                    ": non-finite logit (NaN or Inf) at token " +
                                                    std::to_string(i) + "; not sampled");
      }
    }
  }
  return {};
}

// Pre-norm attention with its residual: norm, QKV (+bias), q/k norms, RoPE, KV write, attention
// (the device's, or the host's for a binding sliding window or a soft-cap), output projection,
// optional post-norm.
void LlamaRunner::attention_block(int32_t li, const Step& st) {
  device::Device& dev = *device_;
  const ModelConfig& c = config_;
  const Layer& l = layers_[li];
  Scratch& sc = *scratch_;
  const int64_t n = st.n, q_dim = c.q_dim(), kv_dim = c.kv_dim();
  float *x = sc.x.as<float>(), *h = sc.h.as<float>(), *q = sc.q.as<float>();
  float *k = sc.k.as<float>(), *v = sc.v.as<float>(), *attn = sc.attn.as<float>();
  const int64_t cache_rows = int64_t{kv_blocks_} * block_size_;
  float* k_cache = kv_.as<float>() + (int64_t{2} * li) * cache_rows * kv_dim;
  float* v_cache = k_cache + cache_rows * kv_dim;
  const bool local = c.is_local_layer(li);

  dev.rms_norm(x, l.attn_norm.as<float>(), n, c.dim, c.rms_eps, h);
  const device::Device::MatmulTarget qkv[] = {{&l.wq, q}, {&l.wk, k}, {&l.wv, v}};
  dev.matmuls(h, n, qkv, 3);
  if (c.qkv_bias) {
    dev.add_bias(q, l.q_bias.as<float>(), n, q_dim);
    dev.add_bias(k, l.k_bias.as<float>(), n, kv_dim);
    dev.add_bias(v, l.v_bias.as<float>(), n, kv_dim);
  }
  if (c.qk_norm) {
    dev.rms_norm(q, l.q_norm.as<float>(), n * c.n_heads, c.head_dim, c.rms_eps, q);
    dev.rms_norm(k, l.k_norm.as<float>(), n * c.n_kv_heads, c.head_dim, c.rms_eps, k);
  }
  const bool unscaled = local && c.local_rope_unscaled;
  const device::RopeParams& rope = local ? rope_local_ : rope_global_;
  dev.rope(q, st.d_pos, n, c.n_heads, c.head_dim, rope);
  dev.rope(k, st.d_pos, n, c.n_kv_heads, c.head_dim, rope);
  if (!unscaled && rope_mscale_ != 1.0f) {
    HostView view(dev);
    scale_rotated(view.map(q, n * q_dim, true), n, c.n_heads, c.head_dim, c.rope_dim, rope_mscale_);
    scale_rotated(view.map(k, n * kv_dim, true), n, c.n_kv_heads, c.head_dim, c.rope_dim,
                  rope_mscale_);
  }
  dev.kv_write(k_cache, v_cache, k, v, st.d_slots, n, kv_dim);

  const bool window_binds = local && st.attn.max_pos >= c.sliding_window;
  if (window_binds || c.attn_softcap > 0.0f) {
    HostView view(dev);
    WindowedAttention wa;
    wa.q = view.map(q, n * q_dim, false);
    wa.out = view.map(attn, n * q_dim, true);
    wa.k_cache = view.map(k_cache, cache_rows * kv_dim, false);
    wa.v_cache = view.map(v_cache, cache_rows * kv_dim, false);
    wa.block_tables = st.tables->data();
    wa.tokens = st.tokens->data();
    wa.n_tokens = n;
    wa.n_heads = c.n_heads;
    wa.n_kv_heads = c.n_kv_heads;
    wa.head_dim = c.head_dim;
    wa.block_size = block_size_;
    wa.scale = c.attention_scale;
    wa.window = local ? c.sliding_window : 0;
    wa.softcap = c.attn_softcap;
    windowed_attention(wa);
  } else {
    device::AttentionArgs aa = st.attn;
    aa.q = q;
    aa.out = attn;
    aa.k_cache = k_cache;
    aa.v_cache = v_cache;
    aa.n_heads = c.n_heads;
    aa.n_kv_heads = c.n_kv_heads;
    aa.head_dim = c.head_dim;
    aa.block_size = block_size_;
    aa.scale = c.attention_scale;
    dev.paged_attention(aa);
  }
  dev.matmul(attn, n, l.wo, h);
  if (c.post_norms) dev.rms_norm(h, l.post_attn_norm.as<float>(), n, c.dim, c.rms_eps, h);
  dev.add(x, h, n * c.dim, x);
}

// Pre-norm gated FFN with its residual: SwiGLU or GeGLU (tanh), optional post-norm.
void LlamaRunner::ffn_block(int32_t li, const Step& st) {
  device::Device& dev = *device_;
  const ModelConfig& c = config_;
  const Layer& l = layers_[li];
  Scratch& sc = *scratch_;
  const int64_t n = st.n;
  float *x = sc.x.as<float>(), *h = sc.h.as<float>();
  float *gate = sc.gate.as<float>(), *up = sc.up.as<float>();
  dev.rms_norm(x, l.ffn_norm.as<float>(), n, c.dim, c.rms_eps, h);
  const device::Device::MatmulTarget gate_up[] = {{&l.w_gate, gate}, {&l.w_up, up}};
  dev.matmuls(h, n, gate_up, 2);
  if (c.ffn_activation == FfnActivation::kGeluTanh) {
    HostView view(dev);
    float* g = view.map(gate, n * c.ffn_dim, true);
    geglu_tanh(g, view.map(up, n * c.ffn_dim, false), n * c.ffn_dim, g);
  } else {
    dev.swiglu(gate, up, n * c.ffn_dim, gate);
  }
  dev.matmul(gate, n, l.w_down, h);
  if (c.post_norms) dev.rms_norm(h, l.post_ffn_norm.as<float>(), n, c.dim, c.rms_eps, h);
  dev.add(x, h, n * c.dim, x);
}

}  // namespace cutline::model
