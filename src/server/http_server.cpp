// Beast sessions: request parsing, a per-connection write queue, disconnect detection, keep-alive.
#include "server/http_server.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <array>
#include <deque>
#include <optional>
#include <unordered_set>

#include "core/error.h"

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

const char* reason_phrase(int status) {
  const auto s = http::obsolete_reason(http::int_to_status(unsigned(status)));
  return s.empty() ? "Unknown" : s.data();
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
      : ioc(ioc), acceptor(ioc), options(std::move(options)), handler(std::move(handler)) {}
  void accept();

  asio::io_context& ioc;
  tcp::acceptor acceptor;
  HttpOptions options;
  Handler handler;
  bool stopping = false;                  // after stop_accepting(): no keep-alive
  std::unordered_set<Session*> sessions;  // live sessions (io thread only)
};

class Session : public Responder, public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, std::shared_ptr<HttpServer::Impl> server)
      : stream_(std::move(socket)), server_(std::move(server)) {
    server_->sessions.insert(this);
    beast::error_code ec;
    const auto ep = stream_.socket().remote_endpoint(ec);
    if (!ec) remote_ = ep.address().to_string();
  }
  ~Session() override { server_->sessions.erase(this); }

  void start() { do_read(); }

  // Closes now if no response is pending (drain); otherwise after it.
  void close_if_idle() {
    if (!responding_) close();
  }
  void close() {
    if (closed_) return;
    closed_ = true;
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.close();
    if (responding_ && !complete_) fire_close();
  }

  // ---- Responder ----
  void send(int status, std::string_view content_type, std::string body, const Headers& extra) override {
    if (complete_) return;
    std::string head = head_lines(status, content_type, extra);
    head += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n";
    complete_ = true;
    enqueue(std::move(head) + body);
  }
  void start_stream(int status, std::string_view content_type, const Headers& extra) override {
    if (complete_ || streaming_) return;
    streaming_ = true;
    std::string head = head_lines(status, content_type, extra);
    head += "Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n";
    enqueue(std::move(head));
  }
  void write(std::string_view data) override {
    if (!streaming_ || complete_ || data.empty()) return;
    char size[24];
    const int n = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
    std::string chunk;
    chunk.reserve(size_t(n) + data.size() + 2);
    chunk.append(size, size_t(n)).append(data).append("\r\n");
    enqueue(std::move(chunk));
  }
  void end_stream() override {
    if (!streaming_ || complete_) return;
    complete_ = true;
    enqueue("0\r\n\r\n");
  }
  bool open() const override { return !closed_; }
  void on_close(std::function<void()> callback) override { on_close_ = std::move(callback); }

 private:
  std::string head_lines(int status, std::string_view content_type, const Headers& extra) {
    keep_alive_ = keep_alive_ && !server_->stopping && !body_too_large_;
    std::string h = "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) + "\r\n";
    h += "Server: tessera\r\nContent-Type: ";
    h.append(content_type);
    h += "\r\n";
    for (const auto& [k, v] : extra) h += k + ": " + v + "\r\n";
    h += keep_alive_ ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
    return h;
  }

  void do_read() {
    if (closed_) return;
    parser_.emplace();
    parser_->body_limit(server_->options.max_body_bytes);
    parser_->header_limit(64 * 1024);
    stream_.expires_after(std::chrono::seconds(server_->options.idle_timeout_s));
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
  }

  // Headers are in: answer "Expect: 100-continue" (curl sends it for bodies over 1 KiB and would otherwise
  // wait a second), then read the body.
  void on_header(beast::error_code ec) {
    if (closed_) return;
    if (ec) return on_read(ec);
    const auto expect = parser_->get()[http::field::expect];
    if (iequals(std::string_view(expect.data(), expect.size()), "100-continue") && !parser_->is_done()) {
      static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      asio::async_write(stream_.socket(), asio::buffer(kContinue),
                        [self = shared_from_this()](beast::error_code ec, size_t) {
                          if (ec) return self->close();
                          self->read_body();
                        });
      return;
    }
    read_body();
  }

  void read_body() {
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    if (closed_) return;
    const bool too_large = ec == http::error::body_limit;
    if (ec && !too_large) {
      // A request that is not HTTP gets a bare 400 before the connection closes; EOF, timeouts and resets
      // just close.
      if (ec.category() == make_error_code(http::error::bad_target).category() && ec != http::error::end_of_stream &&
          ec != http::error::partial_message) {
        keep_alive_ = false;
        responding_ = true;
        send(400, "text/plain", "bad request\n", {});
        return;
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
      body_too_large_ = true;  // the rest of the body is unread: close after the answer
    } else {
      req.body = std::move(msg.body());
    }
    keep_alive_ = !too_large && msg.keep_alive();
    responding_ = true;
    complete_ = streaming_ = false;
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
      else do_read();
      return;
    }
    if (ec == asio::error::operation_aborted) {  // cancelled by finish_response to read the next request
      if (!responding_) do_read();
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
    if (queued_bytes_ > server_->options.max_buffered_bytes) {
      close();  // the client does not keep up: drop it rather than buffer without bound
      return;
    }
    if (!writing_) do_write();
  }

  void do_write() {
    writing_ = true;
    asio::async_write(stream_.socket(), asio::buffer(out_.front()),
                      [self = shared_from_this()](beast::error_code ec, size_t) { self->on_write(ec); });
  }

  void on_write(beast::error_code ec) {
    writing_ = false;
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
    if (body_too_large_) {
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
      do_read();
    }
  }

  beast::tcp_stream stream_;
  std::shared_ptr<HttpServer::Impl> server_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::string remote_;
  std::array<char, 4096> scratch_;  // linger_close() reads into it
  uint64_t discarded_ = 0;
  std::deque<std::string> out_;  // bytes waiting to be written, in order
  uint64_t queued_bytes_ = 0;
  std::function<void()> on_close_;
  bool keep_alive_ = true;
  bool body_too_large_ = false;
  bool responding_ = false;  // a request was handed to the handler and its response is not fully written
  bool streaming_ = false;   // start_stream() was called
  bool complete_ = false;    // the response's last bytes are queued
  bool writing_ = false;
  bool watching_ = false;
  bool closed_ = false;
};

