// The HTTP layer against raw sockets on loopback: Transfer-Encoding smuggling refused, HEAD without a body,
// HTTP/1.0 streams without chunking, the connection cap's 503, separate idle/header/body timeouts (slowloris),
// the write timeout for a client that does not read, a complete response larger than the stream buffer, and large
// bodies with requests pipelined behind them.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "server/http_server.h"

namespace tessera::server {
namespace {

using namespace std::chrono_literals;
using Seconds = std::chrono::duration<double>;

// An HttpServer with `handler`, its io_context on a thread of its own.
class TestServer {
 public:
  TestServer(HttpOptions options, Handler handler) {
    options.port = 0;
    server_ = std::make_unique<HttpServer>(ioc_, options, std::move(handler));
    port = server_->listen();
    thread_ = std::thread([this] { ioc_.run(); });
  }
  ~TestServer() {
    boost::asio::post(ioc_, [this] { server_->close_all(); });
    ioc_.stop();
    thread_.join();
  }
  boost::asio::io_context& ioc() { return ioc_; }

  uint16_t port = 0;

 private:
  boost::asio::io_context ioc_;
  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
};

// A blocking client socket; -1 on failure.
int connect_to(uint16_t port, int receive_buffer = 0) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (receive_buffer > 0) ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

void send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return;
    data.remove_prefix(size_t(n));
  }
}

// Reads until the peer closes or `limit` passes; `closed` says which.
std::string read_until_close(int fd, std::chrono::milliseconds limit, bool* closed = nullptr) {
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  char buf[65536];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, int(left.count())) <= 0) break;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {
      if (closed) *closed = true;
      return out;
    }
    out.append(buf, size_t(n));
  }
  if (closed) *closed = false;
  return out;
}

// Reads one response whose body has a Content-Length.
std::string read_response(int fd) {
  std::string out;
  char buf[65536];
  size_t need = std::string::npos;
  while (out.size() < need) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 5000) <= 0) break;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, size_t(n));
    const size_t end = out.find("\r\n\r\n");
    if (end != std::string::npos && need == std::string::npos) {
      const size_t cl = out.find("Content-Length: ");
      need = end + 4 + (cl < end ? std::stoul(out.substr(cl + 16)) : 0);
    }
  }
  return out;
}

int status_of(const std::string& response) { return response.size() > 12 ? std::stoi(response.substr(9, 3)) : 0; }

// Echoes the body back with a 200.
Handler echo(std::atomic<int>* calls = nullptr) {
  return [calls](HttpRequest&& req, std::shared_ptr<Responder> r) {
    if (calls) ++*calls;
    r->send(200, "text/plain", req.body);
  };
}

