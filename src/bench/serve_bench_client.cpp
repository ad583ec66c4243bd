// Streaming requests for the serving benchmark: Boost.Beast on one io_context, one connection per request.
// A fresh connection costs tens of microseconds on loopback, counted in TTFT as a client's connection would be.
#include "bench/serve_bench_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <chrono>
#include <deque>
#include <functional>
#include <limits>
#include <memory>

#include "core/error.h"
#include "core/fd_limit.h"
#include "server/sse.h"

namespace tessera {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

std::chrono::steady_clock::duration to_duration(double seconds) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

std::string host_header(const HttpUrl& url) {
  const bool v6 = url.host.find(':') != std::string::npos;
  return (v6 ? "[" + url.host + "]" : url.host) + ":" + std::to_string(url.port);
}

tcp::resolver::results_type resolve(asio::io_context& ioc, const HttpUrl& url) {
  tcp::resolver resolver(ioc);
  beast::error_code ec;
  auto results = resolver.resolve(url.host, std::to_string(url.port), ec);
  if (ec) fail("cannot connect to http://{}: cannot resolve '{}': {}", host_header(url), url.host, ec.message());
  return results;
}

// Everything the requests of one run share; outlives them (the io_context runs to completion inside run_requests).
struct Shared {
  const ClientOptions& options;
  tcp::resolver::results_type endpoints;
  std::string target, host;
};

// One streaming request: connect, write, read SSE events until `data: [DONE]`, then close. `done` is called
// exactly once with the result.
class Request : public std::enable_shared_from_this<Request> {
 public:
  using Done = std::function<void(size_t, RequestResult&&)>;
  Request(asio::io_context& ioc, const Shared& shared, const BenchPrompt& prompt, size_t index, Done done)
      : stream_(ioc), shared_(shared), prompt_(prompt), index_(index), done_(std::move(done)) {}

  void start() {
    started_ = Clock::now();
    stream_.expires_after(to_duration(shared_.options.timeout_s));  // bounds every step below
    stream_.async_connect(shared_.endpoints, [self = shared_from_this()](beast::error_code ec, const tcp::endpoint&) {
      self->on_connect(ec);
    });
  }

 private:
  void on_connect(beast::error_code ec) {
    if (ec) return fail_with(ec, FailureKind::Connect, "cannot connect");
    req_.method(http::verb::post);
    req_.target(shared_.target);
    req_.version(11);
    req_.set(http::field::host, shared_.host);
    req_.set(http::field::content_type, "application/json");
    req_.set(http::field::accept, "text/event-stream");
    if (!shared_.options.api_key.empty()) req_.set(http::field::authorization, "Bearer " + shared_.options.api_key);
    req_.body() = request_body(prompt_, shared_.options.request).dump();
    req_.prepare_payload();
    http::async_write(stream_, req_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->fail_with(ec, FailureKind::Connect, "cannot send the request");
      self->parser_.body_limit(std::numeric_limits<std::uint64_t>::max());
      self->read();
    });
  }

  void read() {
    http::async_read_some(stream_, buffer_, parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
      self->on_read(ec);
    });
  }

  void on_read(beast::error_code ec) {
    if (finished_) return;
    if (parser_.is_header_done() && parser_.get().result_int() != 200) {
      if (!ec && !parser_.is_done() && parser_.get().body().size() < (1 << 16)) return read();
      if (ec == beast::error::timeout) return fail_with(ec, FailureKind::Timeout, "timed out");
      return finish(FailureKind::Http, fmt::format("HTTP {}: {}", parser_.get().result_int(),
                                                   error_body_message(parser_.get().body())));
    }
    std::string& body = parser_.get().body();
    if (!body.empty()) {
      const Clock::time_point now = Clock::now();
      sse_.feed(body);
      body.clear();
      server::SseEvent event;
      while (sse_.next(event)) {
        if (!event.error.empty())
          return finish(FailureKind::StreamError, "error event: " + error_body_message(event.error));
        const std::string& data = event.data;
        if (data.empty()) continue;  // a comment or keep-alive event
        if (data == "[DONE]") {
          result_.e2e_s = seconds_between(started_, now);
          return finish(FailureKind::None, {});
        }
        const StreamChunk chunk = parse_stream_chunk(data, shared_.options.request.chat);
        if (!chunk.valid)
          return finish(FailureKind::StreamError, "an event that is not a JSON object: " + data.substr(0, 120));
        if (!chunk.error.empty()) return finish(FailureKind::StreamError, "error event: " + chunk.error);
        if (chunk.has_content) {
          const double t = seconds_between(started_, now);
          if (!result_.has_first_token) {
            result_.has_first_token = true;
            result_.ttft_s = t;
          } else {
            result_.itl_s.push_back(t - last_content_s_);
          }
          last_content_s_ = t;
          ++result_.content_chunks;
        }
        if (chunk.prompt_tokens >= 0) result_.prompt_tokens = chunk.prompt_tokens;
        if (chunk.completion_tokens >= 0) result_.usage_output_tokens = chunk.completion_tokens;
      }
    }
    if (ec == beast::error::timeout) return fail_with(ec, FailureKind::Timeout, "timed out");
    if (parser_.is_done()) return finish(FailureKind::Truncated, "the stream ended without data: [DONE]");
    if (ec) return fail_with(ec, FailureKind::Truncated, "the connection closed before data: [DONE]");
    read();
  }

  void fail_with(beast::error_code ec, FailureKind kind, const char* what) {
    if (ec == beast::error::timeout) {
      return finish(FailureKind::Timeout, fmt::format("no complete response within the {} s timeout",
                                                      shared_.options.timeout_s));
    }
    finish(kind, fmt::format("{}: {}", what, ec.message()));
  }

  void finish(FailureKind kind, std::string error) {
    if (finished_) return;
    finished_ = true;
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
    result_.failure = kind;
    result_.error = std::move(error);
    if (kind != FailureKind::None) result_.e2e_s = seconds_between(started_, Clock::now());
    done_(index_, std::move(result_));
  }

  beast::tcp_stream stream_;
  const Shared& shared_;
  const BenchPrompt& prompt_;
  size_t index_;
  Done done_;
  http::request<http::string_body> req_;
  beast::flat_buffer buffer_;
  http::response_parser<http::string_body> parser_;
  server::SseParser sse_;
  RequestResult result_;
  double last_content_s_ = 0;
  bool finished_ = false;
  Clock::time_point started_;
};

}  // namespace

