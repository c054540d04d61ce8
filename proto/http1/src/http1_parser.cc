#include "cutline/proto/http1/http1_parser.h"

#include <llhttp.h>

#include <string>

namespace cutline::proto {

namespace {

// RFC 9110 5.6.2 tchar: what a field name may consist of.
bool is_token(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    const auto u = static_cast<unsigned char>(c);
    const bool ok = (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || (u >= '0' && u <= '9') ||
                    std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
    if (!ok) return false;
  }
  return true;
}

}  // namespace

// The llhttp state plus what is being accumulated for the current message. llhttp calls the
// static callbacks below with `parser->data` pointing here.
struct Http1Parser::Impl {
  explicit Impl(Http1Parser& owner) : owner(owner) {}

  Http1Parser& owner;
  llhttp_t parser;
  Http1Head head;
  HttpHeaders trailers;
  std::string field;
  std::string value;
  size_t header_bytes = 0;  // head (or trailer) bytes counted against max_header_bytes
  size_t header_count = 0;
  size_t host_count = 0;  // Host fields in the request head
  uint64_t body_bytes = 0;
  size_t chunk_extension_bytes = 0;
  bool in_trailers = false;
  // The bytes llhttp_execute is running over, and the last byte it consumed before them: a header
  // value piece that starts right after a line feed is an obs-fold continuation.
  const char* chunk_start = nullptr;
  char byte_before_chunk = 0;
  char last_non_blank_before_chunk = 0;
  std::optional<Error> error;  // set by a callback that failed (HPE_USER)

  static Impl& of(llhttp_t* p) { return *static_cast<Impl*>(p->data); }

  // Whether the header value piece at `at` continues a folded line (see on_header_value).
  bool folded(const char* at) const {
    if (!value.empty()) return (at > chunk_start ? at[-1] : byte_before_chunk) == '\n';
    const char* p = at;
    while (p > chunk_start && (p[-1] == ' ' || p[-1] == '\t')) --p;
    return (p > chunk_start ? p[-1] : last_non_blank_before_chunk) == '\n';
  }

  // After llhttp consumed [start, end): what folded() needs from before the next chunk.
  void note_consumed(const char* start, const char* end) {
    // A response body (the relay's per-token path) needs none of this; trailers after it are
    // still checked within each chunk.
    if (end <= start || (owner.type_ == Type::kResponse && owner.phase_ == Phase::kBody)) return;
    byte_before_chunk = end[-1];
    for (const char* p = end; p > start; --p) {
      if (p[-1] != ' ' && p[-1] != '\t') {
        last_non_blank_before_chunk = p[-1];
        break;
      }
    }
  }

  int fail(ErrorKind kind, std::string message) {
    error = Error{kind, std::move(message)};
    return HPE_USER;
  }

  int count_head_bytes(size_t n) {
    header_bytes += n;
    if (header_bytes > owner.limits_.max_header_bytes) {
      return fail(ErrorKind::kHeadersTooLarge,
                  std::string(in_trailers ? "trailers" : "request head") + " exceed " +
                      std::to_string(owner.limits_.max_header_bytes) + " bytes");
    }
    return HPE_OK;
  }

  static int on_message_begin(llhttp_t* p) {
    Impl& s = of(p);
    s.head = Http1Head{};
    s.trailers.clear();
    s.field.clear();
    s.value.clear();
    s.header_bytes = 0;
    s.header_count = 0;
    s.host_count = 0;
    s.body_bytes = 0;
    s.chunk_extension_bytes = 0;
    s.in_trailers = false;
    s.owner.phase_ = Phase::kHead;
    return HPE_OK;
  }

  static int on_url(llhttp_t* p, const char* at, size_t n) {
    Impl& s = of(p);
    s.head.target.append(at, n);
    return s.count_head_bytes(n);
  }

  static int on_status(llhttp_t* p, const char* at, size_t n) {
    Impl& s = of(p);
    s.head.reason.append(at, n);
    return s.count_head_bytes(n);
  }

  static int on_method(llhttp_t* p, const char* at, size_t n) {
    Impl& s = of(p);
    s.head.method.append(at, n);
    return s.count_head_bytes(n);
  }

  static int on_header_field(llhttp_t* p, const char* at, size_t n) {
    Impl& s = of(p);
    s.field.append(at, n);
    return s.count_head_bytes(n);
  }

  static int on_header_value(llhttp_t* p, const char* at, size_t n) {
    Impl& s = of(p);
    // llhttp skips the whitespace before a value, so a piece whose nearest non-blank byte
    // before it is a line feed is a folded line (RFC 9112 5.2: a server must reject obs-fold or
    // replace it; we reject). A first piece may follow folded blanks ("X:\r\n\tb"); a later
    // piece starts right after the line feed ("X: a\r\n b").
    if (n > 0 && s.folded(at)) {
      return s.fail(
          ErrorKind::kBadRequest,
          "malformed HTTP/1.1 message: obsolete line folding in header \"" + s.field + "\"");
    }
    s.value.append(at, n);
    return s.count_head_bytes(n);
  }

