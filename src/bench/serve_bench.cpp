// The serving benchmark's URL parsing, workload generation and statistics.
#include "bench/serve_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <iterator>
#include <numeric>
#include <random>

#include "core/error.h"

namespace tessera {
namespace {

// Uniform in [0, 1) from the top 53 bits: the same on every platform, unlike std::*_distribution.
double uniform01(std::mt19937_64& rng) { return double(rng() >> 11) * 0x1.0p-53; }

// Uniform integer in [lo, hi] (inclusive); the modulo bias is below 2^-40 for the ranges used here.
int64_t uniform_int(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  return lo + int64_t(rng() % uint64_t(hi - lo + 1));
}

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = uint8_t(s[i]);
    int n = 0;
    uint32_t cp = 0;
    if (c < 0x80) { ++i; continue; }
    if ((c & 0xE0) == 0xC0) { n = 1; cp = c & 0x1F; }
    else if ((c & 0xF0) == 0xE0) { n = 2; cp = c & 0x0F; }
    else if ((c & 0xF8) == 0xF0) { n = 3; cp = c & 0x07; }
    else return false;
    if (i + size_t(n) >= s.size()) return false;  // cut short
    for (int k = 1; k <= n; ++k) {
      const auto d = uint8_t(s[i + size_t(k)]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8.
    if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += size_t(n) + 1;
  }
  return true;
}

// Common short English words: a random-text prompt of L words is roughly L to 2L tokens for most tokenizers.
constexpr const char* kWords[] = {
    "the",   "of",    "and",   "to",    "in",    "is",    "was",   "for",   "on",    "with",  "as",    "at",
    "by",    "from",  "time",  "day",   "year",  "way",   "man",   "thing", "woman", "life",  "child", "world",
    "school", "state", "family", "story", "tree",  "house", "water", "light", "sun",   "cat",   "dog",   "bird",
    "happy", "little", "big",   "old",   "new",   "good",  "small", "long",  "great", "high",  "red",   "blue",
    "green", "play",  "run",   "look",  "find",  "give",  "tell",  "work",  "call",  "try",   "ask",   "need",
    "feel",  "leave"};

}  // namespace

HttpUrl parse_http_url(std::string_view url) {
  const std::string shown(url);
  if (url.rfind("https://", 0) == 0) fail("base URL '{}': https is not supported (plain http only)", shown);
  if (url.rfind("http://", 0) != 0) fail("base URL '{}' must start with http:// (http://host:port)", shown);
  std::string_view rest = url.substr(7);
  if (rest.find_first_of("?#") != std::string_view::npos) fail("base URL '{}': no query or fragment", shown);
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
  if (authority.find('@') != std::string_view::npos) fail("base URL '{}': no user info", shown);
  HttpUrl out;
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) fail("base URL '{}': unclosed '[' in the host", shown);
    out.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') fail("base URL '{}': expected ':port' after the host", shown);
      port = after.substr(1);
      if (port.empty()) fail("base URL '{}': empty port", shown);
    }
  } else {
    const size_t colon = authority.find(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port = authority.substr(colon + 1);
      if (port.empty()) fail("base URL '{}': empty port", shown);
    }
  }
  if (out.host.empty()) fail("base URL '{}': no host", shown);
  if (out.host.find_first_of(" \t\r\n") != std::string::npos) fail("base URL '{}': bad host", shown);
  if (!port.empty()) {
    unsigned value = 0;
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || end != port.data() + port.size() || value == 0 || value > 65535)
      fail("base URL '{}': port must be a number in 1..65535", shown);
    out.port = uint16_t(value);
  }
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  if (path.find_first_of(" \t\r\n") != std::string_view::npos) fail("base URL '{}': bad path", shown);
  out.prefix = std::string(path);
  return out;
}

std::string endpoint_target(const HttpUrl& url, bool chat) {
  const bool has_v1 = url.prefix.size() >= 3 && url.prefix.compare(url.prefix.size() - 3, 3, "/v1") == 0;
  return url.prefix + (has_v1 ? "" : "/v1") + (chat ? "/chat/completions" : "/completions");
}

double percentile_sorted(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0.0;
  const double h = double(sorted.size() - 1) * std::clamp(p, 0.0, 1.0);
  const size_t lo = size_t(std::floor(h));
  if (lo + 1 >= sorted.size()) return sorted.back();
  return sorted[lo] + (h - double(lo)) * (sorted[lo + 1] - sorted[lo]);
}

Summary summarize(std::vector<double> values) {
  Summary s;
  s.n = values.size();
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  s.mean = std::accumulate(values.begin(), values.end(), 0.0) / double(values.size());
  s.median = percentile_sorted(values, 0.5);
  s.p90 = percentile_sorted(values, 0.9);
  s.p99 = percentile_sorted(values, 0.99);
  s.min = values.front();
  s.max = values.back();
  return s;
}

