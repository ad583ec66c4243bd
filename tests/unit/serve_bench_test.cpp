// The serving benchmark (`tessera bench serve`): statistics, goodput, arrival schedule, prompts, URL parsing,
// stream parsing, and the client's failure kinds against a scripted fake server on loopback.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <numeric>
#include <set>
#include <thread>

#include "bench/serve_bench.h"
#include "bench/serve_bench_client.h"
#include "cli_runner.h"
#include "core/error.h"

namespace tessera {
namespace {

using tessera::testing::CommandResult;
using tessera::testing::run_tessera;

std::string thrown_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(nothing thrown)";
}

TEST(ServeBenchStats, PercentilesInterpolateBetweenClosestRanks) {
  const std::vector<double> v = {1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(percentile_sorted(v, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(percentile_sorted(v, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(percentile_sorted(v, 0.9), 3.7);  // rank 2.7: 3 + 0.7 (4 - 3)
  EXPECT_DOUBLE_EQ(percentile_sorted(v, 1.0), 4.0);
  EXPECT_DOUBLE_EQ(percentile_sorted({7}, 0.99), 7.0);
  EXPECT_DOUBLE_EQ(percentile_sorted({}, 0.5), 0.0);

  std::vector<double> hundred(101);
  std::iota(hundred.begin(), hundred.end(), 0.0);  // 0..100: percentile p is 100 p
  std::reverse(hundred.begin(), hundred.end());     // summarize sorts
  const Summary s = summarize(hundred);
  EXPECT_EQ(s.n, 101u);
  EXPECT_DOUBLE_EQ(s.mean, 50.0);
  EXPECT_DOUBLE_EQ(s.median, 50.0);
  EXPECT_NEAR(s.p90, 90.0, 1e-9);
  EXPECT_NEAR(s.p99, 99.0, 1e-9);
  EXPECT_DOUBLE_EQ(s.min, 0.0);
  EXPECT_DOUBLE_EQ(s.max, 100.0);
  EXPECT_EQ(summarize({}).n, 0u);
}

RequestResult completed(double ttft_ms, double e2e_ms, int64_t tokens, int64_t prompt = 10) {
  RequestResult r;
  r.has_first_token = true;
  r.ttft_s = ttft_ms / 1e3;
  r.e2e_s = e2e_ms / 1e3;
  r.usage_output_tokens = tokens;
  r.prompt_tokens = prompt;
  r.content_chunks = tokens;
  for (int64_t i = 1; i < tokens; ++i) r.itl_s.push_back((e2e_ms - ttft_ms) / 1e3 / double(tokens - 1));
  return r;
}

TEST(ServeBenchStats, TpotExcludesTheFirstToken) {
  const RequestResult r = completed(100, 1000, 10);
  ASSERT_TRUE(r.tpot_s().has_value());
  EXPECT_NEAR(*r.tpot_s(), 0.1, 1e-12);  // (1000 - 100) ms / 9
  EXPECT_FALSE(completed(100, 100, 1).tpot_s().has_value());
  RequestResult chunks_only = completed(10, 40, 4);
  chunks_only.usage_output_tokens = -1;  // no usage: the content chunks count
  EXPECT_EQ(chunks_only.output_tokens(), 4);
  EXPECT_NEAR(*chunks_only.tpot_s(), 0.01, 1e-12);
}

TEST(ServeBenchStats, GoodputCountsCompletedRequestsMeetingEverySlo) {
  std::vector<RequestResult> results = {
      completed(50, 500, 10),    // TPOT 50 ms
      completed(150, 600, 10),   // TTFT too slow
      completed(50, 2000, 10),   // TPOT 216 ms, E2E 2 s
      completed(20, 20, 1),      // no TPOT: meets a TPOT objective
  };
  RequestResult failed;
  failed.failure = FailureKind::Http;
  failed.error = "HTTP 503: busy";
  results.push_back(failed);

  Slo slo;
  slo.ttft_ms = 100;
  slo.tpot_ms = 100;
  EXPECT_TRUE(meets_slo(results[0], slo));
  EXPECT_FALSE(meets_slo(results[1], slo));
  EXPECT_FALSE(meets_slo(results[2], slo));
  EXPECT_TRUE(meets_slo(results[3], slo));
  EXPECT_FALSE(meets_slo(results[4], slo));

  const ServeBenchReport r = make_report(results, 2.0, slo);
  EXPECT_EQ(r.completed, 4);
  EXPECT_EQ(r.failed, 1);
  EXPECT_EQ(r.good, 2);
  EXPECT_DOUBLE_EQ(r.goodput, 1.0);
  EXPECT_DOUBLE_EQ(r.request_throughput, 2.0);
  EXPECT_EQ(r.total_output_tokens, 31);
  EXPECT_DOUBLE_EQ(r.output_throughput, 15.5);
  EXPECT_DOUBLE_EQ(r.total_token_throughput, (31.0 + 40.0) / 2.0);
  EXPECT_DOUBLE_EQ(r.mean_input_tokens, 10.0);
  EXPECT_EQ(r.first_error, "HTTP 503: busy");
  for (const auto& [kind, count] : r.failures) EXPECT_EQ(count, kind == FailureKind::Http ? 1 : 0);
  EXPECT_EQ(r.ttft_ms.n, 4u);
  EXPECT_EQ(r.tpot_ms.n, 3u);
  EXPECT_EQ(r.itl_ms.n, 27u);

  Slo e2e_only;
  e2e_only.e2e_ms = 550;
  EXPECT_EQ(make_report(results, 2.0, e2e_only).good, 2);  // 500 ms and 20 ms
  const nlohmann::ordered_json j = report_json(make_report(results, 2.0, e2e_only), {});
  EXPECT_EQ(j["good_requests"], 2);
  EXPECT_EQ(j["slo"]["e2e_ms"], 550.0);
  EXPECT_FALSE(report_json(make_report(results, 2.0, {}), {}).contains("goodput"));  // no SLO, no goodput
}

TEST(ServeBenchSchedule, PoissonGapsAverageOneOverTheRateAndRepeatForASeed) {
  const int n = 20001;
  const double rate = 8.0;
  const std::vector<double> t = poisson_arrivals(n, rate, 42);
  ASSERT_EQ(t.size(), size_t(n));
  EXPECT_EQ(t[0], 0.0);
  for (size_t i = 1; i < t.size(); ++i) ASSERT_GE(t[i], t[i - 1]);
  const double mean_gap = t.back() / double(n - 1);
  EXPECT_NEAR(mean_gap, 1.0 / rate, 0.02 / rate);  // the mean's standard error is 0.7% here
  // Exponential gaps: their standard deviation equals their mean.
  double sq = 0;
  for (size_t i = 1; i < t.size(); ++i) sq += std::pow(t[i] - t[i - 1] - mean_gap, 2);
  EXPECT_NEAR(std::sqrt(sq / double(n - 2)), 1.0 / rate, 0.05 / rate);

  EXPECT_EQ(poisson_arrivals(100, rate, 42), std::vector<double>(t.begin(), t.begin() + 100));
  EXPECT_NE(poisson_arrivals(100, rate, 43), std::vector<double>(t.begin(), t.begin() + 100));
  EXPECT_EQ(poisson_arrivals(5, std::numeric_limits<double>::infinity(), 1), std::vector<double>(5, 0.0));
  EXPECT_THROW(poisson_arrivals(5, 0.0, 1), Error);
  EXPECT_THROW(poisson_arrivals(5, -1.0, 1), Error);
}

TEST(ServeBenchPrompts, LengthsStayInTheRangeRatioAndCoverIt) {
  EXPECT_EQ(sample_lengths(50, 128, 0.0, 1), std::vector<int64_t>(50, 128));
  const std::vector<int64_t> v = sample_lengths(20000, 100, 0.5, 7);
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  EXPECT_EQ(*lo, 50);
  EXPECT_EQ(*hi, 150);
  EXPECT_NEAR(std::accumulate(v.begin(), v.end(), 0.0) / double(v.size()), 100.0, 1.0);
  EXPECT_EQ(sample_lengths(100, 100, 0.5, 7), std::vector<int64_t>(v.begin(), v.begin() + 100));
  EXPECT_EQ(sample_lengths(10, 1, 0.9, 3), std::vector<int64_t>(10, 1));  // never below one
  EXPECT_THROW(sample_lengths(1, 10, 1.0, 0), Error);
  EXPECT_THROW(sample_lengths(1, 10, -0.1, 0), Error);
  EXPECT_THROW(sample_lengths(1, 0, 0.0, 0), Error);
}

TEST(ServeBenchPrompts, RandomPromptsAreTokenIdsInRangeOrWords) {
  PromptOptions o;
  o.input_len = 64;
  o.range_ratio = 0.25;
  o.token_min = 100;
  o.token_max = 110;
  const std::vector<BenchPrompt> p = random_prompts(200, o);
  const std::vector<int64_t> lengths = sample_lengths(200, 64, 0.25, 0);
  std::set<int32_t> seen;
  for (size_t i = 0; i < p.size(); ++i) {
    ASSERT_TRUE(p[i].is_tokens());
    ASSERT_EQ(int64_t(p[i].tokens.size()), lengths[i]);
    for (int32_t t : p[i].tokens) {
      ASSERT_GE(t, 100);
      ASSERT_LT(t, 110);
      seen.insert(t);
    }
  }
  EXPECT_EQ(seen.size(), 10u);
  o.as_text = true;
  o.range_ratio = 0;
  o.input_len = 12;
  const std::vector<BenchPrompt> words = random_prompts(3, o);
  ASSERT_FALSE(words[0].is_tokens());
  EXPECT_EQ(std::count(words[0].text.begin(), words[0].text.end(), ' '), 11);
  EXPECT_NE(words[0].text, words[1].text);
  o.token_max = 100;
  EXPECT_THROW(random_prompts(1, o), Error);
}

std::string write_temp(const std::string& name, const std::string& bytes) {
  const auto path = std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()));
  std::ofstream(path, std::ios::binary) << bytes;
  return path.string();
}

TEST(ServeBenchPrompts, DatasetLinesAndErrors) {
  const std::string good = write_temp("serve_bench_ds", "Once upon a time\n\n\r\nLe caf\xc3\xa9 \xe2\x82\xac\r\nlast");
  const std::vector<BenchPrompt> p = load_dataset(good);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0].text, "Once upon a time");
  EXPECT_EQ(p[1].text, "Le caf\xc3\xa9 \xe2\x82\xac");
  EXPECT_EQ(p[2].text, "last");
  std::filesystem::remove(good);

  EXPECT_NE(thrown_message([] { load_dataset("/nonexistent/prompts.txt"); }).find("cannot open dataset"),
            std::string::npos);
  const std::string blank = write_temp("serve_bench_blank", "\n\r\n\n");
  EXPECT_NE(thrown_message([&] { load_dataset(blank); }).find("no prompts"), std::string::npos);
  std::filesystem::remove(blank);
  for (const char* bad : {"fine\nbad \xff byte\n", "fine\ncut \xe2\x82\n", "fine\noverlong \xc0\xaf\n",
                          "fine\nsurrogate \xed\xa0\x80\n"}) {
    const std::string path = write_temp("serve_bench_bad", bad);
    EXPECT_NE(thrown_message([&] { load_dataset(path); }).find("line 2 is not valid UTF-8"), std::string::npos)
        << bad;
    std::filesystem::remove(path);
  }
}

TEST(ServeBenchUrl, ParsesHostPortAndPrefix) {
  HttpUrl u = parse_http_url("http://127.0.0.1:8080");
  EXPECT_EQ(u.host, "127.0.0.1");
  EXPECT_EQ(u.port, 8080);
  EXPECT_EQ(u.prefix, "");
  EXPECT_EQ(endpoint_target(u, false), "/v1/completions");
  EXPECT_EQ(endpoint_target(u, true), "/v1/chat/completions");

  u = parse_http_url("http://localhost");  // no port: HTTP's 80
  EXPECT_EQ(u.host, "localhost");
  EXPECT_EQ(u.port, 80);
  EXPECT_EQ(parse_http_url("http://localhost/").port, 80);

  u = parse_http_url("http://example:8000/v1/");
  EXPECT_EQ(u.prefix, "/v1");
  EXPECT_EQ(endpoint_target(u, false), "/v1/completions");  // not /v1/v1
  EXPECT_EQ(endpoint_target(parse_http_url("http://h:1/api"), true), "/api/v1/chat/completions");

  u = parse_http_url("http://[::1]:9000");
  EXPECT_EQ(u.host, "::1");
  EXPECT_EQ(u.port, 9000);
  EXPECT_EQ(parse_http_url("http://[::1]").port, 80);
}

TEST(ServeBenchUrl, RejectsHttpsAndGarbage) {
  EXPECT_NE(thrown_message([] { parse_http_url("https://127.0.0.1:8443"); }).find("https is not supported"),
            std::string::npos);
  EXPECT_NE(thrown_message([] { parse_http_url("127.0.0.1:8080"); }).find("must start with http://"),
            std::string::npos);
  for (const char* bad : {"", "http://", "http://:8080", "http://host:", "http://host:abc", "http://host:80x",
                          "http://host:0", "http://host:65536", "http://host:-1", "ftp://host:21",
                          "HTTP//host:1", "http://user@host:1", "http://host:1/?q=1", "http://host:1#f",
                          "http://[::1", "http://[::1]x", "http://[::1]:", "http://ho st:1"}) {
    EXPECT_THROW(parse_http_url(bad), Error) << bad;
  }
}

TEST(ServeBenchStream, RequestBodyAndChunks) {
  RequestOptions o;
  o.max_tokens = 8;
  BenchPrompt ids{{5, 6, 7}, ""};
  nlohmann::json b = request_body(ids, o);
  EXPECT_EQ(b["prompt"], nlohmann::json({5, 6, 7}));
  EXPECT_EQ(b["max_tokens"], 8);
  EXPECT_EQ(b["stream"], true);
  EXPECT_EQ(b["stream_options"]["include_usage"], true);
  EXPECT_EQ(b["ignore_eos"], true);
  EXPECT_FALSE(b.contains("model"));
  o.ignore_eos = false;
  o.model = "m";
  o.chat = true;
  b = request_body(BenchPrompt{{}, "hello"}, o);
  EXPECT_FALSE(b.contains("ignore_eos"));
  EXPECT_EQ(b["model"], "m");
  EXPECT_EQ(b["messages"][0]["content"], "hello");
  EXPECT_THROW(request_body(ids, o), Error);  // chat needs text

  EXPECT_TRUE(parse_stream_chunk(R"({"choices":[{"text":"a"}]})", false).has_content);
  EXPECT_FALSE(parse_stream_chunk(R"({"choices":[{"text":""}]})", false).has_content);
  EXPECT_FALSE(parse_stream_chunk(R"({"choices":[{"delta":{"content":"a"}}]})", false).has_content);
  EXPECT_TRUE(parse_stream_chunk(R"({"choices":[{"delta":{"content":"a"}}]})", true).has_content);
  EXPECT_TRUE(parse_stream_chunk(R"({"choices":[{"delta":{"reasoning_content":"hm"}}]})", true).has_content);
  EXPECT_FALSE(parse_stream_chunk(R"({"choices":[{"delta":{"role":"assistant"}}]})", true).has_content);
  const StreamChunk usage =
      parse_stream_chunk(R"({"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":9}})", false);
  EXPECT_EQ(usage.prompt_tokens, 3);
  EXPECT_EQ(usage.completion_tokens, 9);
  EXPECT_EQ(parse_stream_chunk(R"({"choices":[{"text":"a"}],"usage":null})", false).completion_tokens, -1);
  EXPECT_EQ(parse_stream_chunk(R"({"error":{"message":"boom"}})", false).error, "boom");
  EXPECT_FALSE(parse_stream_chunk("not json", false).valid);
  EXPECT_EQ(error_body_message(R"({"error":{"message":"too long"}})"), "too long");
  EXPECT_EQ(error_body_message(R"({"detail":"Not Found"})"), "Not Found");
  EXPECT_EQ(error_body_message("plain\ntext"), "plain text");
}

// A loopback server that answers every connection with `response`, then closes it, or with `hang`, keeps it
// open until the client closes it (bounded at 10 s).
class FakeServer {
 public:
  FakeServer(std::string response, bool hang) : response_(std::move(response)), hang_(hang) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(fd_, 16), 0);
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeServer() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);  // wakes accept()
    thread_.join();
    ::close(fd_);
  }
  uint16_t port() const { return port_; }
  int connections() const { return connections_; }

 private:
  void serve() {
    while (!stop_) {
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      ++connections_;
      read_request(c);
      (void)!::write(c, response_.data(), response_.size());
      if (hang_) {
        pollfd p{c, POLLIN, 0};
        char buf[256];
        while (!stop_ && ::poll(&p, 1, 10000) > 0 && ::read(c, buf, sizeof buf) > 0) {
        }
      }
      ::close(c);
    }
  }
  // Up to the end of the body that Content-Length announces (the client always sends one).
  static void read_request(int c) {
    std::string req;
    char buf[4096];
    pollfd p{c, POLLIN, 0};
    while (::poll(&p, 1, 5000) > 0) {
      const ssize_t n = ::read(c, buf, sizeof buf);
      if (n <= 0) return;
      req.append(buf, size_t(n));
      const size_t end = req.find("\r\n\r\n");
      if (end == std::string::npos) continue;
      const size_t cl = req.find("Content-Length: ");
      const size_t body = cl == std::string::npos ? 0 : std::stoul(req.substr(cl + 16));
      if (req.size() >= end + 4 + body) return;
    }
  }

  std::string response_;
  bool hang_;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::thread thread_;
};

