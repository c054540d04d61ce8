// Fuzz target for the GGUF reader: any byte string either parses into a file whose accessors are
// all safe to call (every tensor's bytes readable, metadata decodable, config and tokenizer
// loaders returning values or errors), or is refused with an error. Never a crash or a read out
// of bounds (run under ASan by tests/fuzz/run.sh).
#include <cstddef>
#include <cstdint>
#include <span>

#include "cutline/model/gguf_file.h"
#include "cutline/model/model_config.h"
#include "cutline/model/tokenizer_loader.h"

using cutline::model::GgufFile;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = GgufFile::from_bytes(std::span<const uint8_t>(data, size), "fuzz.gguf");
  if (!file.ok()) return 0;
  const GgufFile& f = **file;
  volatile uint64_t sink = 0;
  for (const auto& entry : f.metadata()) {
    const auto& v = *entry.value;
    sink = sink + entry.key.size();
    if (auto i = v.as_int()) sink = sink + static_cast<uint64_t>(*i);
    if (auto s = v.as_string()) sink = sink + s->size();
    if (auto a = v.as_string_array()) {
      for (std::string_view s : *a) sink = sink + s.size();
    }
    if (auto a = v.as_int_array()) sink = sink + a->size();
    if (auto a = v.as_float_array()) sink = sink + a->size();
  }
  for (const auto& t : f.tensors()) {
    if (t.n_bytes > 0) sink = sink + t.data[0] + t.data[t.n_bytes - 1];
    if (f.tensor(t.name) == nullptr) __builtin_trap();
  }
  (void)cutline::model::load_model_config(f);
  auto tokenizer = cutline::model::load_tokenizer(f);
  if (tokenizer.ok()) {
    auto ids = (*tokenizer)->encode("Hello, world! 123 \xE4\xB8\x96", true);
    sink = sink + (*tokenizer)->decode(ids).size();
  }
  return 0;
}
