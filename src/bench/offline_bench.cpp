// Drives the real engine with a synthetic workload (random prompt tokens, uniform output lengths, EOS ignored)
// submitted all at once, as an offline batch job would.
#include "bench/offline_bench.h"

#include <algorithm>
#include <atomic>
#include <future>
#include <mutex>
#include <random>

namespace tessera {
namespace {

Percentiles percentiles(std::vector<double> v) {
  Percentiles p;
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  p.mean = sum / double(v.size());
  auto at = [&](double q) { return v[std::min(v.size() - 1, size_t(q * double(v.size() - 1) + 0.5))]; };
  p.p50 = at(0.50);
  p.p99 = at(0.99);
  return p;
}

struct Workload {
  std::vector<Request> requests;
};

Workload make_workload(const Model& model, const OfflineBenchOptions& o, int n, int prompt_tokens, int min_out,
                       int max_out) {
  std::mt19937_64 rng(o.seed);
  const auto n_vocab = int32_t(model.config().n_vocab);
  // Ordinary tokens only: skip the first few ids, which are special in every vocabulary used here.
  std::uniform_int_distribution<int32_t> token(std::min<int32_t>(259, n_vocab - 1), n_vocab - 1);
  std::uniform_int_distribution<int> out_len(min_out, max_out);
  const int32_t bos = model.tokenizer_ptr() ? model.tokenizer().vocab().bos : -1;
  Workload w;
  for (int i = 0; i < n; ++i) {
    Request r;
    if (bos >= 0) r.prompt.push_back(bos);
    while (int(r.prompt.size()) < prompt_tokens) r.prompt.push_back(token(rng));
    r.sampling.temperature = 0.0f;
    r.sampling.ignore_eos = true;
    r.sampling.max_tokens = out_len(rng);
    w.requests.push_back(std::move(r));
  }
  return w;
}

struct Tracker {
  std::mutex mutex;
  std::vector<double> latency, ttft;
  int64_t output_tokens = 0;
  int remaining = 0;
  std::promise<void> all_done;
};

OfflineModeResult run_mode(const std::shared_ptr<const Model>& model, const OfflineBenchOptions& o,
                           SchedulingPolicy mode, bool speculative, const Workload& w) {
  EngineOptions eo = o.engine;
  eo.scheduling.policy = mode;
  if (!speculative) eo.speculative = {};
  Engine engine(model, eo);
  OfflineModeResult r;
  r.mode = std::string(scheduling_policy_name(mode)) + (speculative ? "+spec" : "");
  r.n_requests = int(w.requests.size());
  const uint64_t bytes_per_block = engine.stats().kv_bytes_per_token * uint64_t(eo.kv_block_size);
  std::mutex peak_mutex;
  engine.set_step_observer([&](const StepStats&) {
    const EngineStats s = engine.stats();
    std::lock_guard lock(peak_mutex);
    const uint64_t used = uint64_t(s.kv_blocks_used) * bytes_per_block;
    if (used > r.peak_kv_bytes) {
      r.peak_kv_bytes = used;
      r.peak_kv_held_bytes = uint64_t(s.kv_tokens_held) * s.kv_bytes_per_token;
    }
    r.peak_running = std::max(r.peak_running, s.n_running);
  });

  Tracker t;
  t.remaining = int(w.requests.size());
  std::vector<std::pair<Request, EventCallback>> batch;
  for (const Request& req : w.requests) {
    batch.emplace_back(req, [&t](const StreamEvent& ev) {
      if (ev.kind != StreamEvent::Kind::Finished) return;
      std::lock_guard lock(t.mutex);
      t.latency.push_back(ev.stats.e2e_seconds);
      t.ttft.push_back(ev.stats.time_to_first_token_seconds);
      t.output_tokens += ev.stats.n_generated_tokens;
      if (--t.remaining == 0) t.all_done.set_value();
    });
  }
  // One arrival for all: submitted one by one, the engine's first step could start with the first few, and a
  // static batch of those would run to completion alone (1,132 steps instead of 989 for the default workload).
  const auto start = Clock::now();
  engine.submit_all(std::move(batch));
  t.all_done.get_future().wait();
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  engine.wait_idle(std::chrono::seconds(10));
  r.output_tokens = t.output_tokens;
  r.requests_per_s = double(r.n_requests) / r.seconds;
  r.output_tokens_per_s = double(t.output_tokens) / r.seconds;
  r.latency_s = percentiles(t.latency);
  r.ttft_s = percentiles(t.ttft);
  const EngineStats stats = engine.stats();
  r.preemptions = stats.n_preemptions;
  r.steps = stats.n_steps;
  r.spec_acceptance = stats.spec_acceptance();
  r.spec_tokens_per_verification = stats.spec_tokens_per_verification();
  r.spec_drafts = stats.n_spec_drafts;
  r.spec_steps_off = stats.n_spec_steps_off;
  const int64_t n_ctx = eo.n_ctx > 0 ? eo.n_ctx : model->config().n_ctx_train;
  r.contiguous_kv_bytes = uint64_t(std::max<int64_t>(r.peak_running, 1)) * uint64_t(n_ctx) * engine.stats().kv_bytes_per_token;
  return r;
}

// Aggregate generation speed of `n` sequences decoding together, measured after all have produced their first
// token (so prefill is excluded): tokens generated between the first and last token event / elapsed time.
double decode_rate(const std::shared_ptr<const Model>& model, const OfflineBenchOptions& o, int n) {
  EngineOptions eo = o.engine;
  eo.scheduling.policy = SchedulingPolicy::Continuous;
  eo.scheduling.max_seqs = std::max<int64_t>(eo.scheduling.max_seqs, n);
  eo.speculative = {};  // the probe measures batching alone
  Engine engine(model, eo);
  const Workload w = make_workload(*model, o, n, 16, o.scaling_output_tokens, o.scaling_output_tokens);
  std::mutex mutex;
  int started = 0, finished = 0;
  int64_t tokens_after_start = 0;
  Clock::time_point all_started{}, last_token{};
  std::promise<void> done;
  std::vector<std::pair<Request, EventCallback>> batch;
  for (const Request& req : w.requests) {
    auto first = std::make_shared<bool>(true);
    batch.emplace_back(req, [&, first](const StreamEvent& ev) {
      std::lock_guard lock(mutex);
      if (ev.kind == StreamEvent::Kind::Token) {
        if (*first) {
          *first = false;
          if (++started == n) all_started = Clock::now();
        } else if (started == n) {
          ++tokens_after_start;
          last_token = Clock::now();
        }
      } else if (++finished == n) {
        done.set_value();
      }
    });
  }
  engine.submit_all(std::move(batch));
  done.get_future().wait();
  const double seconds = std::chrono::duration<double>(last_token - all_started).count();
  return seconds > 0 ? double(tokens_after_start) / seconds : 0.0;
}

}  // namespace

OfflineBenchRun run_offline_bench(const std::shared_ptr<const Model>& model, const OfflineBenchOptions& options) {
  const Workload w = make_workload(*model, options, options.n_requests, options.prompt_tokens,
                                   options.min_output_tokens, options.max_output_tokens);
  OfflineBenchRun run;
  for (const Request& r : w.requests) run.output_lengths.push_back(int(r.sampling.max_tokens));
  for (SchedulingPolicy mode : options.modes) run.modes.push_back(run_mode(model, options, mode, false, w));
  if (options.engine.speculative.enabled())
    run.modes.push_back(run_mode(model, options, SchedulingPolicy::Continuous, true, w));
  return run;
}

DecodeScalingResult run_decode_scaling(const std::shared_ptr<const Model>& model, const OfflineBenchOptions& options) {
  DecodeScalingResult r;
  r.n_sequences = options.scaling_sequences;
  r.single_tokens_per_s = decode_rate(model, options, 1);
  r.batched_tokens_per_s = decode_rate(model, options, options.scaling_sequences);
  return r;
}

}  // namespace tessera
