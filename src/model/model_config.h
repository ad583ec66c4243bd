// Hyper-parameters of a decoder-only transformer of the Llama family, as read from GGUF metadata.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/ops.h"

namespace tessera {

struct ModelConfig {
  std::string architecture;  // GGUF general.architecture: "llama", "qwen2", "qwen3", ...
  int64_t n_vocab = 0;
  int64_t n_embd = 0;     // hidden size
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;  // grouped-query attention when < n_head
  int64_t head_dim = 0;   // may differ from n_embd / n_head (Qwen3)
  int64_t n_ff = 0;       // feed-forward hidden size
  int64_t n_ctx_train = 0;
  // <arch>.attention.sliding_window (Mistral 7B v0.1): attention only reaches this many tokens back. Tessera
  // attends over the whole context, which is the same computation as long as the context is no longer than
  // the window, so usable_context() refuses longer ones. 0: no window.
  int64_t sliding_window = 0;
  float rms_eps = 1e-5f;
  float rope_theta = 10000.0f;
  float rope_freq_scale = 1.0f;  // linear RoPE scaling: positions are multiplied by this (1 / factor)
  RopeLayout rope_layout = RopeLayout::Interleaved;
  bool tied_output = false;  // output head shares token_embd.weight

  int64_t q_dim() const { return n_head * head_dim; }
  int64_t kv_dim() const { return n_head_kv * head_dim; }
};

// The context a generator or engine runs with: `requested`, or n_ctx_train when 0. Throws tessera::Error when it
// is longer than the model's sliding window (see above), naming both.
int64_t usable_context(const ModelConfig& config, int64_t requested);

}  // namespace tessera