std::vector<double> poisson_arrivals(int n, double rate, uint64_t seed) {
  std::vector<double> t(size_t(std::max(n, 0)), 0.0);
  if (std::isinf(rate)) return t;
  if (!(rate > 0)) fail("request rate must be positive or inf, got {}", rate);
  std::mt19937_64 rng(seed);
  for (size_t i = 1; i < t.size(); ++i) t[i] = t[i - 1] - std::log1p(-uniform01(rng)) / rate;
  return t;
}

std::vector<int64_t> sample_lengths(int n, int64_t len, double range_ratio, uint64_t seed) {
  if (len < 1) fail("prompt length must be at least 1, got {}", len);
  if (!(range_ratio >= 0.0 && range_ratio < 1.0)) fail("the range ratio must be in [0, 1), got {}", range_ratio);
  const int64_t lo = std::max<int64_t>(1, int64_t(std::floor(double(len) * (1.0 - range_ratio))));
  const int64_t hi = std::max(lo, int64_t(std::floor(double(len) * (1.0 + range_ratio))));
  std::mt19937_64 rng(seed);
  std::vector<int64_t> out(size_t(std::max(n, 0)));
  for (int64_t& v : out) v = uniform_int(rng, lo, hi);
  return out;
}

std::vector<BenchPrompt> random_prompts(int n, const PromptOptions& o) {
  if (o.token_min < 0 || o.token_max <= o.token_min)
    fail("token ids need 0 <= minimum < maximum, got [{}, {})", o.token_min, o.token_max);
  const std::vector<int64_t> lengths = sample_lengths(n, o.input_len, o.range_ratio, o.seed);
  std::mt19937_64 rng(o.seed ^ 0x9E3779B97F4A7C15ULL);  // apart from the lengths' stream
  std::vector<BenchPrompt> prompts(lengths.size());
  for (size_t i = 0; i < lengths.size(); ++i) {
    BenchPrompt& p = prompts[i];
    for (int64_t k = 0; k < lengths[i]; ++k) {
      if (o.as_text) {
        if (k > 0) p.text += ' ';
        p.text += kWords[uniform_int(rng, 0, int64_t(std::size(kWords)) - 1)];
      } else {
        p.tokens.push_back(int32_t(uniform_int(rng, o.token_min, int64_t(o.token_max) - 1)));
      }
    }
  }
  return prompts;
}

std::vector<BenchPrompt> load_dataset(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open dataset '{}'", path);
  std::vector<BenchPrompt> prompts;
  std::string line;
  for (int64_t line_no = 1; std::getline(in, line); ++line_no) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (!valid_utf8(line)) fail("dataset '{}' line {} is not valid UTF-8", path, line_no);
    prompts.push_back(BenchPrompt{{}, line});
  }
  if (in.bad()) fail("cannot read dataset '{}'", path);
  if (prompts.empty()) fail("dataset '{}' has no prompts (one per line, empty lines skipped)", path);
  return prompts;
}

nlohmann::json request_body(const BenchPrompt& prompt, const RequestOptions& o) {
  nlohmann::json body = {{"max_tokens", o.max_tokens}, {"temperature", o.temperature}, {"stream", true},
                         {"stream_options", {{"include_usage", true}}}};
  if (!o.model.empty()) body["model"] = o.model;
  if (o.ignore_eos) body["ignore_eos"] = true;
  if (o.chat) {
    if (prompt.is_tokens()) fail("the chat endpoint needs text prompts, not token ids");
    body["messages"] = {{{"role", "user"}, {"content", prompt.text}}};
  } else if (prompt.is_tokens()) {
    body["prompt"] = prompt.tokens;
  } else {
    body["prompt"] = prompt.text;
  }
  return body;
}

StreamChunk parse_stream_chunk(std::string_view data, bool chat) {
  StreamChunk c;
  const nlohmann::json j = nlohmann::json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    c.valid = false;
    return c;
  }
  if (const auto e = j.find("error"); e != j.end() && !e->is_null()) {
    c.error = e->is_object() && e->contains("message") && (*e)["message"].is_string()
                  ? (*e)["message"].get<std::string>()
                  : e->dump();
    if (c.error.empty()) c.error = "error event";
    return c;
  }
  const auto nonempty_string = [](const nlohmann::json& obj, const char* key) {
    const auto it = obj.find(key);
    return it != obj.end() && it->is_string() && !it->get_ref<const std::string&>().empty();
  };
  if (const auto ch = j.find("choices"); ch != j.end() && ch->is_array() && !ch->empty() && (*ch)[0].is_object()) {
    const nlohmann::json& choice = (*ch)[0];
    if (chat) {
      const auto delta = choice.find("delta");
      c.has_content = delta != choice.end() && delta->is_object() &&
                      (nonempty_string(*delta, "content") || nonempty_string(*delta, "reasoning_content"));
    } else {
      c.has_content = nonempty_string(choice, "text");
    }
  }
  if (const auto u = j.find("usage"); u != j.end() && u->is_object()) {
    if (const auto p = u->find("prompt_tokens"); p != u->end() && p->is_number_integer()) c.prompt_tokens = *p;
    if (const auto n = u->find("completion_tokens"); n != u->end() && n->is_number_integer())
      c.completion_tokens = *n;
  }
  return c;
}

