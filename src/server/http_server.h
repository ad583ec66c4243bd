// HTTP/1.1 server on Boost.Beast: asynchronous, so one io_context thread holds thousands of open streams.
// It parses requests (with a body limit), hands each to a Handler with a Responder, and writes what the
// handler answers: a whole response or a stream (chunked; plain and closed at the end for HTTP/1.0 clients;
// headers only for HEAD). While a response is pending it keeps a read open on the socket, so a client that goes
// away is noticed at once (Responder::on_close), not at the next write.
//
// What one client can hold is bounded: a connection cap (above it a new connection gets a 503 and is closed),
// a wait for the first byte of a request (idle), separate limits for the headers and for the body (a slowloris
// sending a byte every few seconds is dropped), a write that the client does not read within the write timeout
// drops the connection (and so cancels its generation), and a stream that falls too far behind its reader is
// dropped. A request with a Transfer-Encoding other than a lone "chunked" is refused (request smuggling behind
// a proxy that reads it differently). When accept() fails for lack of descriptors, accepting backs off instead
// of spinning. Everything here runs on the io_context's thread; handlers and responders must be used from it.
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

// The answer side of one request. Exactly one of send() or start_stream()...end_stream(); a send() after
// start_stream() (an error while streaming) cannot be framed and drops the connection.
class Responder {
 public:
  virtual ~Responder() = default;
  // A header every response to this request carries (CORS); call before send() or start_stream().
  virtual void add_response_header(std::string name, std::string value) = 0;
  virtual void send(int status, std::string_view content_type, std::string body, const Headers& extra = {}) = 0;
  virtual void start_stream(int status, std::string_view content_type, const Headers& extra = {}) = 0;
  virtual void write(std::string_view data) = 0;  // one chunk of the stream
  virtual void end_stream() = 0;
  // False once the client has gone (or the connection failed); writes are then dropped.
  virtual bool open() const = 0;
  // Called once if the client goes away before the response is complete.
  virtual void on_close(std::function<void()> callback) = 0;
  // Drops the connection now (a response that cannot be completed).
  virtual void abort() = 0;
};

using Handler = std::function<void(HttpRequest&&, std::shared_ptr<Responder>)>;

struct HttpOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;  // 0: any free port
  uint64_t max_body_bytes = 1 << 20;
  size_t max_connections = 1024;         // open connections; one more gets a 503 and is closed
  double idle_timeout_s = 60;            // a connection that starts no request within this is closed
  double header_timeout_s = 10;          // from a request's first byte to the end of its headers
  double body_timeout_s = 30;            // for the whole body, once the headers are in
  double write_timeout_s = 30;           // a write the client does not take within this drops the connection
  uint64_t max_buffered_bytes = 8 << 20; // a stream whose reader falls this far behind is dropped (a complete
                                         // response is exempt: it is one buffer, already built)
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
  size_t n_connections() const;  // including those being refused

 private:
  friend class Session;
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace tessera::server
