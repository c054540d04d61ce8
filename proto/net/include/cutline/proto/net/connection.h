#pragma once
// Connection: one TCP connection over a libevent bufferevent, with the back-pressure signals the
// relay needs. Protocol code (the HTTP/1.1 server and client connections; later HTTP/2 and TLS)
// owns a Connection and implements its Handler.
//
// Back-pressure: write() never drops bytes (on a plain accepted socket with nothing queued it
// sends directly, queuing only what the kernel does not take); when the queued output exceeds
// high_water_bytes, above_high_water() turns true and the writer is expected to stop producing
// (the server's ServerStream::send_body returns false, the gateway pauses its upstream read).
// When the kernel has taken enough that the output falls to low_water_bytes, above_high_water()
// turns false and Handler::on_drained() runs once. Reading from this peer is switched with
// set_reading() (the HTTP client's pause()/resume()). libevent's evbuffers grow on demand, so an
// idle connection costs only the bufferevent (~0.5 KiB), not preallocated buffers.
//
// Write batching: while a WriteBatch is open on the thread (Connection opens one around every read
// callback; Timer around its callbacks), write() on a cleartext socket holds the bytes and they
// leave in one send() per connection when the outermost batch closes. What one read event makes
// a connection send (a response head with the first token, a last chunk with the terminating
// chunk and its trailer) then costs one system call, not one per write. Order is kept: output(),
// write_buffer() and close_after_flush() queue the held bytes first; close() sends what the
// kernel takes at once (as an unbatched write() would have) and drops the rest with the other
// unsent output.
//
// Threading: everything on the owning EventLoop's thread. Handler callbacks run on it.
// Lifetime: the owner may destroy the Connection (or call close()) from inside any Handler
// callback; no callback runs after close() or destruction. on_closed() runs at most once: for
// closes the owner did not ask for (peer EOF, error, timeout, connect failure), and when a
// close_after_flush() has finished (reason kFlushed).

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

struct bufferevent;
struct evbuffer;
struct event;
struct ssl_st;

namespace cutline::proto {

class EventLoop;
class Connection;

// A range of memory a read callback is about to touch (see Connection::set_prefetch).
struct PrefetchSpan {
  const void* at = nullptr;
  uint32_t bytes = 0;
};

// Opens a write batch on this thread for its lifetime (see above). Nests; cheap.
class WriteBatch {
 public:
  WriteBatch();
  ~WriteBatch();
  WriteBatch(const WriteBatch&) = delete;
  WriteBatch& operator=(const WriteBatch&) = delete;

 private:
  friend class Connection;
  struct Held {
    Connection* connection = nullptr;  // null once closed
    std::string bytes;
  };
  struct State {
    int depth = 0;
    size_t used = 0;
    std::vector<Held> held;  // [0, used) in use; strings keep their capacity
  };
  static State& state();
};

struct ConnectionOptions {
  size_t high_water_bytes = 64 * 1024;
  size_t low_water_bytes = 16 * 1024;
  // Cleartext connections only, accepted or outgoing (ignored for TLS): read with one recv()
  // into a buffer of the loop's thread and hand the bytes to Handler::on_bytes(), instead of the
  // bufferevent's ioctl(FIONREAD) + readv into a freshly allocated evbuffer chain per read. For
  // a streaming upstream that is one syscall and one malloc/free less per token, for a server
  // one per request (see Handler::on_bytes).
  bool direct_read = false;
};

class Connection {
 public:
  // Why a connection ended without its owner closing it.
  enum class CloseReason {
    kEof,             // the peer closed its side (FIN)
    kError,           // a socket error (reset and others); the message has strerror
    kTimeout,         // a read timeout set with set_read_timeout()
    kConnectRefused,  // outgoing: ECONNREFUSED
    kConnectTimeout,  // outgoing: no connection within the connect timeout
    kConnectFailed,   // outgoing: another connect error
    kFlushed,         // close_after_flush() completed (or the peer went away while flushing)
  };

  class Handler {
   public:
    virtual ~Handler() = default;
    // Outgoing connections: the TCP connection is established.
    virtual void on_connected() {}
    // New bytes are in `input`; the handler drains what it consumed (evbuffer_drain) and may
    // leave the rest there for later.
    virtual void on_readable(evbuffer* input) = 0;
    // Direct reading (ConnectionOptions::direct_read): `data` was just received, the input
    // buffer is empty, and `data` is valid during this call only. Bytes the handler does not
    // consume now it hands to conn.keep_input() (they arrive again through on_readable(), e.g.
    // after a resume). The default keeps them all and calls on_readable().
    virtual void on_bytes(Connection& conn, std::string_view data);
    // The output fell to the low-water mark after having exceeded the high-water mark.
    virtual void on_drained() = 0;
    // The connection is closed (already freed; do not write). `message` says why in words.
    virtual void on_closed(CloseReason reason, std::string_view message) = 0;
  };

