#include "cutline/model/tokenizer_loader.h"

#include <algorithm>

#include "cutline/model/bpe_tokenizer.h"
#include "cutline/model/pre_tokenizer.h"
#include "cutline/model/spm_tokenizer.h"

namespace cutline::model {

namespace {

// Control tokens that end a turn in the common chat formats; part of the EOS set when present.
constexpr std::string_view kEndOfTurnTokens[] = {
    "<|im_end|>",    "<|eot_id|>",      "<|end|>",    "<end_of_turn>",
    "<|endoftext|>", "<|end_of_text|>", "<|eom_id|>", "</s>",
};

Result<int32_t> special_id(const GgufFile& f, std::string_view key, int32_t n_vocab) {
  auto v = f.get_int_or(key, -1);
  if (!v) return std::move(v).error();
  // llama.cpp writes "no such token" as -1 (and some converters as 0xFFFFFFFF in a uint32).
  if (*v < 0 || *v == 0xFFFFFFFFll) return -1;
  if (*v >= n_vocab) {
    return f.error(ErrorKind::kBadRequest, "metadata key '" + std::string(key) + "' is " +
                                               std::to_string(*v) +
                                               ", expected a token id below the vocabulary size " +
                                               std::to_string(n_vocab));
  }
  return static_cast<int32_t>(*v);
}

// tokenizer.ggml.scores, when present: one per token.
Status read_scores(const GgufFile& f, int32_t n, Vocabulary& v) {
  if (!f.has("tokenizer.ggml.scores")) return {};
  auto scores = f.get_float_array("tokenizer.ggml.scores");
  if (!scores) return std::move(scores).error();
  if (static_cast<int32_t>(scores->size()) != n) {
    return f.error(ErrorKind::kBadRequest,
                   "metadata key 'tokenizer.ggml.scores' has " + std::to_string(scores->size()) +
                       " entries, expected " + std::to_string(n) + " (one per token)");
  }
  v.scores.assign(scores->begin(), scores->end());
  return {};
}

// tokenizer.ggml.token_type: one TokenKind (0..6) per token.
Status read_token_types(const GgufFile& f, int32_t n, Vocabulary& v) {
  auto types = f.get_int_array("tokenizer.ggml.token_type");
  if (!types) return std::move(types).error();
  if (static_cast<int32_t>(types->size()) != n) {
    return f.error(ErrorKind::kBadRequest,
                   "metadata key 'tokenizer.ggml.token_type' has " + std::to_string(types->size()) +
                       " entries, expected " + std::to_string(n) + " (one per token)");
  }
  for (int32_t i = 0; i < n; ++i) {
    int64_t t = (*types)[i];
    if (t < 0 || t > static_cast<int64_t>(TokenKind::kByte)) {
      return f.error(ErrorKind::kBadRequest, "metadata key 'tokenizer.ggml.token_type' entry " +
                                                 std::to_string(i) + " is " + std::to_string(t) +
                                                 ", expected 0..6");
    }
    v.kinds[i] = static_cast<TokenKind>(t);
  }
  return {};
}

// The ids that end a generation: eos, eot, and every control token spelled like an end of turn.
void collect_eos_ids(Vocabulary& v) {
  const auto n = static_cast<int32_t>(v.tokens.size());
  auto add_eos = [&](int32_t id) {
    if (id >= 0 && std::find(v.eos_ids.begin(), v.eos_ids.end(), id) == v.eos_ids.end()) {
      v.eos_ids.push_back(id);
    }
  };
  add_eos(v.eos_id);
  add_eos(v.eot_id);
  for (int32_t id = 0; id < n; ++id) {
    if (v.kinds[id] != TokenKind::kControl) continue;
    for (std::string_view end : kEndOfTurnTokens) {
      if (v.tokens[id] == end) add_eos(id);
    }
  }
}

}  // namespace

Result<Vocabulary> load_vocabulary(const GgufFile& f) {
  auto model = f.get_string("tokenizer.ggml.model");
  if (!model) return std::move(model).error();
  auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  if (!tokens) return std::move(tokens).error();
  if (tokens->empty()) {
    return f.error(ErrorKind::kBadRequest, "metadata key 'tokenizer.ggml.tokens' is empty");
  }
  if (tokens->size() > 0x7FFFFFFF) {
    return f.error(ErrorKind::kBadRequest, "metadata key 'tokenizer.ggml.tokens' is too large");
  }
  const auto n = static_cast<int32_t>(tokens->size());
  Vocabulary v;
  v.tokens.assign(tokens->begin(), tokens->end());

  if (Status s = read_scores(f, n, v); !s.ok()) return std::move(s).error();
  v.kinds.assign(n, TokenKind::kNormal);
  const bool has_types = f.has("tokenizer.ggml.token_type");
  if (has_types) {
    if (Status s = read_token_types(f, n, v); !s.ok()) return std::move(s).error();
  }

  struct Special {
    const char* key;
    int32_t* id;
  };
  for (Special s : {Special{"tokenizer.ggml.bos_token_id", &v.bos_id},
                    Special{"tokenizer.ggml.eos_token_id", &v.eos_id},
                    Special{"tokenizer.ggml.eot_token_id", &v.eot_id},
                    Special{"tokenizer.ggml.unknown_token_id", &v.unk_id}}) {
    auto id = special_id(f, s.key, n);
    if (!id) return std::move(id).error();
    *s.id = *id;
  }
  // Without token types, the declared special ids are still never text.
  if (!has_types) {
    for (int32_t id : {v.bos_id, v.eos_id, v.eot_id}) {
      if (id >= 0) v.kinds[id] = TokenKind::kControl;
    }
    if (v.unk_id >= 0) v.kinds[v.unk_id] = TokenKind::kUnknown;
  }
  auto add_bos = f.get_bool_or("tokenizer.ggml.add_bos_token", *model == "llama");
  if (!add_bos) return std::move(add_bos).error();
  v.add_bos = *add_bos;
  auto arch = f.get_string_or("general.architecture", "");
  if (!arch) return std::move(arch).error();
  v.special_rstrip = *arch == "phi3";

  collect_eos_ids(v);
  return v;
}

Result<std::unique_ptr<Tokenizer>> load_tokenizer(const GgufFile& f) {
  auto vocab = load_vocabulary(f);
  if (!vocab) return std::move(vocab).error();
  std::string_view model = *f.get_string("tokenizer.ggml.model");
  if (model == "gpt2") {
    auto merges = f.get_string_array("tokenizer.ggml.merges");
    if (!merges) {
      return f.error(ErrorKind::kBadRequest,
                     std::move(merges).error().message.substr(f.path().size() + 2) +
                         " (required for gpt2 tokenizers)");
    }
    auto pre = f.get_string_or("tokenizer.ggml.pre", "default");
    if (!pre) return std::move(pre).error();
    auto t = BpeTokenizer::create(std::move(*vocab), *merges, pre_tokenizer_from_name(*pre));
    if (!t) return f.error(t.error().kind, t.error().message);
    return std::unique_ptr<Tokenizer>(std::move(*t));
  }
  if (model == "llama") {
    auto prefix = f.get_bool_or("tokenizer.ggml.add_space_prefix", true);
    if (!prefix) return std::move(prefix).error();
    auto t = SpmTokenizer::create(std::move(*vocab), *prefix);
    if (!t) return f.error(t.error().kind, t.error().message);
    return std::unique_ptr<Tokenizer>(std::move(*t));
  }
  return f.error(ErrorKind::kUnsupported, "tokenizer model '" + std::string(model) +
                                              "' (metadata key 'tokenizer.ggml.model') is not "
                                              "supported (supported: gpt2, llama)");
}

}  // namespace cutline::model
