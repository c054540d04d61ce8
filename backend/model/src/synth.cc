#include "cutline/model/synth.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "cutline/device/quant.h"
#include "cutline/model/bpe_trainer.h"
#include "cutline/model/gguf_file.h"
#include "cutline/model/gguf_writer.h"
#include "cutline/model/vocabulary.h"
#include "synth_architectures.h"
#include "synth_corpus.h"

namespace cutline::model {

namespace {

constexpr const char* kSpecialTokens[] = {"<|begin_of_text|>", "<|end_of_text|>", "<|im_start|>",
                                          "<|im_end|>"};
constexpr int32_t kNumSpecial = 4;

constexpr const char* kChatMlTemplate =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}";

// splitmix64: a tiny, well-mixed generator whose output is fixed by its definition (unlike
// std:: distributions, which differ between standard libraries).
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [-1, 1), from the top 24 bits (exact in float).
  float symmetric() {
    return static_cast<float>(static_cast<int32_t>(next() >> 40) - (1 << 23)) * (1.0f / (1 << 23));
  }

 private:
  uint64_t state_;
};

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001B3ull;
  return h;
}

Error bad_option(const std::string& message) {
  return make_error(ErrorKind::kBadRequest, "synth: " + message);
}

Status validate(const SynthOptions& o) {
  auto positive = [](int32_t v) { return v > 0; };
  if (!positive(o.layers)) return bad_option("--layers must be positive");
  if (!positive(o.dim)) return bad_option("--dim must be positive");
  if (!positive(o.heads)) return bad_option("--heads must be positive");
  if (!positive(o.kv_heads)) return bad_option("--kv-heads must be positive");
  if (!positive(o.context)) return bad_option("--context must be positive");
  if (o.ffn < 0) return bad_option("--ffn must be positive (or 0 for the default)");
  if (o.dim % o.heads != 0) {
    return bad_option("--dim " + std::to_string(o.dim) + " is not a multiple of --heads " +
                      std::to_string(o.heads));
  }
  if (o.heads % o.kv_heads != 0) {
    return bad_option("--heads " + std::to_string(o.heads) + " is not a multiple of --kv-heads " +
                      std::to_string(o.kv_heads));
  }
  if ((o.dim / o.heads) % 2 != 0) {
    return bad_option("head size " + std::to_string(o.dim / o.heads) + " (--dim / --heads) is odd");
  }
  if (auto s = validate_architecture_options(o); !s) return s;
  if (o.vocab < 256 + kNumSpecial) {
    return bad_option("--vocab must be at least " + std::to_string(256 + kNumSpecial) +
                      " (256 byte tokens and " + std::to_string(kNumSpecial) + " special tokens)");
  }
  // Every type the device can quantize (the 2-D weights' type; norms stay F32).
  const auto traits = tensor_type_traits(o.type);
  if (!traits || !traits->supported || !device::dtype_from_ggml(static_cast<uint32_t>(o.type))) {
    return bad_option("--type must be one of " + supported_tensor_types() + " (got " +
                      tensor_type_name(o.type) + ")");
  }
  int32_t ffn = synth_ffn_dim(o);
  for (auto [name, v] : {std::pair{"--dim", o.dim}, std::pair{"--ffn", ffn}}) {
    if (tensor_row_bytes(o.type, v) < 0) {
      return bad_option(std::string(name) + " " + std::to_string(v) + " is not a multiple of the " +
                        tensor_type_name(o.type) + " block size " +
                        std::to_string(tensor_type_traits(o.type)->block_elems));
    }
  }
  return {};
}

void set_vocabulary(const SynthOptions& o, GgufWriter& w) {
  const int32_t learnable = o.vocab - kNumSpecial - 256;
  BpeVocabulary bpe = train_bpe(synth_corpus_text(), learnable, PreTokenizer::kLlama3);
  std::vector<std::string> tokens = std::move(bpe.tokens);
  std::vector<int32_t> types(tokens.size(), static_cast<int32_t>(TokenKind::kNormal));
  // When the text runs out of merges, reserved control tokens fill the gap (as Llama 3 does).
  for (int32_t r = 0; static_cast<int32_t>(tokens.size()) < o.vocab - kNumSpecial; ++r) {
    tokens.push_back("<|reserved_special_token_" + std::to_string(r) + "|>");
    types.push_back(static_cast<int32_t>(TokenKind::kControl));
  }
  const auto first_special = static_cast<int32_t>(tokens.size());
  for (const char* s : kSpecialTokens) {
    tokens.emplace_back(s);
    types.push_back(static_cast<int32_t>(TokenKind::kControl));
  }
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", "llama-bpe");
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  w.set_i32_array("tokenizer.ggml.token_type", types);
  w.set_string_array("tokenizer.ggml.merges", bpe.merges);
  w.set_u32("tokenizer.ggml.bos_token_id", first_special + 0);
  w.set_u32("tokenizer.ggml.eos_token_id", first_special + 1);
  w.set_u32("tokenizer.ggml.eot_token_id", first_special + 3);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_string("tokenizer.chat_template", kChatMlTemplate);
}