constexpr const char* kSseHeader = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";

RequestResult one_request(uint16_t port, double timeout_s = 5.0) {
  ClientOptions o;
  o.url = parse_http_url("http://127.0.0.1:" + std::to_string(port));
  o.timeout_s = timeout_s;
  const ServeBenchRun run = run_requests({BenchPrompt{{1, 2, 3}, ""}}, o, LoadPlan{1, {}, 0});
  EXPECT_EQ(run.results.size(), 1u);
  return run.results.at(0);
}

TEST(ServeBenchClient, CompleteStreamWithoutUsageCountsContentChunks) {
  FakeServer s(std::string(kSseHeader) +
                   "data: {\"choices\":[{\"text\":\"a\"}]}\n\n"
                   "data: {\"choices\":[{\"text\":\"\"}]}\n\n"
                   "data: {\"choices\":[{\"text\":\"b\"}]}\r\n\r\n"
                   ": a comment\n\n"
                   "data: {\"choices\":[{\"text\":\"c\"}]}\n\n"
                   "data: [DONE]\n\n",
               false);
  const RequestResult r = one_request(s.port());
  EXPECT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.output_tokens(), 3);
  EXPECT_EQ(r.itl_s.size(), 2u);
  EXPECT_EQ(r.prompt_tokens, -1);
  EXPECT_TRUE(r.has_first_token);
  EXPECT_LE(r.ttft_s, r.e2e_s);
}

