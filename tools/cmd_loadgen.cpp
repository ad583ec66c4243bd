// `tessera loadgen`: opens many concurrent streaming requests against a running server (one thread, Asio) and
// checks that each one ends cleanly: `data: [DONE]` after its chunks, or an HTTP error with a JSON body. Lost
// (connection failed), hung (no end before --timeout) and truncated (closed before [DONE]) responses fail it.
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "commands.h"
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

struct LoadgenOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;
  int connections = 1000;
  int max_tokens = 16;
  std::string prompt = "Once upon a time";
  std::string endpoint = "completions";
  std::string api_key;
  double timeout_s = 120.0;
  double temperature = 0.8;
};

enum class Outcome { Pending, Done, HttpError, Lost, Hung, Truncated };

struct Totals {
  int done = 0, http_error = 0, lost = 0, hung = 0, truncated = 0;
  int64_t chunks = 0;
  std::vector<double> ttft, total;  // seconds, for completed streams
};

class Stream : public std::enable_shared_from_this<Stream> {
 public:
  Stream(asio::io_context& ioc, const LoadgenOptions& o, const tcp::endpoint& ep, Totals& totals, int index)
      : stream_(ioc), o_(o), ep_(ep), totals_(totals), index_(index) {}

  void start() {
    started_ = Clock::now();
    stream_.expires_after(std::chrono::milliseconds(int64_t(o_.timeout_s * 1000)));
    stream_.async_connect(ep_, [self = shared_from_this()](beast::error_code ec) { self->on_connect(ec); });
  }

 private:
  void on_connect(beast::error_code ec) {
    if (ec) return finish(ec == beast::error::timeout ? Outcome::Hung : Outcome::Lost);
    nlohmann::json body = {{"max_tokens", o_.max_tokens}, {"stream", true}, {"temperature", o_.temperature},
                           {"seed", index_}, {"stream_options", {{"include_usage", true}}}};
    if (o_.endpoint == "chat")
      body["messages"] = {{{"role", "user"}, {"content", o_.prompt}}};
    else
      body["prompt"] = o_.prompt;
    req_.method(http::verb::post);
    req_.target(o_.endpoint == "chat" ? "/v1/chat/completions" : "/v1/completions");
    req_.set(http::field::host, o_.host);
    req_.set(http::field::content_type, "application/json");
    if (!o_.api_key.empty()) req_.set(http::field::authorization, "Bearer " + o_.api_key);
    req_.body() = body.dump();
    req_.prepare_payload();
    http::async_write(stream_, req_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->finish(ec == beast::error::timeout ? Outcome::Hung : Outcome::Lost);
      self->parser_.body_limit(64 << 20);
      self->read();
    });
  }

  void read() {
    http::async_read_some(stream_, buffer_, parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
      self->on_read(ec);
    });
  }

  void on_read(beast::error_code ec) {
    if (parser_.is_header_done() && parser_.get().result_int() != 200) {
      if (!ec && !parser_.is_done()) return read();
      // A clean error: a complete body that is an OpenAI error object.
      const bool clean = parser_.is_done() && nlohmann::json::accept(parser_.get().body()) &&
                         nlohmann::json::parse(parser_.get().body()).contains("error");
      return finish(clean ? Outcome::HttpError : Outcome::Truncated);
    }
    // Consume complete SSE events from the body received so far.
    std::string& body = parser_.get().body();
    if (!body.empty()) {
      sse_.feed(body);
      body.clear();
      std::string data;
      while (sse_.next(data)) {
        if (data == "[DONE]") {
          saw_done_ = true;
        } else {
          if (totals_chunks_ == 0) first_ = Clock::now();
          ++totals_chunks_;
        }
      }
    }
    if (ec == beast::error::timeout) return finish(Outcome::Hung);
    if (parser_.is_done()) return finish(saw_done_ ? Outcome::Done : Outcome::Truncated);
    if (ec) return finish(Outcome::Truncated);
    read();
  }

  void finish(Outcome outcome) {
    if (outcome_ != Outcome::Pending) return;
    outcome_ = outcome;
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
    totals_.chunks += totals_chunks_;
    switch (outcome) {
      case Outcome::Done:
        ++totals_.done;
        totals_.total.push_back(std::chrono::duration<double>(Clock::now() - started_).count());
        if (totals_chunks_ > 0) totals_.ttft.push_back(std::chrono::duration<double>(first_ - started_).count());
        break;
      case Outcome::HttpError: ++totals_.http_error; break;
      case Outcome::Lost: ++totals_.lost; break;
      case Outcome::Hung: ++totals_.hung; break;
      case Outcome::Truncated: ++totals_.truncated; break;
      case Outcome::Pending: break;
    }
  }

  beast::tcp_stream stream_;
  const LoadgenOptions& o_;
  tcp::endpoint ep_;
  Totals& totals_;
  int index_;
  http::request<http::string_body> req_;
  beast::flat_buffer buffer_;
  http::response_parser<http::string_body> parser_;
  server::SseParser sse_;
  bool saw_done_ = false;
  int64_t totals_chunks_ = 0;
  Outcome outcome_ = Outcome::Pending;
  Clock::time_point started_, first_;
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(p * double(v.size())))];
}

int loadgen(const LoadgenOptions& o) {
  raise_fd_limit();
  asio::io_context ioc(1);
  beast::error_code ec;
  const tcp::endpoint ep(asio::ip::make_address(o.host, ec), o.port);
  if (ec) fail("invalid --host '{}'", o.host);
  Totals totals;
  const auto t0 = Clock::now();
  for (int i = 0; i < o.connections; ++i) std::make_shared<Stream>(ioc, o, ep, totals, i)->start();
  ioc.run();
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  const nlohmann::json report = {{"connections", o.connections}, {"done", totals.done},
                                 {"http_error", totals.http_error}, {"lost", totals.lost},
                                 {"hung", totals.hung},           {"truncated", totals.truncated},
                                 {"chunks", totals.chunks},       {"seconds", seconds},
                                 {"ttft_p50", percentile(totals.ttft, 0.5)}, {"ttft_p99", percentile(totals.ttft, 0.99)},
                                 {"total_p50", percentile(totals.total, 0.5)},
                                 {"total_p99", percentile(totals.total, 0.99)}};
  std::printf("%s\n", report.dump().c_str());
  return totals.lost + totals.hung + totals.truncated == 0 ? 0 : 1;
}

}  // namespace

void add_loadgen_command(CLI::App& app, CommandAction& action) {
  auto* cmd = app.add_subcommand("loadgen", "Open many concurrent streaming requests against a server");
  auto o = std::make_shared<LoadgenOptions>();
  cmd->add_option("--host", o->host, "server address")->capture_default_str();
  cmd->add_option("--port", o->port, "server port")->capture_default_str();
  cmd->add_option("-c,--connections", o->connections, "concurrent streams")->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd->add_option("-n,--max-tokens", o->max_tokens, "max_tokens per request")->capture_default_str();
  cmd->add_option("-p,--prompt", o->prompt, "prompt")->capture_default_str();
  cmd->add_option("--endpoint", o->endpoint, "completions or chat")->capture_default_str()
      ->check(CLI::IsMember({"completions", "chat"}));
  cmd->add_option("--api-key", o->api_key, "API key");
  cmd->add_option("--timeout", o->timeout_s, "seconds before a stream counts as hung")->capture_default_str();
  cmd->add_option("--temperature", o->temperature, "sampling temperature")->capture_default_str();
  cmd->callback([&action, o] { action = [o] { return loadgen(*o); }; });
}

}  // namespace tessera
