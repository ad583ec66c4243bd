// Beast sessions: request parsing with per-phase timeouts, a per-connection write queue with a write timeout,
// disconnect detection, keep-alive; the acceptor with its connection cap and descriptor-exhaustion backoff.
#include "server/http_server.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>
#include <array>
#include <deque>
#include <optional>
#include <unordered_set>
#include <utility>

#include "core/error.h"
#include "server/errors.h"
#include "server/openai_json.h"

namespace tessera::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

const char* reason_phrase(int status) {
  const auto s = http::obsolete_reason(http::int_to_status(unsigned(status)));
  return s.empty() ? "Unknown" : s.data();
}

std::chrono::milliseconds ms(double seconds) {
  return std::chrono::milliseconds(int64_t(std::max(0.001, seconds) * 1000));
}

// A whole response to a request the server refuses before any handler sees it.
std::string canned_response(int status, ErrorCode code, const std::string& message) {
  const std::string body = dump_json(error_body({code, message}));
  std::string r = "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) + "\r\n";
  r += "Server: tessera\r\nContent-Type: application/json\r\nConnection: close\r\n";
  if (status == 503) r += "Retry-After: 1\r\n";
  r += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  return r;
}

// The errors accept() reports when the process or the system is out of descriptors or buffers: retrying at
// once fails again at once (the listening socket stays readable), so accepting pauses instead.
bool out_of_resources(const beast::error_code& ec) {
  return ec == asio::error::no_descriptors || ec == asio::error::no_buffer_space || ec == asio::error::no_memory ||
         ec == beast::error_code(ENFILE, beast::system_category());
}

}  // namespace

std::string_view HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (iequals(k, name)) return v;
  return {};
}

std::string_view HttpRequest::path() const {
  std::string_view t = target;
  const size_t q = t.find('?');
  return q == std::string_view::npos ? t : t.substr(0, q);
}

struct HttpServer::Impl : std::enable_shared_from_this<HttpServer::Impl> {
  Impl(asio::io_context& ioc, HttpOptions options, Handler handler)
      : ioc(ioc), acceptor(ioc), backoff_timer(ioc), options(std::move(options)), handler(std::move(handler)) {}
  void accept();
  void on_accept(beast::error_code ec, tcp::socket socket);

  asio::io_context& ioc;
  tcp::acceptor acceptor;
  asio::steady_timer backoff_timer;
  std::chrono::milliseconds backoff{0};   // accept()'s pause after running out of descriptors; 0: none
  HttpOptions options;
  Handler handler;
  bool stopping = false;                  // after stop_accepting(): no keep-alive
  std::unordered_set<Session*> sessions;  // live sessions (io thread only), those being refused included
  size_t n_refusing = 0;                  // sessions answering 503 (over the connection cap)
};

