#pragma once
// The bundled text (backend/model/data/synth_corpus.txt) the tiny model's BPE vocabulary is
// learned from, compiled into the library by data/embed_text.cmake.
#include <string_view>

namespace cutline::model {
std::string_view synth_corpus_text();
}  // namespace cutline::model
