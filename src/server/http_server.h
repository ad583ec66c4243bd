// HTTP/1.1 server on Boost.Beast: asynchronous, so one io_context thread holds thousands of open streams.
// It parses requests (with a body limit), hands each to a Handler with a Responder, and writes what the
// handler answers: a whole response or a chunked stream. While a response is pending it keeps a read open on
// the socket, so a client that goes away is noticed at once (Responder::on_close), not at the next write.
// Everything here runs on the io_context's thread; handlers and responders must be used from it.
#pragma once

#include <boost/asio/io_context.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessera::server {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // path and query
  Headers headers;
  std::string body;
  std::string remote;          // client address
  bool body_too_large = false; // the body passed the limit: answer 413 (the body is empty)

  // Case-insensitive header lookup; empty when absent.
  std::string_view header(std::string_view name) const;
  std::string_view path() const;  // target without the query
};

// The answer side of one request. Exactly one of send() or start_stream()...end_stream().
class Responder {
 public:
  virtual ~Responder() = default;
  virtual void send(int status, std::string_view content_type, std::string body, const Headers& extra = {}) = 0;
  virtual void start_stream(int status, std::string_view content_type, const Headers& extra = {}) = 0;
  virtual void write(std::string_view data) = 0;  // one chunk of the stream
  virtual void end_stream() = 0;
  // False once the client has gone (or the connection failed); writes are then dropped.
  virtual bool open() const = 0;
  // Called once if the client goes away before the response is complete.
  virtual void on_close(std::function<void()> callback) = 0;
};

using Handler = std::function<void(HttpRequest&&, std::shared_ptr<Responder>)>;

struct HttpOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;  // 0: any free port
  uint64_t max_body_bytes = 1 << 20;
  int idle_timeout_s = 60;               // a keep-alive connection with no request is closed after this
  uint64_t max_buffered_bytes = 8 << 20; // a client that reads slower than this falls behind is dropped
};

class Session;

class HttpServer {
 public:
  HttpServer(boost::asio::io_context& ioc, HttpOptions options, Handler handler);
  ~HttpServer();

  // Binds and starts accepting; returns the bound port. Throws tessera::Error when the address is taken.
  uint16_t listen();
  // Closes the listening socket and marks every connection to close after its current response; idle
  // keep-alive connections are closed now.
  void stop_accepting();
  // Closes every connection now (end of drain).
  void close_all();
  size_t n_connections() const;

 private:
  friend class Session;
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace tessera::server
