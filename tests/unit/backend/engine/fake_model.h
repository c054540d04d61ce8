#pragma once
// Deterministic fake ModelRunner and Tokenizer for engine tests and benchmarks.
//
// FakeRunner keeps a real paged "KV cache": each slot stores a hash of the whole token history
// up to that position, written through the block table the engine passes and read back through
// it. Logits for a position are a pure function of that history hash, so a sequence's logits
// depend only on its own tokens — the runner is batch-invariant by construction — and any
// mistake in the engine's block tables (wrong block, shared block with different contents,
// missing K/V) changes the logits or is reported as an error, which the tests notice.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cutline/engine/counter_rng.h"
#include "cutline/model/model_runner.h"
#include "cutline/model/tokenizer.h"

namespace cutline::engine::testing {

struct FakeStepRecord {
  struct Entry {
    int64_t seq_id;
    int32_t start_pos;
    int32_t n_tokens;
    bool want_logits;
  };
  std::vector<Entry> entries;
  int32_t num_tokens() const {
    int32_t n = 0;
    for (const auto& e : entries) n += e.n_tokens;
    return n;
  }
};

class FakeRunner : public model::ModelRunner {
 public:
  explicit FakeRunner(int32_t vocab = 64, int32_t context_length = 4096,
                      int64_t kv_bytes_per_token = 64) {
    info_.name = "fake";
    info_.architecture = "llama";
    info_.vocab_size = vocab;
    info_.context_length = context_length;
    info_.n_layers = 1;
    info_.n_kv_heads = 1;
    info_.head_dim = 8;
    info_.kv_bytes_per_token = kv_bytes_per_token;
  }

  const model::ModelInfo& info() const override { return info_; }

  Status allocate_kv(int32_t n_blocks, int32_t block_size) override {
    n_blocks_ = n_blocks;
    block_size_ = block_size;
    slots_.assign(static_cast<size_t>(n_blocks) * block_size, 0);
    written_.assign(slots_.size(), false);
    return {};
  }

  Status forward(const model::ForwardBatch& batch, std::vector<float>& logits) override {
    if (fail_next_) {
      fail_next_ = false;
      return make_error(ErrorKind::kInternal, "injected failure");
    }
    FakeStepRecord rec;
    logits.clear();
    for (const auto& s : batch.steps) {
      rec.entries.push_back(
          {s.seq_id, s.start_pos, static_cast<int32_t>(s.tokens.size()), s.want_logits});
      const int64_t end = s.start_pos + static_cast<int64_t>(s.tokens.size());
      if (end > info_.context_length)
        return make_error(ErrorKind::kBadRequest, "position past the context window");
      if (static_cast<int64_t>(s.block_table.size()) * block_size_ < end)
        return make_error(ErrorKind::kBadRequest, "block table too short");
      uint64_t h = 0x1234;
      if (s.start_pos > 0) {
        const size_t prev = slot(s.block_table, s.start_pos - 1);
        if (!written_[prev]) return make_error(ErrorKind::kBadRequest, "reads unwritten KV");
        h = slots_[prev];
      }
      for (size_t i = 0; i < s.tokens.size(); ++i) {
        const int32_t t = s.tokens[i];
        if (t < 0 || t >= info_.vocab_size)
          return make_error(ErrorKind::kBadRequest, "token out of range");
        const int32_t pos = s.start_pos + static_cast<int32_t>(i);
        h = mix64(h ^ mix64(static_cast<uint64_t>(t) * 0x9E37u + static_cast<uint64_t>(pos)));
        const size_t at = slot(s.block_table, pos);
        slots_[at] = h;
        written_[at] = true;
      }
      if (s.want_logits) {
        for (int32_t v = 0; v < info_.vocab_size; ++v) {
          float l = static_cast<float>(counter_uniform(h, static_cast<uint64_t>(v)) * 8.0 - 4.0);
          if (v == eos_id_) l += eos_bias_;
          logits.push_back(l);
        }
      }
    }
    steps_.push_back(std::move(rec));
    if (on_forward_) on_forward_(batch);
    return {};
  }

  int64_t device_free_bytes() const override { return 1'000'000; }

  // Test knobs.
  void set_eos(int32_t id, float bias) {
    eos_id_ = id;
    eos_bias_ = bias;
  }
  void fail_next() { fail_next_ = true; }
  void on_forward(std::function<void(const model::ForwardBatch&)> f) { on_forward_ = std::move(f); }
  const std::vector<FakeStepRecord>& steps() const { return steps_; }
  int32_t n_blocks() const { return n_blocks_; }

 private:
  size_t slot(std::span<const int32_t> table, int32_t pos) const {
    return static_cast<size_t>(table[pos / block_size_]) * block_size_ + pos % block_size_;
  }

  model::ModelInfo info_;
  int32_t n_blocks_ = 0;
  int32_t block_size_ = 16;
  std::vector<uint64_t> slots_;
  std::vector<bool> written_;
  int32_t eos_id_ = 1;
  float eos_bias_ = -100.0f;  // EOS practically never sampled unless a test raises it
  bool fail_next_ = false;
  std::function<void(const model::ForwardBatch&)> on_forward_;
  std::vector<FakeStepRecord> steps_;
};

// Vocabulary: 0 <s> (BOS, control), 1 </s> (EOS, control), 2..27 'a'..'z', 28 ' ', 29 '\n',
// 30 "ab", 31 "cd", 32 "\xC3" and 33 "\xA9" (the two bytes of 'é'), then two-letter pieces.
class FakeTokenizer : public model::Tokenizer {
 public:
  explicit FakeTokenizer(int32_t vocab = 64) {
    for (int32_t id = 0; id < vocab; ++id) pieces_.push_back(piece(id));
  }
  int32_t vocab_size() const override { return static_cast<int32_t>(pieces_.size()); }
  std::vector<int32_t> encode(std::string_view text, bool add_bos) const override {
    std::vector<int32_t> out;
    if (add_bos) out.push_back(0);
    for (char c : text) {
      if (c >= 'a' && c <= 'z')
        out.push_back(2 + (c - 'a'));
      else if (c == '\n')
        out.push_back(29);
      else
        out.push_back(28);
    }
    return out;
  }
  std::string_view token_bytes(int32_t id) const override {
    if (id < 0 || id >= vocab_size()) return {};
    return pieces_[id];
  }
  int32_t special_token_id(std::string_view text) const override {
    if (text == "<s>") return 0;
    if (text == "</s>") return 1;
    return -1;
  }
  int32_t bos_id() const override { return 0; }
  std::span<const int32_t> eos_ids() const override { return eos_; }
  bool is_control(int32_t id) const override { return id == 0 || id == 1; }

 private:
  static std::string piece(int32_t id) {
    if (id <= 1) return "";
    if (id < 28) return std::string(1, static_cast<char>('a' + id - 2));
    if (id == 28) return " ";
    if (id == 29) return "\n";
    if (id == 30) return "ab";
    if (id == 31) return "cd";
    if (id == 32) return "\xC3";
    if (id == 33) return "\xA9";
    const int32_t k = id - 34;
    return std::string{static_cast<char>('a' + k % 26), static_cast<char>('a' + (k / 26 + 4) % 26)};
  }
  std::vector<std::string> pieces_;
  std::vector<int32_t> eos_{1};
};

}  // namespace cutline::engine::testing
