#include "cutline/proto/wire/request_rewriter.h"

#include <algorithm>
#include <array>
#include <charconv>

namespace cutline::proto {
namespace {

// One splice: replace body[begin, end) with `text` (begin == end: insert).
struct Edit {
  size_t begin = 0;
  size_t end = 0;
  std::string_view text;
};

// At most: top-level insert, max_tokens, max_completion_tokens, stream, stream_options or
// include_usage. Fixed storage: the rewriter allocates only the output.
struct EditList {
  std::array<Edit, 8> edits;
  size_t count = 0;
  void add(size_t begin, size_t end, std::string_view text) { edits[count++] = {begin, end, text}; }
};

// Everything the edits point at lives here for the duration of a rewrite.
struct Scratch {
  char number[24];
  std::string_view max_tokens;
  std::string top_insert;
};

void plan(const ParsedRequest& req, const RewriteOptions& opt, Scratch& scratch, EditList& list) {
  const auto& a = req.anchors;
  const std::string_view body = req.body;
  auto replace_if_different = [&](ByteRange r, std::string_view text) {
    if (body.substr(r.begin, r.size()) != text) list.add(r.begin, r.end, text);
  };
  std::string& top = scratch.top_insert;
  auto add_top = [&](std::string_view key_and_value) {
    if (!top.empty()) top.push_back(',');
    top.append(key_and_value);
  };

  if (opt.max_tokens) {
    auto [end, ec] =
        std::to_chars(scratch.number, scratch.number + sizeof scratch.number, *opt.max_tokens);
    scratch.max_tokens =
        std::string_view(scratch.number, static_cast<size_t>(end - scratch.number));
    if (a.max_tokens) replace_if_different(*a.max_tokens, scratch.max_tokens);
    if (a.max_completion_tokens) replace_if_different(*a.max_completion_tokens, scratch.max_tokens);
    if (!a.max_tokens && !a.max_completion_tokens) {
      if (!top.empty()) top.push_back(',');
      top.push_back('"');
      top.append(opt.inserted_limit_key);
      top.append("\":");
      top.append(scratch.max_tokens);
    }
  }
  if (opt.force_stream) {
    if (a.stream) {
      replace_if_different(*a.stream, "true");
    } else {
      add_top("\"stream\":true");
    }
  }
  if (opt.force_include_usage) {
    if (a.stream_options_open) {
      if (a.include_usage) {
        replace_if_different(*a.include_usage, "true");
      } else {
        const size_t at = *a.stream_options_open + 1;
        list.add(at, at,
                 a.stream_options_empty ? "\"include_usage\":true" : "\"include_usage\":true,");
      }
    } else if (a.stream_options) {  // "stream_options": null
      list.add(a.stream_options->begin, a.stream_options->end, "{\"include_usage\":true}");
    } else {
      add_top("\"stream_options\":{\"include_usage\":true}");
    }
  }
  if (!top.empty()) {
    if (!a.object_empty) top.push_back(',');
    const size_t at = a.object_open + 1;
    list.add(at, at, top);
  }
  std::sort(list.edits.begin(), list.edits.begin() + list.count,
            [](const Edit& x, const Edit& y) { return x.begin < y.begin; });
}

}  // namespace

bool rewrite_changes_body(const ParsedRequest& req, const RewriteOptions& options) {
  Scratch scratch;
  EditList list;
  plan(req, options, scratch, list);
  return list.count > 0;
}

void rewrite_request(const ParsedRequest& req, const RewriteOptions& options, std::string& out) {
  Scratch scratch;
  EditList list;
  plan(req, options, scratch, list);
  out.clear();
  size_t grow = 0;
  for (size_t i = 0; i < list.count; ++i) grow += list.edits[i].text.size();
  out.reserve(req.body.size() + grow);
  size_t pos = 0;
  for (size_t i = 0; i < list.count; ++i) {
    const Edit& e = list.edits[i];
    out.append(req.body.data() + pos, e.begin - pos);
    out.append(e.text);
    pos = e.end;
  }
  out.append(req.body.data() + pos, req.body.size() - pos);
}

std::string rewrite_request(const ParsedRequest& req, const RewriteOptions& options) {
  std::string out;
  rewrite_request(req, options, out);
  return out;
}

}  // namespace cutline::proto