  // Wraps an accepted, connected socket (takes ownership of `fd`). Reading starts enabled.
  Connection(EventLoop& loop, int fd, Handler& handler, const ConnectionOptions& options);
  // The same over TLS (bufferevent_openssl, server side): takes ownership of `fd` and `ssl`
  // (from TlsContext::new_ssl()); the handshake runs first, then on_readable() sees plaintext.
  // A failed handshake ends with on_closed(kError, OpenSSL's reason).
  Connection(EventLoop& loop, int fd, ssl_st* ssl, Handler& handler,
             const ConnectionOptions& options);
  // Starts a non-blocking connect to `addr`; the result arrives later (never inline) as
  // on_connected() or on_closed(kConnect*). Reading is enabled once connected. Returns nullptr
  // only when no socket could be created (out of descriptors).
  // With `ssl` (from TlsContext::new_client_ssl(), ownership taken), the connection is TLS:
  // on_connected() runs once the handshake (and certificate verification) has succeeded; a
  // failed handshake is on_closed(kConnectFailed, OpenSSL's reason).
  static std::unique_ptr<Connection> connect(EventLoop& loop, const sockaddr* addr,
                                             socklen_t addr_len, int64_t connect_timeout_ms,
                                             Handler& handler, const ConnectionOptions& options,
                                             ssl_st* ssl = nullptr);
  ~Connection();  // close()
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Points the callbacks at another handler (a pooled client connection changes owners).
  void set_handler(Handler& handler) { handler_ = &handler; }
  // Direct reading: before each recv() the connection asks the CPU to fetch `spans` (owned by
  // the caller, which keeps them valid or clears them): the handler's and its callees' state,
  // loaded while the kernel copies the bytes instead of one cache miss after another once they
  // arrive. Only a hint: stale or null entries cost nothing but the prefetch.
  void set_prefetch(const PrefetchSpan* spans, uint8_t count) {
    prefetch_ = spans;
    prefetch_count_ = count;
  }

  // Queues bytes for sending. No effect once closed.
  void write(std::string_view data);
  // Moves all of `buffer` into the output without copying the data.
  void write_buffer(evbuffer* buffer);
  // The output buffer, for writers that assemble chunks in place. Call note_written() after.
  evbuffer* output();
  void note_written();
  // Direct reading: appends bytes the handler did not consume to the input buffer.
  void keep_input(std::string_view data);
  evbuffer* input();

  // Bytes queued and not yet taken by the kernel.
  size_t output_bytes() const;
  // Bytes received and not yet consumed by the handler.
  size_t input_bytes() const;
  bool above_high_water() const { return above_high_water_; }

  // Enables or disables reading from the socket (EOF and errors on a paused connection are
  // noticed when reading resumes, or when a write fails).
  void set_reading(bool enabled);
  bool reading() const { return reading_; }
  // Closes the connection when no byte arrives for `timeout_ms` while reading (0 disables).
  void set_read_timeout(int64_t timeout_ms);

  // Runs on_readable() again soon (from the loop, never inline) when input is buffered: for a
  // reader that left bytes in the input while paused and wants them now.
  void trigger_read();

  // Closes now, dropping unsent output. No Handler callback runs afterwards.
  void close();
  // Graceful close: sends what is queued, then shuts down the sending side (FIN) and waits up to
  // `linger_ms` for the peer to close, discarding anything it still sends (so a client still
  // uploading a body it was refused reads our response instead of a reset). Ends with
  // on_closed(kFlushed). No other Handler callback runs after this call.
  void close_after_flush(int64_t linger_ms = 2000);
  bool open() const { return bev_ != nullptr; }

  // "ip:port" of the peer ("" when unknown).
  std::string peer_address() const;

 private:
  Connection(EventLoop& loop, bufferevent* bev, Handler& handler, const ConnectionOptions& options);
  static void read_cb(bufferevent* bev, void* arg);
  static void write_cb(bufferevent* bev, void* arg);
  static void event_cb(bufferevent* bev, short what, void* arg);
  static void flush_read_cb(bufferevent* bev, void* arg);
  static void flush_write_cb(bufferevent* bev, void* arg);
  static void flush_event_cb(bufferevent* bev, short what, void* arg);
  static void direct_read_cb(int fd, short what, void* arg);
  // Direct reading: (re)arms or removes the read event per reading_ and read_timeout_ms_.
  void update_direct_read();
  void free_direct_read();
  void finish_flush();
  // Something is in the output: the bufferevent must write it.
  void write_queued();
  // write() without batching: send directly when nothing is queued, else queue.
  void write_now(std::string_view data);
  // Write batching: appends to this connection's held bytes; sends (or queues) them now; drops
  // them.
  void hold(std::string_view data);
  void queue_held();
  void drop_held();
  // Leaves this connection's entry (its bytes stay there for the caller); null when none.
  WriteBatch::Held* detach_held();
  friend class WriteBatch;
  // Frees the bufferevent, then tells the handler (unless the Connection was destroyed by then).
  void closed_by_peer(CloseReason reason, std::string message);

  EventLoop& loop_;
  bufferevent* bev_ = nullptr;
  Handler* handler_;
  uint32_t high_water_bytes_;
  uint32_t low_water_bytes_;
  bool above_high_water_ = false;
  bool reading_ = true;
  bool connecting_ = false;
  bool flushing_ = false;
  // write() may send() directly when nothing is queued: cleartext sockets, accepted or once
  // connected (a TLS bufferevent must do its own writing).
  bool direct_write_ = false;
  bool tls_ = false;
  int64_t linger_ms_ = 0;
  int64_t read_timeout_ms_ = 0;
  // Direct reading (ConnectionOptions::direct_read on a cleartext connection): our own read
  // event on the socket; the bufferevent then only writes. Null otherwise.
  bool direct_read_ = false;
  event* read_event_ = nullptr;
  // The per-token path reads these instead of the bufferevent's and its buffers' (cache misses on
  // thousands of connections): the socket (-1 until known), and whether the output or (direct
  // reading) the input may hold bytes. False means empty; true means "look".
  int fd_ = -1;
  bool output_queued_ = false;
  bool input_kept_ = false;
  // Whether the bufferevent's writing is enabled (accepted cleartext sockets enable it lazily).
  bool write_enabled_ = true;
  // This connection's entry in the thread's open WriteBatch (-1: none).
  int held_slot_ = -1;
  uint8_t prefetch_count_ = 0;
  const PrefetchSpan* prefetch_ = nullptr;
};

}  // namespace cutline::proto