TEST(ServeBenchClient, FailureKinds) {
  {
    FakeServer s(std::string(kSseHeader) + "data: {\"choices\":[{\"text\":\"a\"}]}\n\n", false);
    const RequestResult r = one_request(s.port());
    EXPECT_EQ(r.failure, FailureKind::Truncated) << r.error;
  }
  {
    const std::string body = R"({"error":{"message":"server busy"}})";
    FakeServer s("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: " +
                     std::to_string(body.size()) + "\r\n\r\n" + body,
                 false);
    const RequestResult r = one_request(s.port());
    EXPECT_EQ(r.failure, FailureKind::Http);
    EXPECT_EQ(r.error, "HTTP 503: server busy");
  }
  {
    FakeServer s(std::string(kSseHeader) + "data: {\"error\":{\"message\":\"engine died\"}}\n\n", false);
    const RequestResult r = one_request(s.port());
    EXPECT_EQ(r.failure, FailureKind::StreamError);
    EXPECT_NE(r.error.find("engine died"), std::string::npos) << r.error;
  }
  {
    // llama-server (build of Feb 2025) when its KV cache fills mid-stream: an `error:` line, then [DONE] as
    // usual. Counted as complete, such requests once lifted its output rate in a comparison run.
    FakeServer s(std::string(kSseHeader) + "data: {\"choices\":[{\"text\":\"a\"}]}\n\n" +
                     "error: {\"code\":500,\"message\":\"Input prompt is too big compared to KV size.\","
                     "\"type\":\"server_error\"}\n\ndata: [DONE]\n\n",
                 false);
    const RequestResult r = one_request(s.port());
    EXPECT_EQ(r.failure, FailureKind::StreamError);
    EXPECT_EQ(r.error, "error event: Input prompt is too big compared to KV size.");
  }
  {
    FakeServer s(std::string(kSseHeader) + "data: {\"choices\":[{\"text\":\"a\"}]}\n\n", /*hang=*/true);
    const auto t0 = std::chrono::steady_clock::now();
    const RequestResult r = one_request(s.port(), 0.3);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(r.failure, FailureKind::Timeout) << r.error;
    EXPECT_LT(seconds, 3.0);
  }
  {
    uint16_t port = 0;
    {
      FakeServer s("", false);  // a port that was free a moment ago, closed now
      port = s.port();
    }
    const RequestResult r = one_request(port);
    EXPECT_EQ(r.failure, FailureKind::Connect) << r.error;
    EXPECT_THROW(check_server_reachable(parse_http_url("http://127.0.0.1:" + std::to_string(port)), 2.0), Error);
  }
}