std::string error_body_message(std::string_view body) {
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object()) {
    if (const auto e = j.find("error"); e != j.end()) {
      if (e->is_object() && e->contains("message") && (*e)["message"].is_string()) return (*e)["message"];
      if (e->is_string()) return *e;
    }
    if (const auto d = j.find("detail"); d != j.end()) return d->is_string() ? d->get<std::string>() : d->dump();
    if (const auto m = j.find("message"); m != j.end() && m->is_string()) return *m;  // llama-server's stream errors
  }
  std::string text(body.substr(0, 200));
  std::replace_if(text.begin(), text.end(), [](char ch) { return ch == '\n' || ch == '\r'; }, ' ');
  return text;
}

const char* failure_kind_name(FailureKind kind) {
  switch (kind) {
    case FailureKind::None: return "none";
    case FailureKind::Connect: return "connect";
    case FailureKind::Http: return "http";
    case FailureKind::Truncated: return "truncated";
    case FailureKind::Timeout: return "timeout";
    case FailureKind::StreamError: return "stream_error";
  }
  return "unknown";
}

std::optional<double> RequestResult::tpot_s() const {
  const int64_t n = output_tokens();
  if (!has_first_token || n <= 1) return std::nullopt;
  return (e2e_s - ttft_s) / double(n - 1);
}

bool meets_slo(const RequestResult& r, const Slo& slo) {
  if (!r.ok()) return false;
  if (slo.ttft_ms && !(r.has_first_token && r.ttft_s * 1e3 <= *slo.ttft_ms)) return false;
  if (slo.tpot_ms) {
    const std::optional<double> tpot = r.tpot_s();
    if (tpot && *tpot * 1e3 > *slo.tpot_ms) return false;
  }
  if (slo.e2e_ms && r.e2e_s * 1e3 > *slo.e2e_ms) return false;
  return true;
}

ServeBenchReport make_report(const std::vector<RequestResult>& results, double duration_s, const Slo& slo) {
  ServeBenchReport r;
  r.n_requests = int(results.size());
  r.duration_s = duration_s;
  r.slo = slo;
  std::vector<double> ttft, tpot, itl, e2e;
  for (FailureKind kind : kFailureKinds) r.failures.emplace_back(kind, 0);
  for (const RequestResult& q : results) {
    if (!q.ok()) {
      ++r.failed;
      for (auto& [kind, count] : r.failures)
        if (kind == q.failure) ++count;
      if (r.first_error.empty()) r.first_error = q.error;
      continue;
    }
    ++r.completed;
    r.total_input_tokens += std::max<int64_t>(q.prompt_tokens, 0);
    r.total_output_tokens += q.output_tokens();
    if (q.has_first_token) ttft.push_back(q.ttft_s * 1e3);
    if (const std::optional<double> t = q.tpot_s()) tpot.push_back(*t * 1e3);
    for (double gap : q.itl_s) itl.push_back(gap * 1e3);
    e2e.push_back(q.e2e_s * 1e3);
    if (slo.any() && meets_slo(q, slo)) ++r.good;
  }
  if (duration_s > 0) {
    r.request_throughput = double(r.completed) / duration_s;
    r.output_throughput = double(r.total_output_tokens) / duration_s;
    r.total_token_throughput = double(r.total_input_tokens + r.total_output_tokens) / duration_s;
    r.goodput = double(r.good) / duration_s;
  }
  if (r.completed > 0) {
    r.mean_input_tokens = double(r.total_input_tokens) / r.completed;
    r.mean_output_tokens = double(r.total_output_tokens) / r.completed;
  }
  r.ttft_ms = summarize(std::move(ttft));
  r.tpot_ms = summarize(std::move(tpot));
  r.itl_ms = summarize(std::move(itl));
  r.e2e_ms = summarize(std::move(e2e));
  return r;
}

namespace {

nlohmann::ordered_json summary_json(const Summary& s) {
  nlohmann::ordered_json j;
  j["n"] = s.n;
  for (auto [name, value] : {std::pair{"mean", s.mean}, {"median", s.median}, {"p90", s.p90}, {"p99", s.p99},
                             {"min", s.min}, {"max", s.max}}) {
    j[name] = s.n > 0 ? nlohmann::ordered_json(value) : nlohmann::ordered_json(nullptr);
  }
  return j;
}

}  // namespace