Status write_tensor(const TensorPlan& t, uint64_t seed, GgufWriter& w, std::vector<float>& row,
                    std::vector<uint8_t>& chunk) {
  SplitMix64 rng(seed ^ fnv1a(t.name));
  const int64_t cols = t.shape[0];
  int64_t rows = 1;
  for (size_t d = 1; d < t.shape.size(); ++d) rows *= t.shape[d];
  const int64_t row_bytes = tensor_row_bytes(t.type, cols);
  constexpr size_t kChunkBytes = 4 << 20;
  // TensorType and device::DType share the GGML type ids; validate() only admits types the
  // device's reference quantizers write.
  const auto dtype = device::dtype_from_ggml(static_cast<uint32_t>(t.type));
  if (!dtype) return make_error(ErrorKind::kInternal, "synth: no quantizer for " + t.name);
  row.resize(cols);
  chunk.clear();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) row[c] = t.base + t.amplitude * rng.symmetric();
    size_t at = chunk.size();
    chunk.resize(at + row_bytes);
    device::quantize_row(*dtype, row.data(), chunk.data() + at, cols);
    if (chunk.size() >= kChunkBytes) {
      if (auto s = w.write_data(chunk); !s) return s;
      chunk.clear();
    }
  }
  return w.write_data(chunk);
}

uint32_t file_type_of(TensorType t) {
  switch (t) {
    case TensorType::kF32:
      return 0;  // llama.cpp LLAMA_FTYPE_ALL_F32
    case TensorType::kF16:
      return 1;  // MOSTLY_F16
    case TensorType::kQ4_0:
      return 2;  // MOSTLY_Q4_0
    case TensorType::kQ8_0:
      return 7;  // MOSTLY_Q8_0
    case TensorType::kQ4_1:
      return 3;  // MOSTLY_Q4_1
    case TensorType::kQ5_0:
      return 8;  // MOSTLY_Q5_0
    case TensorType::kQ2_K:
      return 10;  // MOSTLY_Q2_K
    case TensorType::kQ3_K:
      return 11;  // MOSTLY_Q3_K_S (every matrix Q3_K)
    case TensorType::kQ4_K:
      return 14;  // MOSTLY_Q4_K_S
    case TensorType::kQ5_K:
      return 16;  // MOSTLY_Q5_K_S
    case TensorType::kQ6_K:
      return 18;  // MOSTLY_Q6_K
    case TensorType::kIQ4_NL:
      return 25;  // MOSTLY_IQ4_NL
    case TensorType::kIQ4_XS:
      return 30;  // MOSTLY_IQ4_XS
    default:
      return 0;
  }
}

}  // namespace

int32_t synth_ffn_dim(const SynthOptions& o) {
  if (o.ffn > 0) return o.ffn;
  int64_t ffn = (static_cast<int64_t>(o.dim) * 8 + 2) / 3;
  return static_cast<int32_t>((ffn + 31) / 32 * 32);
}

Status synthesize_tiny_model(const SynthOptions& o, const std::string& path) {
  if (auto s = validate(o); !s) return s;
  GgufWriter w;
  w.set_string("general.architecture", o.arch);
  w.set_string("general.name", o.name);
  w.set_u32("general.file_type", file_type_of(o.type));
  if (tensor_type_traits(o.type)->block_elems > 1) {
    w.set_u32("general.quantization_version", 2);
  }
  w.set_u64("cutline.synth.seed", o.seed);
  set_architecture_metadata(o, w);
  set_vocabulary(o, w);

  std::vector<TensorPlan> plan = plan_tensors(o);
  for (const TensorPlan& t : plan) {
    if (auto s = w.add_tensor(t.name, t.type, t.shape); !s) return s;
  }
  if (auto s = w.begin_file(path); !s) return s;
  std::vector<float> row;
  std::vector<uint8_t> chunk;
  int64_t total_bytes = 0, done_bytes = 0;
  for (size_t i = 0; i < plan.size(); ++i) total_bytes += w.tensor_bytes(i);
  for (size_t i = 0; i < plan.size(); ++i) {
    if (auto s = write_tensor(plan[i], o.seed, w, row, chunk); !s) return s;
    done_bytes += w.tensor_bytes(i);
    if (o.progress) o.progress(done_bytes, total_bytes);
  }
  return w.finish();
}

Result<std::string> ensure_builtin_model(const std::string& cache_dir) {
  // The version in the name changes whenever the synthesizer's output would.
  const std::string path = cache_dir + "/cutline-tiny-v1.gguf";
  if (::access(path.c_str(), R_OK) == 0) {
    if (auto f = GgufFile::open(path); f) return path;
    // A corrupt cached file (disk trouble, manual edit) is rebuilt below.
  }
  // mkdir -p
  for (size_t pos = 1; pos <= cache_dir.size(); ++pos) {
    if (pos == cache_dir.size() || cache_dir[pos] == '/') {
      std::string dir = cache_dir.substr(0, pos);
      if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
        return make_error(ErrorKind::kIo,
                          dir + ": cannot create directory: " + std::strerror(errno));
      }
    }
  }
  static std::atomic<uint64_t> counter{0};
  const std::string tmp =
      path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));
  SynthOptions options;
  if (auto s = synthesize_tiny_model(options, tmp); !s) {
    std::remove(tmp.c_str());
    return std::move(s).error();
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    return make_error(ErrorKind::kIo, path + ": cannot rename into place: " + std::strerror(err));
  }
  return path;
}

}  // namespace cutline::model