// Request smuggling: a proxy that reads a Transfer-Encoding differently from this server splits requests
// elsewhere. Anything but one lone "chunked" (and no Content-Length with it) is refused.
TEST(HttpServer, RefusesTransferEncodingsOtherThanALoneChunked) {
  std::atomic<int> calls = 0;
  TestServer s({}, echo(&calls));
  for (const std::string te : {"Transfer-Encoding: gzip, chunked\r\n", "Transfer-Encoding: gzip\r\n",
                               "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
                               "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", "Transfer-Encoding: identity\r\n"}) {
    const int fd = connect_to(s.port);
    send_all(fd, "POST /x HTTP/1.1\r\nHost: h\r\n" + te + "\r\n5\r\nhello\r\n0\r\n\r\n");
    bool closed = false;
    const std::string r = read_until_close(fd, 5000ms, &closed);
    EXPECT_EQ(status_of(r), 400) << te << r;
    EXPECT_NE(r.find("\"type\":\"invalid_request_error\""), std::string::npos) << r;
    EXPECT_TRUE(closed) << te;
    ::close(fd);
  }
  EXPECT_EQ(calls.load(), 0);
  const int fd = connect_to(s.port);
  send_all(fd, "POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
  const std::string r = read_response(fd);
  EXPECT_EQ(status_of(r), 200) << r;
  EXPECT_TRUE(r.ends_with("\r\n\r\nhello")) << r;
  ::close(fd);
}

// HEAD gets the headers GET would (Content-Length included) and no body, so the next response on the
// connection is not misread.
TEST(HttpServer, HeadAnswersWithoutABody) {
  TestServer s({}, [](HttpRequest&&, std::shared_ptr<Responder> r) { r->send(200, "text/plain", "abcdef"); });
  const int fd = connect_to(s.port);
  send_all(fd, "HEAD /x HTTP/1.1\r\nHost: h\r\n\r\nGET /x HTTP/1.1\r\nHost: h\r\n\r\n");
  const std::string both = read_until_close(fd, 1500ms);
  const size_t second = both.find("HTTP/1.1 200", 1);
  ASSERT_NE(second, std::string::npos) << both;
  const std::string head = both.substr(0, second);
  EXPECT_NE(head.find("Content-Length: 6\r\n"), std::string::npos) << head;
  EXPECT_TRUE(head.ends_with("\r\n\r\n")) << "HEAD carried a body: " << head;
  EXPECT_TRUE(both.ends_with("\r\n\r\nabcdef")) << both;
  ::close(fd);
}

// HTTP/1.0 has no chunked encoding: a stream goes out plain and ends when the connection closes.
TEST(HttpServer, Http10ClientsGetAPlainStream) {
  TestServer s({}, [](HttpRequest&&, std::shared_ptr<Responder> r) {
    r->start_stream(200, "text/event-stream");
    r->write("data: one\n\n");
    r->write("data: two\n\n");
    r->end_stream();
  });
  int fd = connect_to(s.port);
  send_all(fd, "GET /s HTTP/1.0\r\n\r\n");
  bool closed = false;
  std::string r = read_until_close(fd, 5000ms, &closed);
  EXPECT_TRUE(closed);
  EXPECT_EQ(r.find("Transfer-Encoding"), std::string::npos) << r;
  EXPECT_NE(r.find("Connection: close"), std::string::npos) << r;
  EXPECT_TRUE(r.ends_with("\r\n\r\ndata: one\n\ndata: two\n\n")) << r;
  ::close(fd);
  fd = connect_to(s.port);  // HTTP/1.1: chunked as before
  send_all(fd, "GET /s HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
  r = read_until_close(fd, 5000ms);
  EXPECT_NE(r.find("Transfer-Encoding: chunked"), std::string::npos) << r;
  EXPECT_TRUE(r.ends_with("0\r\n\r\n")) << r;
  ::close(fd);
}

// A stream's head waits for its first bytes and goes out with them in one write: sent alone, it could reach a
// client (or a load balancer, which may then no longer retry elsewhere) before a replica died with nothing more.
// A stream that ends without data still sends its head and end.
TEST(HttpServer, AStreamsHeadGoesOutWithItsFirstBytes) {
  for (const bool with_data : {true, false}) {
    std::shared_ptr<Responder> held;
    TestServer s({}, [&](HttpRequest&&, std::shared_ptr<Responder> r) {
      r->start_stream(200, "text/event-stream");
      held = std::move(r);
    });
    const int fd = connect_to(s.port);
    send_all(fd, "GET /s HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
    EXPECT_EQ(read_until_close(fd, 300ms), "") << "the head went out before any data";
    std::promise<void> sent;
    boost::asio::post(s.ioc(), [&] {
      if (with_data) held->write("data: one\n\n");
      held->end_stream();
      held.reset();
      sent.set_value();
    });
    sent.get_future().wait();
    const std::string r = read_until_close(fd, 5000ms);
    EXPECT_TRUE(r.starts_with("HTTP/1.1 200 OK\r\n")) << r;
    EXPECT_NE(r.find("Transfer-Encoding: chunked\r\n"), std::string::npos) << r;
    EXPECT_TRUE(r.ends_with(with_data ? "\r\n\r\nb\r\ndata: one\n\n\r\n0\r\n\r\n" : "\r\n\r\n0\r\n\r\n")) << r;
    ::close(fd);
  }
}

TEST(HttpServer, ConnectionsOverTheCapGetA503AndAreClosed) {
  HttpOptions o;
  o.max_connections = 2;
  TestServer s(o, echo());
  const int a = connect_to(s.port), b = connect_to(s.port);
  std::this_thread::sleep_for(100ms);  // both accepted
  const int c = connect_to(s.port);
  bool closed = false;
  const std::string r = read_until_close(c, 5000ms, &closed);
  EXPECT_EQ(status_of(r), 503) << r;
  EXPECT_NE(r.find("\"code\":\"service_unavailable\""), std::string::npos) << r;
  EXPECT_TRUE(closed);
  ::close(c);
  ::close(a);
  std::this_thread::sleep_for(100ms);  // a's slot is free again
  send_all(b, "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nhi");
  EXPECT_EQ(status_of(read_response(b)), 200);
  const int d = connect_to(s.port);
  send_all(d, "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nok");
  EXPECT_EQ(status_of(read_response(d)), 200);
  ::close(b);
  ::close(d);
}

// Slowloris: a byte every few hundred milliseconds kept a connection for the whole idle timeout. The headers
// now have their own limit from their first byte, and so has the body; a connection that has sent nothing waits
// for the idle timeout only.
TEST(HttpServer, SlowHeadersAndBodiesAreDroppedAtTheirTimeouts) {
  HttpOptions o;
  o.idle_timeout_s = 30;
  o.header_timeout_s = 0.6;
  o.body_timeout_s = 0.6;
  TestServer s(o, echo());
  const int idle = connect_to(s.port);
  const int slow = connect_to(s.port);
  const auto t0 = std::chrono::steady_clock::now();
  bool closed = false;
  const std::string request = "GET /slowly HTTP/1.1\r\nHost: h\r\n";
  for (size_t i = 0; i < request.size() && !closed; ++i) {
    send_all(slow, request.substr(i, 1));
    read_until_close(slow, 150ms, &closed);
  }
  const double held = Seconds(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(closed) << "the slow client was still connected after " << held << " s";
  EXPECT_LT(held, 1.5);
  bool idle_closed = true;
  read_until_close(idle, 10ms, &idle_closed);
  EXPECT_FALSE(idle_closed) << "a connection that sent nothing waits for the idle timeout";
  const int body = connect_to(s.port);
  send_all(body, "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 100\r\n\r\nonly ten b");
  const auto t1 = std::chrono::steady_clock::now();
  read_until_close(body, 5000ms, &closed);
  EXPECT_TRUE(closed);
  EXPECT_LT(Seconds(std::chrono::steady_clock::now() - t1).count(), 1.5);
  for (int fd : {idle, slow, body}) ::close(fd);
}

// A client that asks and never reads kept its response (and, for a generation, its sequence) for ever: one write
// that it does not take within the write timeout now drops the connection, and the handler hears of it.
TEST(HttpServer, AClientThatDoesNotReadIsDroppedAtTheWriteTimeout) {
  HttpOptions o;
  o.write_timeout_s = 0.5;
  o.max_buffered_bytes = uint64_t(1) << 32;  // so that only the write timeout can end it
  std::atomic<bool> closed_seen = false;
  std::chrono::steady_clock::time_point closed_at;
  std::shared_ptr<boost::asio::steady_timer> timer;
  std::function<void(std::shared_ptr<Responder>)> pump;
  TestServer* server = nullptr;
  TestServer s(o, [&](HttpRequest&&, std::shared_ptr<Responder> r) {
    r->on_close([&] {
      closed_at = std::chrono::steady_clock::now();
      closed_seen = true;
    });
    r->start_stream(200, "text/event-stream");
    timer = std::make_shared<boost::asio::steady_timer>(server->ioc());
    pump = [&](std::shared_ptr<Responder> r) {
      if (!r->open()) return;
      r->write(std::string(64 << 10, 'x'));
      timer->expires_after(5ms);
      timer->async_wait([&, r](const boost::system::error_code& ec) {
        // The wait may have completed before the test's teardown dropped the pump (both on the io thread).
        if (!ec && pump) pump(r);
      });
    };
    pump(r);
  });
  server = &s;
  const int fd = connect_to(s.port, 4096);
  send_all(fd, "GET /stream HTTP/1.1\r\nHost: h\r\n\r\n");
  const auto t0 = std::chrono::steady_clock::now();
  while (!closed_seen && std::chrono::steady_clock::now() - t0 < 10s) std::this_thread::sleep_for(20ms);
  ASSERT_TRUE(closed_seen) << "the server kept writing to a client that reads nothing";
  EXPECT_LT(Seconds(closed_at - t0).count(), 5.0);
  ::close(fd);
  // The timer must go before its io_context does: drop it on the io thread, and wait.
  std::promise<void> dropped;
  boost::asio::post(s.ioc(), [&] {
    timer.reset();
    pump = nullptr;
    dropped.set_value();
  });
  dropped.get_future().wait();
}

// The stream buffer cap is for streams; a complete response larger than it was dropped without a word. It is
// sent whole now (the write timeout bounds how long it may wait for its reader).
TEST(HttpServer, ACompleteResponseLargerThanTheStreamBufferIsSentWhole) {
  HttpOptions o;
  o.max_buffered_bytes = 64 << 10;
  const std::string big(4 << 20, 'b');
  TestServer s(o, [&](HttpRequest&&, std::shared_ptr<Responder> r) { r->send(200, "text/plain", big); });
  const int fd = connect_to(s.port);
  send_all(fd, "GET /big HTTP/1.1\r\nHost: h\r\n\r\n");
  const std::string r = read_response(fd);
  EXPECT_EQ(status_of(r), 200);
  EXPECT_TRUE(r.ends_with("\r\n\r\n" + big)) << r.size();
  ::close(fd);
}

// Large bodies are read in large pieces (the buffer grows for them, then shrinks back): the bytes of the requests
// pipelined behind them must survive both, in order, whether the body has a length or comes in chunks.
TEST(HttpServer, LargeBodiesArriveWholeWithTheRequestsPipelinedBehindThem) {
  TestServer s({}, echo());
  std::string sized(300 << 10, 's'), chunked(100 << 10, 'c');
  for (size_t i = 0; i < sized.size(); i += 977) sized[i] = char('a' + i % 26);
  for (size_t i = 0; i < chunked.size(); i += 613) chunked[i] = char('A' + i % 26);
  char hex[16];
  std::snprintf(hex, sizeof hex, "%zx", chunked.size());
  const int fd = connect_to(s.port);
  send_all(fd, "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: " + std::to_string(sized.size()) + "\r\n\r\n" + sized +
                   "POST /b HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n" + hex + "\r\n" + chunked +
                   "\r\n0\r\n\r\nPOST /c HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\nConnection: close\r\n\r\nlast");
  bool closed = false;
  const std::string all = read_until_close(fd, 5000ms, &closed);
  EXPECT_TRUE(closed);
  std::vector<std::string> bodies;
  for (size_t at = 0; at < all.size();) {
    const size_t end = all.find("\r\n\r\n", at), cl = all.find("Content-Length: ", at);
    ASSERT_TRUE(end != std::string::npos && cl < end) << all.substr(at, 200);
    const size_t length = std::stoul(all.substr(cl + 16));
    EXPECT_EQ(status_of(all.substr(at)), 200);
    bodies.push_back(all.substr(end + 4, length));
    at = end + 4 + length;
  }
  ASSERT_EQ(bodies.size(), 3u);
  EXPECT_TRUE(bodies[0] == sized) << bodies[0].size();
  EXPECT_TRUE(bodies[1] == chunked) << bodies[1].size();
  EXPECT_EQ(bodies[2], "last");
  ::close(fd);
}

}  // namespace
}  // namespace tessera::server
