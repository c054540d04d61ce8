#pragma once
// Helpers shared by the config loader and the tensor-shape check (internal to backend/model).
#include <string>
#include <vector>

#include "cutline/model/gguf_file.h"

namespace cutline::model {

std::string shape_string(const std::vector<int64_t>& shape);
std::string shape_string(const GgufTensor& t);

}  // namespace cutline::model