class Session : public Responder, public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, std::shared_ptr<HttpServer::Impl> server)
      : stream_(std::move(socket)), server_(std::move(server)), write_timer_(server_->ioc) {
    server_->sessions.insert(this);
    beast::error_code ec;
    const auto ep = stream_.socket().remote_endpoint(ec);
    if (!ec) remote_ = ep.address().to_string();
  }
  ~Session() override {
    server_->sessions.erase(this);
    if (refusing_) --server_->n_refusing;
  }

  void start() { wait_for_request(); }

  // Over the connection cap: a 503 and close, without reading a request.
  void refuse() {
    refusing_ = true;
    ++server_->n_refusing;
    keep_alive_ = false;
    unread_body_ = true;  // whatever the client sends is not read: linger before closing
    responding_ = complete_ = true;
    enqueue(canned_response(503, ErrorCode::Unavailable, "the server has too many open connections; retry later"));
  }

  // Closes now if no response is pending (drain); otherwise after it.
  void close_if_idle() {
    if (!responding_) close();
  }
  void close() {
    if (closed_) return;
    closed_ = true;
    beast::error_code ec;
    write_timer_.cancel();
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.close();
    if (responding_ && !complete_) fire_close();
  }

  // ---- Responder ----
  void add_response_header(std::string name, std::string value) override {
    extra_headers_.emplace_back(std::move(name), std::move(value));
  }
  void send(int status, std::string_view content_type, std::string body, const Headers& extra) override {
    if (complete_) return;
    // A whole response after a stream's head (an error while streaming, say) cannot be framed: drop the
    // connection rather than leave the client waiting for the rest of the stream.
    if (streaming_) return close();
    std::string head = head_lines(status, content_type, extra);
    head += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n";
    complete_ = true;
    enqueue(head_only_ ? std::move(head) : std::move(head) + body);
  }
  void start_stream(int status, std::string_view content_type, const Headers& extra) override {
    if (complete_ || streaming_) return;
    streaming_ = true;
    // HTTP/1.0 has no chunked encoding: the body runs until the connection closes.
    if (!chunked_) keep_alive_ = false;
    // Held back and written with the body's first bytes (or the stream's end), in one write: written alone, it
    // could reach the client before a replica died, leaving a 200 with no data that a load balancer in front
    // (nginx's proxy_next_upstream) may no longer send elsewhere (seen once in e2e_fleet's SIGKILL test).
    stream_head_ = head_lines(status, content_type, extra);
    stream_head_ +=
        chunked_ ? "Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n" : "Cache-Control: no-cache\r\n\r\n";
  }
  void write(std::string_view data) override {
    if (!streaming_ || complete_ || data.empty() || head_only_) return;
    std::string out = std::exchange(stream_head_, {});
    if (!chunked_) {
      enqueue(std::move(out.append(data)));
      return;
    }
    char size[24];
    const int n = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
    out.reserve(out.size() + size_t(n) + data.size() + 2);
    out.append(size, size_t(n)).append(data).append("\r\n");
    enqueue(std::move(out));
  }
  void end_stream() override {
    if (!streaming_ || complete_) return;
    complete_ = true;
    std::string out = std::exchange(stream_head_, {});
    if (chunked_ && !head_only_) out += "0\r\n\r\n";
    if (!out.empty()) return enqueue(std::move(out));
    if (!writing_ && out_.empty() && !closed_) finish_response();
  }
  bool open() const override { return !closed_; }
  void on_close(std::function<void()> callback) override { on_close_ = std::move(callback); }
  void abort() override { close(); }

 private:
  std::string head_lines(int status, std::string_view content_type, const Headers& extra) {
    keep_alive_ = keep_alive_ && !server_->stopping && !unread_body_;
    std::string h = "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) + "\r\n";
    h += "Server: tessera\r\nContent-Type: ";
    h.append(content_type);
    h += "\r\n";
    for (const auto& [k, v] : extra_headers_) h += k + ": " + v + "\r\n";
    for (const auto& [k, v] : extra) h += k + ": " + v + "\r\n";
    h += keep_alive_ ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
    return h;
  }

  // Waits for the first byte of the next request (idle timeout), unless bytes are already buffered (pipelined).
  void wait_for_request() {
    if (closed_) return;
    if (buffer_.size() > 0) return read_header();
    stream_.expires_after(ms(server_->options.idle_timeout_s));
    stream_.async_read_some(buffer_.prepare(4096), [self = shared_from_this()](beast::error_code ec, size_t n) {
      if (self->closed_) return;
      if (ec) return self->close();  // EOF, reset or the idle timeout
      self->buffer_.commit(n);
      self->read_header();
    });
  }

  void read_header() {
    if (closed_) return;
    parser_.emplace();
    parser_->body_limit(server_->options.max_body_bytes);
    parser_->header_limit(64 * 1024);
    stream_.expires_after(ms(server_->options.header_timeout_s));
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
  }

  // Headers are in: refuse a Transfer-Encoding a proxy could read differently, answer "Expect: 100-continue"
  // (curl sends it for bodies over 1 KiB and would otherwise wait a second), then read the body.
  void on_header(beast::error_code ec) {
    if (closed_) return;
    if (ec) return on_read(ec);
    const auto& msg = parser_->get();
    const auto te = msg.equal_range(http::field::transfer_encoding);
    if (te.first != te.second) {
      const bool lone_chunked = std::next(te.first) == te.second &&
                                iequals(trim(std::string_view(te.first->value().data(), te.first->value().size())),
                                        "chunked") &&
                                msg.find(http::field::content_length) == msg.end();
      if (!lone_chunked)
        return refuse_request(400, "Transfer-Encoding must be absent or exactly 'chunked' (and without Content-Length)");
    }
    const auto expect = msg[http::field::expect];
    if (iequals(std::string_view(expect.data(), expect.size()), "100-continue") && !parser_->is_done()) {
      static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      // Through the stream and its deadline: a client that reads nothing (its receive window full of pipelined
      // answers) must not hold the connection with a write that never completes.
      stream_.expires_after(ms(server_->options.body_timeout_s));
      asio::async_write(stream_, asio::buffer(kContinue),
                        [self = shared_from_this()](beast::error_code ec, size_t) {
                          if (ec) return self->close();
                          self->read_body();
                        });
      return;
    }
    read_body();
  }

  void read_body() {
    // Beast reads no more than the buffer has room for (and at most 64 KiB): the few KiB the header read left
    // would take a 1 MiB body in hundreds of reads, each a system call and a timer update on the io thread,
    // which is then slow to answer everyone else. The buffer holds the body's first bytes already, so the rest
    // fits in its free room unless the whole body is over its capacity; a chunked body's length is unknown.
    const bool large_body =
        !parser_->is_done() && (!parser_->content_length() || *parser_->content_length() > buffer_.capacity());
    if (large_body && buffer_.capacity() < kBodyReadBytes) {
      buffer_.reserve(kBodyReadBytes);
      grown_for_body_ = true;
    }
    stream_.expires_after(ms(server_->options.body_timeout_s));
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
  }

  // An answer to a request that is not handed to the handler; the connection closes after it.
  void refuse_request(int status, const std::string& message) {
    stream_.expires_never();
    keep_alive_ = false;
    unread_body_ = true;
    responding_ = true;
    streaming_ = false;
    stream_head_.clear();
    complete_ = true;
    on_close_ = nullptr;
    enqueue(canned_response(status, ErrorCode::InvalidRequest, message));
  }

  void on_read(beast::error_code ec) {
    if (closed_) return;
    const bool too_large = ec == http::error::body_limit;
    if (ec && !too_large) {
      // A request that is not HTTP gets a 400 before the connection closes; EOF, timeouts and resets just close.
      if (ec.category() == make_error_code(http::error::bad_target).category() && ec != http::error::end_of_stream &&
          ec != http::error::partial_message) {
        return refuse_request(400, "bad request: " + ec.message());
      }
      close();
      return;
    }
    stream_.expires_never();
    HttpRequest req;
    auto& msg = parser_->get();
    req.method = std::string(msg.method_string());
    req.target = std::string(msg.target());
    for (const auto& f : msg) req.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    req.remote = remote_;
    if (too_large) {
      req.body_too_large = true;
      unread_body_ = true;  // the rest of the body is unread: close after the answer
    } else {
      req.body = std::move(msg.body());
    }
    // An idle connection keeps a small buffer, whatever its last body took (thousands of them may be open); only
    // a buffer grown for a body shrinks, so that a client keeping a few KiB pipelined does not reallocate per request.
    if (grown_for_body_ && buffer_.size() <= kIdleBufferBytes) {
      buffer_.shrink_to_fit();
      grown_for_body_ = false;
    }
    keep_alive_ = !too_large && msg.keep_alive();
    chunked_ = msg.version() >= 11;
    head_only_ = msg.method() == http::verb::head;
    extra_headers_.clear();
    responding_ = true;
    complete_ = streaming_ = false;
    stream_head_.clear();
    on_close_ = nullptr;
    if (!too_large) start_watch();
    server_->handler(std::move(req), shared_from_this());
  }

  // After an answer to a request whose body was not read: stop sending, swallow what the client still sends
  // for a moment, then close; closing at once would reset the connection before the client read the answer.
  void linger_close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.expires_after(std::chrono::seconds(2));
    discard();
  }
  void discard() {
    stream_.async_read_some(asio::buffer(scratch_), [self = shared_from_this()](beast::error_code ec, size_t n) {
      self->discarded_ += n;
      if (ec || self->discarded_ > (16u << 20)) return self->close();
      self->discard();
    });
  }

  // A read kept open while the response is pending: EOF or a reset means the client left. Bytes that arrive
  // (a pipelined request) stay in buffer_ for the next parse.
  void start_watch() {
    if (watching_ || closed_ || buffer_.size() > 64 * 1024) return;
    watching_ = true;
    stream_.socket().async_read_some(buffer_.prepare(4096), [self = shared_from_this()](beast::error_code ec, size_t n) {
      self->on_watch(ec, n);
    });
  }

  void on_watch(beast::error_code ec, size_t n) {
    watching_ = false;
    if (closed_) return;
    if (!ec) {
      buffer_.commit(n);
      if (responding_) start_watch();
      else wait_for_request();
      return;
    }
    if (ec == asio::error::operation_aborted) {  // cancelled by finish_response to read the next request
      if (!responding_) wait_for_request();
      return;
    }
    close();  // EOF or reset: the client is gone
  }

  void fire_close() {
    if (auto cb = std::move(on_close_)) {
      on_close_ = nullptr;
      cb();
    }
  }

  void enqueue(std::string data) {
    if (closed_) return;
    queued_bytes_ += data.size();
    out_.push_back(std::move(data));
    // The cap is for streams, which keep growing while their reader lags; a complete response is one buffer,
    // already built, and the write timeout bounds how long it may wait for its reader.
    if (streaming_ && queued_bytes_ > server_->options.max_buffered_bytes) {
      close();  // the client does not keep up: drop it rather than buffer without bound
      return;
    }
    if (!writing_) do_write();
  }

  void do_write() {
    writing_ = true;
    // One write that the client does not take within the timeout drops the connection: a client that asked
    // and stopped reading would otherwise hold its sequence, its blocks and its buffers for ever.
    write_timer_.expires_after(ms(server_->options.write_timeout_s));
    write_timer_.async_wait([weak = weak_from_this(), write = ++n_writes_](beast::error_code ec) {
      if (ec) return;
      // The expiry may have been queued just as the write finished: only this write's timeout counts.
      if (auto self = weak.lock(); self && self->writing_ && self->n_writes_ == write) self->close();
    });
    asio::async_write(stream_.socket(), asio::buffer(out_.front()),
                      [self = shared_from_this()](beast::error_code ec, size_t) { self->on_write(ec); });
  }

  void on_write(beast::error_code ec) {
    writing_ = false;
    write_timer_.cancel();
    if (closed_) return;
    if (ec) {
      close();
      return;
    }
    queued_bytes_ -= out_.front().size();
    out_.pop_front();
    if (!out_.empty()) {
      do_write();
    } else if (complete_) {
      finish_response();
    }
  }

  void finish_response() {
    responding_ = false;
    on_close_ = nullptr;
    if (unread_body_) {
      linger_close();
      return;
    }
    if (!keep_alive_ || server_->stopping) {
      close();
      return;
    }
    if (watching_) {
      beast::error_code ec;
      stream_.socket().cancel(ec);  // on_watch(operation_aborted) starts the next read
    } else {
      wait_for_request();
    }
  }

  beast::tcp_stream stream_;
  std::shared_ptr<HttpServer::Impl> server_;
  asio::steady_timer write_timer_;
  static constexpr size_t kBodyReadBytes = 64 * 1024;
  static constexpr size_t kIdleBufferBytes = 8 * 1024;
  beast::flat_buffer buffer_;
  bool grown_for_body_ = false;  // buffer_ was reserved to kBodyReadBytes for a body: shrink it once it is read
  std::optional<http::request_parser<http::string_body>> parser_;
  std::string remote_;
  std::array<char, 4096> scratch_;  // linger_close() reads into it
  uint64_t discarded_ = 0;
  std::deque<std::string> out_;  // bytes waiting to be written, in order
  std::string stream_head_;      // a stream's status line and headers until its first bytes go out with them
  uint64_t queued_bytes_ = 0;
  uint64_t n_writes_ = 0;  // writes started: tells a stale write timeout from the current one
  std::function<void()> on_close_;
  Headers extra_headers_;    // add_response_header(), for the current request
  bool keep_alive_ = true;
  bool chunked_ = true;      // HTTP/1.1: streams are chunked; HTTP/1.0: plain, ended by closing
  bool head_only_ = false;   // HEAD: headers as for GET, no body
  bool unread_body_ = false; // part of the request was not read: linger, then close after the answer
  bool refusing_ = false;    // over the connection cap: counted in n_refusing
  bool responding_ = false;  // a request was handed to the handler and its response is not fully written
  bool streaming_ = false;   // start_stream() was called
  bool complete_ = false;    // the response's last bytes are queued
  bool writing_ = false;
  bool watching_ = false;
  bool closed_ = false;
};

