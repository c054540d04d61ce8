# Writes IN (a text file) as a C++ source defining cutline::model::synth_corpus_text(), the bytes
# as a hex array so that any byte survives.
file(READ ${IN} _hex HEX)
string(LENGTH "${_hex}" _len)
math(EXPR _bytes "${_len} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," _array "${_hex}")
file(WRITE ${OUT} "// Generated from ${IN}; do not edit.\n#include <string_view>\n"
     "namespace cutline::model {\nnamespace {\nconst unsigned char kText[] = {${_array}0};\n}\n"
     "std::string_view synth_corpus_text() {\n"
     "  return std::string_view(reinterpret_cast<const char*>(kText), ${_bytes});\n}\n"
     "}  // namespace cutline::model\n")
