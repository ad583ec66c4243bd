// The serving benchmark's workload and statistics (`tessera bench serve`): the server URL, prompts, arrival
// schedule, per-request measurements and the report. No networking here (serve_bench_client.h sends the
// requests), so all of it is testable without a server.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace tessera {

// A plain-http base URL: "http://host[:port][/prefix]". The port defaults to 80; IPv6 hosts are bracketed
// ("http://[::1]:8000"). https, user info, queries and fragments are refused with tessera::Error.
struct HttpUrl {
  std::string host;    // without brackets
  uint16_t port = 80;
  std::string prefix;  // path before /v1/..., no trailing '/' ("" or "/api")
};
HttpUrl parse_http_url(std::string_view url);
// The request target of an OpenAI endpoint under `url`: prefix + "/v1/completions" or "/v1/chat/completions".
// A prefix that already ends in "/v1" is not doubled.
std::string endpoint_target(const HttpUrl& url, bool chat);

// Percentile `p` in [0, 1] of `sorted` (ascending) by linear interpolation between closest ranks (numpy's
// default): rank h = (n - 1) p, value x[floor h] + (h - floor h) (x[floor h + 1] - x[floor h]). 0 when empty.
double percentile_sorted(const std::vector<double>& sorted, double p);

struct Summary {
  size_t n = 0;  // samples; the rest is 0 when there are none
  double mean = 0, median = 0, p90 = 0, p99 = 0, min = 0, max = 0;
};
Summary summarize(std::vector<double> values);

// Arrival offsets in seconds from the benchmark start: a Poisson process of `rate` requests/s (exponential gaps
// drawn from a 64-bit Mersenne Twister seeded with `seed`, by inversion, so a seed gives the same schedule on
// every platform). The first request arrives at 0. `rate` infinite: all at 0.
std::vector<double> poisson_arrivals(int n, double rate, uint64_t seed);

// Prompt lengths uniform over the integers in [floor(len (1 - r)), floor(len (1 + r))], at least 1;
// 0 <= r < 1. Deterministic for a seed.
std::vector<int64_t> sample_lengths(int n, int64_t len, double range_ratio, uint64_t seed);

// A prompt: token ids (random prompts on /v1/completions) or text (chat, a dataset).
struct BenchPrompt {
  std::vector<int32_t> tokens;
  std::string text;
  bool is_tokens() const { return text.empty(); }
};

struct PromptOptions {
  int64_t input_len = 128;
  double range_ratio = 0.0;
  int32_t token_min = 100, token_max = 30000;  // ids uniform in [token_min, token_max)
  bool as_text = false;                        // random words instead of ids (chat needs text)
  uint64_t seed = 0;
};
// `n` random prompts; lengths from sample_lengths(), one word per unit of length when `as_text`.
std::vector<BenchPrompt> random_prompts(int n, const PromptOptions& o);

// One prompt per line of a UTF-8 text file; empty lines (and a trailing '\r') are dropped. Fails with
// tessera::Error when the file cannot be read, holds invalid UTF-8 or no prompt at all.
std::vector<BenchPrompt> load_dataset(const std::string& path);

// The request body: /v1/completions takes the prompt (ids or text), /v1/chat/completions one user message;
// always streamed with usage in the last chunk. `model` is left out when empty, `ignore_eos` when false (so a
// strict server is not sent a field it rejects).
struct RequestOptions {
  bool chat = false;
  std::string model;
  int64_t max_tokens = 128;
  bool ignore_eos = true;
  double temperature = 0.0;
};
nlohmann::json request_body(const BenchPrompt& prompt, const RequestOptions& o);

// What one SSE event's JSON (not "[DONE]") carries: content (choices[0].text, or delta.content or
// delta.reasoning_content for chat), usage, or an error object.
struct StreamChunk {
  bool valid = true;         // JSON object
  std::string error;         // the error object's message; non-empty: the server reported an error mid-stream
  bool has_content = false;  // non-empty text
  int64_t prompt_tokens = -1, completion_tokens = -1;  // from usage; -1: absent
};
StreamChunk parse_stream_chunk(std::string_view data, bool chat);
// The message of an error response body: error.message, FastAPI's detail, or the text itself (shortened).
std::string error_body_message(std::string_view body);

enum class FailureKind { None, Connect, Http, Truncated, Timeout, StreamError };
inline constexpr FailureKind kFailureKinds[] = {FailureKind::Connect, FailureKind::Http, FailureKind::Truncated,
                                                FailureKind::Timeout, FailureKind::StreamError};
// "connect", "http", "truncated", "timeout", "stream_error".
const char* failure_kind_name(FailureKind kind);

// What one request measured (steady clock, seconds from its start). Only completed requests enter the report's
// latency statistics.
struct RequestResult {
  FailureKind failure = FailureKind::None;
  std::string error;              // why it failed, for the message on stderr
  bool has_first_token = false;   // a chunk with non-empty text arrived
  double ttft_s = 0, e2e_s = 0;
  std::vector<double> itl_s;      // gaps between successive content chunks
  int64_t content_chunks = 0;
  int64_t prompt_tokens = -1;     // from usage; -1: the server sent none
  int64_t usage_output_tokens = -1;
  bool ok() const { return failure == FailureKind::None; }
  // usage.completion_tokens when the server sent it, else the content chunks.
  int64_t output_tokens() const { return usage_output_tokens >= 0 ? usage_output_tokens : content_chunks; }
  // (E2E - TTFT) / (output tokens - 1); empty for one token or none.
  std::optional<double> tpot_s() const;
};

// Service-level objectives in milliseconds; a request counts toward goodput when it meets every one given
// (a request of one output token has no TPOT and meets a TPOT objective).
struct Slo {
  std::optional<double> ttft_ms, tpot_ms, e2e_ms;
  bool any() const { return ttft_ms || tpot_ms || e2e_ms; }
};
bool meets_slo(const RequestResult& r, const Slo& slo);

struct ServeBenchReport {
  int n_requests = 0, completed = 0, failed = 0;
  std::vector<std::pair<FailureKind, int>> failures;  // every kind, in kFailureKinds order
  double duration_s = 0;
  int64_t total_input_tokens = 0, total_output_tokens = 0;
  double request_throughput = 0, output_throughput = 0, total_token_throughput = 0;  // per second
  double mean_input_tokens = 0, mean_output_tokens = 0;
  Summary ttft_ms, tpot_ms, itl_ms, e2e_ms;
  Slo slo;
  int good = 0;                     // completed requests meeting every SLO
  double goodput = 0;               // good / duration_s
  std::string first_error;          // of the first failed request
};
// `duration_s`: from the first request's start to the last one's end.
ServeBenchReport make_report(const std::vector<RequestResult>& results, double duration_s, const Slo& slo);

// What the report says about the run besides its numbers.
struct ReportContext {
  std::string label, base_url, endpoint, model, load;  // load: "concurrency 16", "request rate 50/s, ..."
};
nlohmann::ordered_json report_json(const ServeBenchReport& r, const ReportContext& c);
std::string report_text(const ServeBenchReport& r, const ReportContext& c);

}  // namespace tessera