void HttpServer::Impl::accept() {
  acceptor.async_accept([self = shared_from_this()](beast::error_code ec, tcp::socket s) {
    self->on_accept(ec, std::move(s));
  });
}

void HttpServer::Impl::on_accept(beast::error_code ec, tcp::socket s) {
  if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
  if (ec) {
    if (out_of_resources(ec)) {
      // Pause, doubling up to a second, so the io thread serves the connections it has instead of spinning.
      backoff = std::clamp(backoff * 2, std::chrono::milliseconds(10), std::chrono::milliseconds(1000));
      backoff_timer.expires_after(backoff);
      backoff_timer.async_wait([self = shared_from_this()](beast::error_code ec) {
        if (!ec && self->acceptor.is_open()) self->accept();
      });
      return;
    }
    accept();  // a connection that failed on its way in (reset, aborted): the next one
    return;
  }
  backoff = std::chrono::milliseconds(0);
  beast::error_code ignored;
  s.set_option(tcp::no_delay(true), ignored);
  auto session = std::make_shared<Session>(std::move(s), shared_from_this());
  if (sessions.size() - n_refusing > options.max_connections) {
    // Refusing costs a descriptor and a few hundred bytes for up to two seconds; past a few hundred of those
    // at once, close without a word.
    if (n_refusing < 256) session->refuse();
    else session->close();
  } else {
    session->start();
  }
  accept();
}