void check_server_reachable(const HttpUrl& url, double timeout_s) {
  asio::io_context ioc(1);
  const auto endpoints = resolve(ioc, url);
  beast::tcp_stream stream(ioc);
  stream.expires_after(to_duration(timeout_s));
  beast::error_code result = asio::error::would_block;
  stream.async_connect(endpoints, [&result](beast::error_code ec, const tcp::endpoint&) { result = ec; });
  ioc.run();
  if (result == beast::error::timeout)
    fail("cannot connect to http://{}: no connection within {} s", host_header(url), timeout_s);
  if (result) fail("cannot connect to http://{}: {}", host_header(url), result.message());
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
}

ServeBenchRun run_requests(const std::vector<BenchPrompt>& prompts, const ClientOptions& options,
                           const LoadPlan& plan) {
  raise_fd_limit();
  asio::io_context ioc(1);
  const Shared shared{options, resolve(ioc, options.url), endpoint_target(options.url, options.request.chat),
                      host_header(options.url)};
  const size_t n = prompts.size();
  ServeBenchRun run;
  run.results.resize(n);
  size_t next = 0, in_flight = 0;
  std::deque<size_t> waiting;  // arrived, waiting for a slot under max_concurrency
  const Clock::time_point t0 = Clock::now();
  Clock::time_point last_end = t0;

  std::function<void()> on_free;
  const auto launch = [&](size_t i) {
    ++in_flight;
    std::make_shared<Request>(ioc, shared, prompts[i], i, [&](size_t index, RequestResult&& r) {
      run.results[index] = std::move(r);
      --in_flight;
      last_end = Clock::now();
      // Posted: the next request starts from the io_context, not from inside this one's completion handler.
      asio::post(ioc, [&] { on_free(); });
    })->start();
  };
  const auto drain_waiting = [&] {
    while (!waiting.empty() && (plan.max_concurrency <= 0 || in_flight < size_t(plan.max_concurrency))) {
      const size_t i = waiting.front();
      waiting.pop_front();
      launch(i);
    }
  };

  asio::steady_timer timer(ioc);
  std::function<void()> arrive;  // the next arrivals; lives until ioc.run() returns, as its timer handler needs
  if (plan.concurrency > 0) {
    on_free = [&] {
      while (next < n && in_flight < size_t(plan.concurrency)) launch(next++);
    };
    on_free();
  } else {
    if (plan.arrivals.size() != n) fail("internal: {} arrivals for {} prompts", plan.arrivals.size(), n);
    on_free = drain_waiting;
    arrive = [&] {
      const double elapsed = seconds_between(t0, Clock::now());
      while (next < n && plan.arrivals[next] <= elapsed) waiting.push_back(next++);
      drain_waiting();
      if (next < n) {
        timer.expires_at(t0 + to_duration(plan.arrivals[next]));
        timer.async_wait([&](beast::error_code ec) {
          if (!ec) arrive();
        });
      }
    };
    arrive();
  }
  ioc.run();
  run.duration_s = seconds_between(t0, last_end);
  return run;
}

}  // namespace tessera
