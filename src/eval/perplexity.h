// Quality of a model on a text: perplexity over non-overlapping windows, and, against a reference model, the KL
// divergence of the next-token distributions, top-1 agreement and the perplexity ratio.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/thread_pool.h"
#include "core/kv_type.h"
#include "model/model.h"

namespace tessera {

struct PerplexityOptions {
  int64_t ctx = 128;         // tokens per window, BOS included
  int64_t max_windows = 0;   // 0: the whole text
  KvType kv_type = KvType::F32;      // KV cache storage of the model under test
  KvType ref_kv_type = KvType::F32;  // and of the reference (the same model with another KV type measures KV quantization)
  std::function<void(int64_t done, int64_t total)> progress;
};

struct PerplexityResult {
  int64_t n_windows = 0;
  int64_t n_scored = 0;      // predictions scored (window length − 1 per window)
  double nll = 0.0;          // mean negative log-likelihood (nats)
  double perplexity = 0.0;   // exp(nll)
  bool has_reference = false;
  double ref_perplexity = 0.0;
  double ppl_ratio = 0.0;    // perplexity / ref_perplexity
  double kl_mean = 0.0;      // KL(ref ‖ model) per position, nats
  double kl_p99 = 0.0;
  double top1_agreement = 0.0;  // fraction of positions where both argmaxes agree
};

// Each window is BOS followed by the next ctx − 1 tokens of the text (the last window may be shorter). The text
// is tokenized with `model`'s tokenizer; `reference` (may be null) must share its vocabulary. Throws
// tessera::Error for a text with fewer than 2 tokens, a ctx below 2 or past the model's context, or mismatched
// vocabularies.
PerplexityResult evaluate_perplexity(std::shared_ptr<const Model> model, std::shared_ptr<const Model> reference,
                                     const std::string& text, const PerplexityOptions& options, ThreadPool& pool);

}  // namespace tessera