HttpServer::HttpServer(asio::io_context& ioc, HttpOptions options, Handler handler)
    : impl_(std::make_shared<Impl>(ioc, std::move(options), std::move(handler))) {}

HttpServer::~HttpServer() {
  beast::error_code ec;
  impl_->acceptor.close(ec);
  impl_->backoff_timer.cancel();
}

uint16_t HttpServer::listen() {
  beast::error_code ec;
  const auto address = asio::ip::make_address(impl_->options.host, ec);
  if (ec) fail("invalid listen address '{}': {}", impl_->options.host, ec.message());
  const tcp::endpoint ep(address, impl_->options.port);
  auto& a = impl_->acceptor;
  a.open(ep.protocol(), ec);
  if (!ec) a.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(ep, ec);
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) fail("cannot listen on {}:{}: {}", impl_->options.host, impl_->options.port, ec.message());
  impl_->accept();
  return a.local_endpoint().port();
}

void HttpServer::stop_accepting() {
  impl_->stopping = true;
  beast::error_code ec;
  impl_->acceptor.close(ec);
  impl_->backoff_timer.cancel();
  std::vector<std::shared_ptr<Session>> live;
  for (Session* s : impl_->sessions) live.push_back(s->shared_from_this());
  for (auto& s : live) s->close_if_idle();
}

void HttpServer::close_all() {
  impl_->stopping = true;
  beast::error_code ec;
  impl_->acceptor.close(ec);
  impl_->backoff_timer.cancel();
  std::vector<std::shared_ptr<Session>> live;
  for (Session* s : impl_->sessions) live.push_back(s->shared_from_this());
  for (auto& s : live) s->close();
}

size_t HttpServer::n_connections() const { return impl_->sessions.size(); }

}  // namespace tessera::server
