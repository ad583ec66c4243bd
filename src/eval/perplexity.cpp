// Perplexity and reference comparison from OfflineEngine::prompt_logits, one window at a time (log-softmax in
// double precision).
#include "eval/perplexity.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "engine/offline_engine.h"

namespace tessera {
namespace {

// log-softmax of one row of logits, in double.
void log_softmax(const float* logits, int64_t n, std::vector<double>& out) {
  out.resize(size_t(n));
  double mx = logits[0];
  for (int64_t i = 1; i < n; ++i) mx = std::max(mx, double(logits[i]));
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(double(logits[i]) - mx);
  const double lse = mx + std::log(sum);
  for (int64_t i = 0; i < n; ++i) out[size_t(i)] = double(logits[i]) - lse;
}

int64_t argmax(const float* v, int64_t n) { return std::max_element(v, v + n) - v; }

}  // namespace

PerplexityResult evaluate_perplexity(std::shared_ptr<const Model> model, std::shared_ptr<const Model> reference,
                                     const std::string& text, const PerplexityOptions& o, ThreadPool& pool) {
  const int64_t n_vocab = model->config().n_vocab;
  if (o.ctx < 2) fail("perplexity: the window must be at least 2 tokens, not {}", o.ctx);
  if (o.ctx > model->config().n_ctx_train) {
    fail("perplexity: a window of {} tokens exceeds the model's context of {}", o.ctx, model->config().n_ctx_train);
  }
  if (reference && reference->config().n_vocab != n_vocab) {
    fail("perplexity: the reference model has {} tokens in its vocabulary, the model {}",
         reference->config().n_vocab, n_vocab);
  }
  const std::vector<int32_t> tokens = model->tokenizer().encode(text, false);
  if (tokens.size() < 2) fail("perplexity: the text has {} tokens; at least 2 are needed", tokens.size());
  const int32_t bos = model->tokenizer().vocab().bos;

  const int64_t per_window = o.ctx - 1;
  int64_t n_windows = (int64_t(tokens.size()) + per_window - 1) / per_window;
  if (o.max_windows > 0) n_windows = std::min(n_windows, o.max_windows);

  OfflineEngine gen(model, pool, o.ctx, 512, o.kv_type);
  std::unique_ptr<OfflineEngine> ref_gen;
  if (reference) ref_gen = std::make_unique<OfflineEngine>(reference, pool, o.ctx, 512, o.ref_kv_type);

  PerplexityResult r;
  r.has_reference = reference != nullptr;
  double nll = 0.0, ref_nll = 0.0;
  int64_t agree = 0;
  std::vector<double> kls, lp, lq;
  for (int64_t w = 0; w < n_windows; ++w) {
    std::vector<int32_t> window{bos};
    const size_t begin = size_t(w * per_window), end = std::min(tokens.size(), begin + size_t(per_window));
    window.insert(window.end(), tokens.begin() + long(begin), tokens.begin() + long(end));
    if (window.size() < 2) break;
    const std::vector<float> logits = gen.prompt_logits(window);
    std::vector<float> ref_logits;
    if (ref_gen) ref_logits = ref_gen->prompt_logits(window);
    for (size_t i = 0; i + 1 < window.size(); ++i) {
      const float* row = &logits[i * size_t(n_vocab)];
      log_softmax(row, n_vocab, lq);
      nll -= lq[size_t(window[i + 1])];
      if (ref_gen) {
        const float* ref_row = &ref_logits[i * size_t(n_vocab)];
        log_softmax(ref_row, n_vocab, lp);
        ref_nll -= lp[size_t(window[i + 1])];
        double kl = 0.0;
        for (int64_t v = 0; v < n_vocab; ++v) kl += std::exp(lp[size_t(v)]) * (lp[size_t(v)] - lq[size_t(v)]);
        kls.push_back(std::max(0.0, kl));
        agree += argmax(row, n_vocab) == argmax(ref_row, n_vocab);
      }
      ++r.n_scored;
    }
    ++r.n_windows;
    if (o.progress) o.progress(w + 1, n_windows);
  }
  r.nll = nll / double(r.n_scored);
  r.perplexity = std::exp(r.nll);
  if (ref_gen) {
    r.ref_perplexity = std::exp(ref_nll / double(r.n_scored));
    r.ppl_ratio = r.perplexity / r.ref_perplexity;
    double sum = 0.0;
    for (double k : kls) sum += k;
    r.kl_mean = sum / double(kls.size());
    std::sort(kls.begin(), kls.end());
    r.kl_p99 = kls[std::min(kls.size() - 1, size_t(std::ceil(0.99 * double(kls.size()))) - 1)];
    r.top1_agreement = double(agree) / double(r.n_scored);
  }
  return r;
}

}  // namespace tessera