  static int on_header_value_complete(llhttp_t* p) {
    Impl& s = of(p);
    if (!is_token(s.field)) {
      // e.g. "Content-Length : 5": a proxy may read the field, we would not.
      return s.fail(ErrorKind::kBadRequest,
                    "malformed HTTP/1.1 message: invalid header field name");
    }
    if (++s.header_count > s.owner.limits_.max_header_count) {
      return s.fail(ErrorKind::kHeadersTooLarge,
                    std::string(s.in_trailers ? "trailer" : "header") + " fields exceed " +
                        std::to_string(s.owner.limits_.max_header_count));
    }
    if (!s.in_trailers && iequals(s.field, "host")) ++s.host_count;
    HttpHeaders& target = s.in_trailers ? s.trailers : s.head.headers;
    target.add(s.field, s.value);
    s.field.clear();
    s.value.clear();
    return HPE_OK;
  }

  static int on_headers_complete(llhttp_t* p) {
    Impl& s = of(p);
    Http1Parser& o = s.owner;
    Http1Head& h = s.head;
    h.version_major = p->http_major;
    h.version_minor = p->http_minor;
    if (o.type_ == Type::kResponse) h.status = p->status_code;
    h.keep_alive = llhttp_should_keep_alive(p) != 0;
    h.chunked = (p->flags & F_CHUNKED) != 0;
    if ((p->flags & F_CONTENT_LENGTH) != 0) h.content_length = p->content_length;
    if (o.type_ == Type::kRequest) {
      // Only HTTP/1.0 and HTTP/1.1 are read here: llhttp also takes "HTTP/2.0" (and 0.9) on a
      // request line, which no HTTP/1 proxy in front would frame the same way.
      if (h.version_major != 1 || h.version_minor > 1) {
        return s.fail(ErrorKind::kBadRequest,
                      "malformed HTTP/1.1 message: HTTP/" + std::to_string(h.version_major) + "." +
                          std::to_string(h.version_minor) + " on an HTTP/1 request line");
      }
      // RFC 9112 3.2: 400 for more than one Host, and for an HTTP/1.1 request without one.
      if (s.host_count > 1) {
        return s.fail(ErrorKind::kBadRequest,
                      "malformed HTTP/1.1 message: more than one Host header field");
      }
      if (s.host_count == 0 && h.version_minor == 1) {
        return s.fail(ErrorKind::kBadRequest,
                      "malformed HTTP/1.1 message: an HTTP/1.1 request without a Host header "
                      "field");
      }
      h.expect_continue = h.headers.has_token("expect", "100-continue");
      // RFC 9112 6.1: Transfer-Encoding in an HTTP/1.0 message is faulty framing.
      if ((p->flags & F_TRANSFER_ENCODING) != 0 && h.version_major == 1 && h.version_minor == 0) {
        return s.fail(ErrorKind::kBadRequest,
                      "malformed HTTP/1.1 message: Transfer-Encoding in an HTTP/1.0 request");
      }
    }
    const size_t max_body = o.limits_.max_body_bytes;
    if (max_body != 0 && h.content_length && *h.content_length > max_body) {
      return s.fail(ErrorKind::kTooLarge, "request body of " + std::to_string(*h.content_length) +
                                              " bytes exceeds the limit of " +
                                              std::to_string(max_body) + " bytes");
    }
    // What follows the head is body or trailers; the trailer section has its own budget.
    s.in_trailers = true;
    s.header_bytes = 0;
    s.header_count = 0;
    o.phase_ = Phase::kBody;
    const bool skip_body = o.type_ == Type::kResponse && o.head_response_;
    const bool go_on = o.sink_.on_head(h);
    if (skip_body) return 1;  // a pause here would be lost; the sink sees completion next
    return go_on ? HPE_OK : HPE_PAUSED;
  }

  static int on_body(llhttp_t* p, const char* at, size_t n) {
    Impl& s = of(p);
    s.body_bytes += n;
    const size_t max_body = s.owner.limits_.max_body_bytes;
    if (max_body != 0 && s.body_bytes > max_body) {
      return s.fail(ErrorKind::kTooLarge,
                    "body exceeds the limit of " + std::to_string(max_body) + " bytes");
    }
    return s.owner.sink_.on_body(std::string_view(at, n)) ? HPE_OK : HPE_PAUSED;
  }

  static int on_chunk_extension(llhttp_t* p, const char* /*at*/, size_t n) {
    Impl& s = of(p);
    s.chunk_extension_bytes += n;
    if (s.chunk_extension_bytes > s.owner.limits_.max_chunk_extension_bytes) {
      return s.fail(ErrorKind::kBadRequest,
                    "malformed HTTP/1.1 message: chunk extensions exceed " +
                        std::to_string(s.owner.limits_.max_chunk_extension_bytes) + " bytes");
    }
    return HPE_OK;
  }

