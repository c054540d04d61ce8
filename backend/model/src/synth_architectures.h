#pragma once
// The architecture-specific part of the tiny-model synthesizer (internal to backend/model): the
// `<arch>.*` metadata and the list of tensors with how their values are drawn.
#include <string>
#include <vector>

#include "cutline/model/gguf_writer.h"
#include "cutline/model/synth.h"

namespace cutline::model {

// How a tensor's values are drawn: base + amplitude * U[-1, 1).
struct TensorPlan {
  std::string name;
  TensorType type;
  std::vector<int64_t> shape;
  float base;
  float amplitude;
};

// kBadRequest for an unknown --arch or options it cannot take.
Status validate_architecture_options(const SynthOptions& options);
void set_architecture_metadata(const SynthOptions& options, GgufWriter& writer);
std::vector<TensorPlan> plan_tensors(const SynthOptions& options);

}  // namespace cutline::model