void HttpServer::Impl::accept() {
  acceptor.async_accept([self = shared_from_this()](beast::error_code ec, tcp::socket s) {
    if (ec == asio::error::operation_aborted || !self->acceptor.is_open()) return;
    if (!ec) {
      beast::error_code ignored;
      s.set_option(tcp::no_delay(true), ignored);
      std::make_shared<Session>(std::move(s), self)->start();
    }
    self->accept();  // on EMFILE and other transient errors too: keep serving the connections we have
  });
}

HttpServer::HttpServer(asio::io_context& ioc, HttpOptions options, Handler handler)
    : impl_(std::make_shared<Impl>(ioc, std::move(options), std::move(handler))) {}

HttpServer::~HttpServer() {
  beast::error_code ec;
  impl_->acceptor.close(ec);
}

uint16_t HttpServer::listen() {
  beast::error_code ec;
  const auto address = asio::ip::make_address(impl_->options.host, ec);
  if (ec) fail("invalid --host '{}': {}", impl_->options.host, ec.message());
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
  std::vector<std::shared_ptr<Session>> live;
  for (Session* s : impl_->sessions) live.push_back(s->shared_from_this());
  for (auto& s : live) s->close_if_idle();
}

void HttpServer::close_all() {
  impl_->stopping = true;
  beast::error_code ec;
  impl_->acceptor.close(ec);
  std::vector<std::shared_ptr<Session>> live;
  for (Session* s : impl_->sessions) live.push_back(s->shared_from_this());
  for (auto& s : live) s->close();
}

size_t HttpServer::n_connections() const { return impl_->sessions.size(); }

}  // namespace tessera::server