nlohmann::ordered_json report_json(const ServeBenchReport& r, const ReportContext& c) {
  nlohmann::ordered_json j;
  if (!c.label.empty()) j["label"] = c.label;
  j["base_url"] = c.base_url;
  j["endpoint"] = c.endpoint;
  if (!c.model.empty()) j["model"] = c.model;
  j["load"] = c.load;
  j["num_prompts"] = r.n_requests;
  j["completed"] = r.completed;
  j["failed"] = r.failed;
  for (const auto& [kind, count] : r.failures) j["failures"][failure_kind_name(kind)] = count;
  j["duration_s"] = r.duration_s;
  j["request_throughput"] = r.request_throughput;
  j["output_throughput"] = r.output_throughput;
  j["total_token_throughput"] = r.total_token_throughput;
  j["total_input_tokens"] = r.total_input_tokens;
  j["total_output_tokens"] = r.total_output_tokens;
  j["mean_input_tokens"] = r.mean_input_tokens;
  j["mean_output_tokens"] = r.mean_output_tokens;
  j["ttft_ms"] = summary_json(r.ttft_ms);
  j["tpot_ms"] = summary_json(r.tpot_ms);
  j["itl_ms"] = summary_json(r.itl_ms);
  j["e2e_ms"] = summary_json(r.e2e_ms);
  if (r.slo.any()) {
    nlohmann::ordered_json slo = nlohmann::ordered_json::object();
    if (r.slo.ttft_ms) slo["ttft_ms"] = *r.slo.ttft_ms;
    if (r.slo.tpot_ms) slo["tpot_ms"] = *r.slo.tpot_ms;
    if (r.slo.e2e_ms) slo["e2e_ms"] = *r.slo.e2e_ms;
    j["slo"] = slo;
    j["good_requests"] = r.good;
    j["goodput"] = r.goodput;
  }
  if (!r.first_error.empty()) j["first_error"] = r.first_error;
  return j;
}

std::string report_text(const ServeBenchReport& r, const ReportContext& c) {
  std::string out;
  const auto line = [&out](std::string_view name, const std::string& value) {
    out += fmt::format("{:<40}{}\n", std::string(name) + ":", value);
  };
  const auto num = [](double v, int digits = 2) { return fmt::format("{:.{}f}", v, digits); };
  out += "============ Serving Benchmark Result ============\n";
  if (!c.label.empty()) line("Label", c.label);
  line("Server", c.base_url + " (" + c.endpoint + ")");
  if (!c.model.empty()) line("Model", c.model);
  line("Load", c.load);
  line("Successful requests", std::to_string(r.completed));
  std::string failed = std::to_string(r.failed);
  if (r.failed > 0) {
    std::string kinds;
    for (const auto& [kind, count] : r.failures)
      if (count > 0) kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", failure_kind_name(kind), count);
    failed += " (" + kinds + ")";
  }
  line("Failed requests", failed);
  line("Benchmark duration (s)", num(r.duration_s, 3));
  line("Total input tokens", std::to_string(r.total_input_tokens));
  line("Total generated tokens", std::to_string(r.total_output_tokens));
  line("Mean input / output tokens", num(r.mean_input_tokens, 1) + " / " + num(r.mean_output_tokens, 1));
  line("Request throughput (req/s)", num(r.request_throughput));
  if (r.slo.any()) {
    line("Request goodput (req/s)", num(r.goodput) + fmt::format(" ({} of {} met the SLOs)", r.good, r.completed));
  }
  line("Output token throughput (tok/s)", num(r.output_throughput));
  line("Total token throughput (tok/s)", num(r.total_token_throughput));
  const auto section = [&](const char* title, const char* key, const Summary& s) {
    out += fmt::format("{:-^50}\n", std::string(" ") + title + " ");
    if (s.n == 0) {
      line(fmt::format("{} (ms)", key), "no samples");
      return;
    }
    line(fmt::format("Mean {} (ms)", key), num(s.mean));
    line(fmt::format("Median {} (ms)", key), num(s.median));
    line(fmt::format("P90 {} (ms)", key), num(s.p90));
    line(fmt::format("P99 {} (ms)", key), num(s.p99));
  };
  section("Time to First Token", "TTFT", r.ttft_ms);
  section("Time per Output Token (excl. 1st token)", "TPOT", r.tpot_ms);
  section("Inter-token Latency", "ITL", r.itl_ms);
  section("End-to-end Latency", "E2E", r.e2e_ms);
  out += std::string(50, '=') + "\n";
  return out;
}

}  // namespace tessera