TEST(ServeBenchClient, ConcurrencyAndArrivalsSendEveryRequest) {
  FakeServer s(std::string(kSseHeader) + "data: {\"choices\":[{\"text\":\"a\"}],\"usage\":{\"prompt_tokens\":3,"
                                         "\"completion_tokens\":1}}\n\ndata: [DONE]\n\n",
               false);
  ClientOptions o;
  o.url = parse_http_url("http://127.0.0.1:" + std::to_string(s.port()));
  o.timeout_s = 5;
  const std::vector<BenchPrompt> prompts(6, BenchPrompt{{1}, ""});
  const ServeBenchRun closed = run_requests(prompts, o, LoadPlan{3, {}, 0});
  for (const RequestResult& r : closed.results) EXPECT_TRUE(r.ok()) << r.error;
  LoadPlan open;
  open.arrivals = {0, 0, 0.01, 0.02, 0.05, 0.1};
  open.max_concurrency = 2;
  const ServeBenchRun arrivals = run_requests(prompts, o, open);
  for (const RequestResult& r : arrivals.results) EXPECT_EQ(r.output_tokens(), 1) << r.error;
  EXPECT_GE(arrivals.duration_s, 0.1);  // the last one arrived at 100 ms
  EXPECT_EQ(s.connections(), 12);
}

// The subcommand's parsing: `bench serve` runs the serve benchmark, plain `bench` still runs its own action.
TEST(ServeBenchCli, ParsesAsANestedSubcommandOfBench) {
  CommandResult r = run_tessera("bench serve --concurrency 1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--base-url is required"), std::string::npos) << r.err;
  testing::expect_clean_error(run_tessera("bench serve --base-url https://127.0.0.1:1 --concurrency 1"),
                              "https is not supported");
  testing::expect_clean_error(run_tessera("bench serve --base-url http://127.0.0.1:1"),
                              "give exactly one load mode");
  testing::expect_clean_error(run_tessera("bench serve --base-url http://127.0.0.1:1 --concurrency 1 --dataset "
                                          "/nonexistent/prompts.txt"),
                              "cannot open dataset");
  // bench's own action still runs (it fails at loading the model, before any measurement).
  r = run_tessera("bench --offline -m /nonexistent/model.gguf");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("/nonexistent/model.gguf"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("base-url"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tessera