  static int on_message_complete(llhttp_t* p) {
    Impl& s = of(p);
    s.owner.phase_ = Phase::kIdle;
    s.owner.head_response_ = false;
    return s.owner.sink_.on_message_complete(s.trailers) ? HPE_OK : HPE_PAUSED;
  }

  static const llhttp_settings_t& settings() {
    static const llhttp_settings_t kSettings = [] {
      llhttp_settings_t st;
      llhttp_settings_init(&st);
      st.on_message_begin = &Impl::on_message_begin;
      st.on_url = &Impl::on_url;
      st.on_status = &Impl::on_status;
      st.on_method = &Impl::on_method;
      st.on_header_field = &Impl::on_header_field;
      st.on_header_value = &Impl::on_header_value;
      st.on_header_value_complete = &Impl::on_header_value_complete;
      st.on_headers_complete = &Impl::on_headers_complete;
      st.on_body = &Impl::on_body;
      st.on_chunk_extension_name = &Impl::on_chunk_extension;
      st.on_chunk_extension_value = &Impl::on_chunk_extension;
      st.on_message_complete = &Impl::on_message_complete;
      return st;
    }();
    return kSettings;
  }

  void init() {
    llhttp_init(&parser, owner.type_ == Type::kRequest ? HTTP_REQUEST : HTTP_RESPONSE, &settings());
    parser.data = this;
    error.reset();
    byte_before_chunk = 0;
    last_non_blank_before_chunk = 0;
  }

  Error to_error(llhttp_errno_t err) {
    if (error)
      return *error;  // a limit our callbacks enforced (llhttp reports HPE_USER or HPE_CB_*)
    std::string message = "malformed HTTP/1.1 message: ";
    message += llhttp_errno_name(err);
    const char* reason = llhttp_get_error_reason(&parser);
    if (reason != nullptr && *reason != '\0') {
      message += " (";
      message += reason;
      message += ")";
    }
    return Error{ErrorKind::kBadRequest, std::move(message)};
  }
};

Http1Parser::Http1Parser(Type type, const Http1Limits& limits, Sink& sink)
    : type_(type), limits_(limits), sink_(sink), impl_(std::make_unique<Impl>(*this)) {
  impl_->init();
}

Http1Parser::~Http1Parser() = default;

Result<size_t> Http1Parser::feed(std::string_view data) {
  if (paused_) return size_t{0};
  if (impl_ == nullptr) {
    impl_ = std::make_unique<Impl>(*this);
    impl_->init();
  }
  size_t consumed = 0;
  while (consumed < data.size()) {
    const char* start = data.data() + consumed;
    const size_t len = data.size() - consumed;
    impl_->chunk_start = start;
    const llhttp_errno_t err = llhttp_execute(&impl_->parser, start, len);
    if (err == HPE_OK) {
      impl_->note_consumed(start, start + len);
      return data.size();
    }
    if (err == HPE_PAUSED) {
      paused_ = true;
      const char* pos = llhttp_get_error_pos(&impl_->parser);
      impl_->note_consumed(start, pos);
      consumed += static_cast<size_t>(pos - start);
      return consumed;
    }
    if (err == HPE_PAUSED_UPGRADE) {
      // The message (with an Upgrade or CONNECT head) is complete; we do not switch protocols, so
      // the bytes after it are parsed as the next message.
      const char* pos = llhttp_get_error_pos(&impl_->parser);
      impl_->note_consumed(start, pos);
      consumed += static_cast<size_t>(pos - start);
      llhttp_reset(&impl_->parser);
      if (paused_) return consumed;
      continue;
    }
    return impl_->to_error(err);
  }
  return consumed;
}

void Http1Parser::resume() {
  if (!paused_ || impl_ == nullptr) return;
  paused_ = false;
  llhttp_resume(&impl_->parser);
}

Status Http1Parser::finish() {
  if (phase_ == Phase::kIdle || impl_ == nullptr) return Status();
  if (phase_ == Phase::kHead) {
    return Error{ErrorKind::kBadRequest, "connection closed before the end of the head"};
  }
  if (llhttp_message_needs_eof(&impl_->parser) != 0) {
    paused_ = false;
    llhttp_resume(&impl_->parser);
    const llhttp_errno_t err = llhttp_finish(&impl_->parser);
    if (err == HPE_OK || err == HPE_PAUSED) return Status();
    return impl_->to_error(err);
  }
  return Error{ErrorKind::kBadRequest, "connection closed mid-body"};
}

void Http1Parser::reset() {
  if (impl_ != nullptr) impl_->init();
  phase_ = Phase::kIdle;
  paused_ = false;
  head_response_ = false;
}

void Http1Parser::release_idle() {
  if (phase_ != Phase::kIdle) return;
  impl_.reset();
  paused_ = false;
}

uint32_t Http1Parser::state_bytes() { return static_cast<uint32_t>(sizeof(Impl)); }

}  // namespace cutline::proto
