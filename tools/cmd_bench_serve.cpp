// `tessera bench serve`: load-tests a running OpenAI-compatible server (tessera serve, llama-server, vLLM) over
// HTTP and reports TTFT, TPOT, ITL, end-to-end latency, throughput and goodput, in the manner of
// `vllm bench serve`. The workload and statistics are in src/bench/serve_bench.h, the client in
// serve_bench_client.h.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <tuple>

#include "bench/serve_bench.h"
#include "bench/serve_bench_client.h"
#include "commands.h"
#include "core/error.h"

namespace tessera {
namespace {

struct ServeBenchCli {
  std::string base_url;
  std::string endpoint = "completions";
  std::string model;
  int num_prompts = 64;
  int concurrency = 0;
  std::string request_rate;  // "inf" or a positive number; empty: not given
  int max_concurrency = 0;
  std::string dataset;
  int64_t input_len = 128, output_len = 128;
  double range_ratio = 0.0;
  int32_t token_min = 100, token_max = 30000;
  bool ignore_eos = true;
  double temperature = 0.0;
  std::string api_key;
  double timeout_s = 600;
  double slo_ttft_ms = 0, slo_tpot_ms = 0, slo_e2e_ms = 0;
  bool has_slo_ttft = false, has_slo_tpot = false, has_slo_e2e = false;
  int warmup = 1;
  uint64_t seed = 0;
  bool json = false;
  std::string label;
};

double parse_rate(const std::string& text) {
  if (text == "inf" || text == "infinity") return std::numeric_limits<double>::infinity();
  size_t used = 0;
  double rate = 0;
  try {
    rate = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || !(rate > 0) || !std::isfinite(rate))
    fail("--request-rate must be a positive number of requests/s or inf, got '{}'", text);
  return rate;
}

// The prompts: `n` for the measurement, then `warmup` more (different ones, so that the warm-up does not fill
// a result or prefix cache with the measured prompts).
std::vector<BenchPrompt> make_prompts(const ServeBenchCli& o, bool chat, int n) {
  if (o.dataset.empty()) {
    PromptOptions p;
    p.input_len = o.input_len;
    p.range_ratio = o.range_ratio;
    p.token_min = o.token_min;
    p.token_max = o.token_max;
    p.as_text = chat;
    p.seed = o.seed;
    return random_prompts(n, p);
  }
  const std::vector<BenchPrompt> lines = load_dataset(o.dataset);
  std::vector<BenchPrompt> prompts;
  for (int i = 0; i < n; ++i) prompts.push_back(lines[size_t(i) % lines.size()]);
  return prompts;
}

int bench_serve(const ServeBenchCli& o) {
  const HttpUrl url = parse_http_url(o.base_url);
  if ((o.concurrency > 0) == !o.request_rate.empty())
    fail("give exactly one load mode: --concurrency N or --request-rate R");
  if (o.max_concurrency > 0 && o.request_rate.empty()) fail("--max-concurrency needs --request-rate");
  const double rate = o.request_rate.empty() ? 0.0 : parse_rate(o.request_rate);
  if (!(o.timeout_s > 0)) fail("--timeout must be positive");
  for (auto [given, value, name] : {std::tuple{o.has_slo_ttft, o.slo_ttft_ms, "--slo-ttft-ms"},
                                    {o.has_slo_tpot, o.slo_tpot_ms, "--slo-tpot-ms"},
                                    {o.has_slo_e2e, o.slo_e2e_ms, "--slo-e2e-ms"}}) {
    if (given && !(value > 0)) fail("{} must be positive", name);
  }
  const bool chat = o.endpoint == "chat";

  ClientOptions client;
  client.url = url;
  client.request.chat = chat;
  client.request.model = o.model;
  client.request.max_tokens = o.output_len;
  client.request.ignore_eos = o.ignore_eos;
  client.request.temperature = o.temperature;
  client.api_key = o.api_key;
  client.timeout_s = o.timeout_s;

  std::vector<BenchPrompt> prompts = make_prompts(o, chat, o.num_prompts + o.warmup);
  const std::vector<BenchPrompt> warmup(prompts.begin() + o.num_prompts, prompts.end());
  prompts.resize(size_t(o.num_prompts));

  // An unreachable server is one clear error, found in at most 10 s, before any request.
  check_server_reachable(url, std::min(o.timeout_s, 10.0));
  if (!warmup.empty()) {
    const ServeBenchRun w = run_requests(warmup, client, LoadPlan{1, {}, 0});
    for (const RequestResult& r : w.results) {
      if (r.ok()) continue;
      const bool random_ids = o.dataset.empty() && !chat && r.failure == FailureKind::Http;
      fail("warm-up request to {} failed ({}): {}{}", o.base_url, failure_kind_name(r.failure), r.error,
           random_ids ? fmt::format(" (random token ids are drawn from [{}, {}): --token-max at most the model's "
                                    "vocabulary size)", o.token_min, o.token_max)
                      : "");
    }
  }

  LoadPlan plan;
  std::string load;
  if (o.concurrency > 0) {
    plan.concurrency = o.concurrency;
    load = fmt::format("concurrency {}", o.concurrency);
  } else {
    plan.arrivals = poisson_arrivals(o.num_prompts, rate, o.seed);
    plan.max_concurrency = o.max_concurrency;
    load = std::isinf(rate) ? "request rate inf (all at once)"
                            : fmt::format("request rate {}/s (Poisson, seed {})", rate, o.seed);
    if (o.max_concurrency > 0) load += fmt::format(", max concurrency {}", o.max_concurrency);
  }
  const ServeBenchRun run = run_requests(prompts, client, plan);

  Slo slo;
  if (o.has_slo_ttft) slo.ttft_ms = o.slo_ttft_ms;
  if (o.has_slo_tpot) slo.tpot_ms = o.slo_tpot_ms;
  if (o.has_slo_e2e) slo.e2e_ms = o.slo_e2e_ms;
  const ServeBenchReport report = make_report(run.results, run.duration_s, slo);
  const ReportContext context{o.label, o.base_url, endpoint_target(url, chat), o.model, load};
  if (o.json) {
    nlohmann::ordered_json j = report_json(report, context);
    j["settings"] = {{"input_len", o.dataset.empty() ? nlohmann::json(o.input_len) : nlohmann::json(nullptr)},
                     {"range_ratio", o.range_ratio},
                     {"dataset", o.dataset},
                     {"output_len", o.output_len},
                     {"ignore_eos", o.ignore_eos},
                     {"temperature", o.temperature},
                     {"warmup", o.warmup},
                     {"seed", o.seed}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::fputs(report_text(report, context).c_str(), stdout);
  }
  std::fflush(stdout);
  if (report.failed > 0) {
    std::string kinds;
    for (const auto& [kind, count] : report.failures)
      if (count > 0) kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", failure_kind_name(kind), count);
    std::fprintf(stderr, "error: %d of %d requests failed (%s); the first: %s\n", report.failed, report.n_requests,
                 kinds.c_str(), report.first_error.c_str());
    return 1;
  }
  return 0;
}

}  // namespace

void add_bench_serve_subcommand(CLI::App* bench, CommandAction& action) {
  auto* cmd = bench->add_subcommand("serve", "Load-test a running OpenAI-compatible server over HTTP "
                                             "(TTFT, TPOT, ITL, latency, throughput, goodput)");
  auto o = std::make_shared<ServeBenchCli>();
  cmd->add_option("--base-url", o->base_url, "server, http://host:port (plain http only)")->required();
  cmd->add_option("--endpoint", o->endpoint, "completions (/v1/completions) or chat (/v1/chat/completions)")
      ->capture_default_str()->check(CLI::IsMember({"completions", "chat"}));
  cmd->add_option("--model", o->model, "the request's model field (left out when empty)");
  cmd->add_option("-n,--num-prompts", o->num_prompts, "requests measured")->capture_default_str()
      ->check(CLI::Range(1, 10000000));
  auto* conc = cmd->add_option("--concurrency", o->concurrency, "keep N requests in flight")
                   ->check(CLI::Range(1, 100000));
  auto* rate = cmd->add_option("--request-rate", o->request_rate,
                               "Poisson arrivals at R requests/s (seeded by --seed); inf: all at once");
  conc->excludes(rate);
  cmd->add_option("--max-concurrency", o->max_concurrency, "with --request-rate: at most N in flight")
      ->check(CLI::Range(1, 100000))->needs(rate);
  cmd->add_option("--dataset", o->dataset, "prompts, one per line (UTF-8; empty lines skipped) instead of random");
  cmd->add_option("--input-len", o->input_len, "random prompt length: token ids (completions) or words (chat)")
      ->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  cmd->add_option("--range-ratio", o->range_ratio, "prompt lengths uniform in [L(1-r), L(1+r)]")
      ->capture_default_str()->check(CLI::Range(0.0, 0.999999));
  cmd->add_option("--token-min", o->token_min, "random token ids from this one...")->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--token-max", o->token_max, "...to this one, excluded (at most the model's vocabulary size)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--output-len", o->output_len, "max_tokens of each request")->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  cmd->add_flag("--ignore-eos,!--no-ignore-eos", o->ignore_eos,
                "send ignore_eos so outputs run to --output-len (on by default)");
  cmd->add_option("--temperature", o->temperature, "sampling temperature")->capture_default_str();
  cmd->add_option("--api-key", o->api_key, "sent as Authorization: Bearer KEY");
  cmd->add_option("--timeout", o->timeout_s, "seconds per request before it fails")->capture_default_str();
  cmd->add_option("--slo-ttft-ms", o->slo_ttft_ms, "goodput: time to first token at most this");
  cmd->add_option("--slo-tpot-ms", o->slo_tpot_ms, "goodput: time per output token at most this");
  cmd->add_option("--slo-e2e-ms", o->slo_e2e_ms, "goodput: end-to-end latency at most this");
  cmd->add_option("--warmup", o->warmup, "requests sent one at a time first, not measured")->capture_default_str()
      ->check(CLI::Range(0, 1000));
  cmd->add_option("--seed", o->seed, "seed of the prompts and the arrival times")->capture_default_str();
  cmd->add_flag("--json", o->json, "print one JSON object instead of the report");
  cmd->add_option("--label", o->label, "a name printed in the report");
  cmd->callback([&action, o, cmd, bench] {
    o->has_slo_ttft = cmd->count("--slo-ttft-ms") > 0;
    o->has_slo_tpot = cmd->count("--slo-tpot-ms") > 0;
    o->has_slo_e2e = cmd->count("--slo-e2e-ms") > 0;
    action = [o] { return bench_serve(*o); };
    // CLI11 runs a parent's callback after its subcommand's: drop `bench`'s own, which would replace the action.
    bench->final_callback(nullptr);
  });
}

}  // namespace tessera
