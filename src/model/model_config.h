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
  float rms_eps = 1e-5f;
  float rope_theta = 10000.0f;
  RopeLayout rope_layout = RopeLayout::Interleaved;
  bool tied_output = false;  // output head shares token_embd.weight

  int64_t q_dim() const { return n_head * head_dim; }
  int64_t kv_dim() const { return n_head_kv * head_dim; }
};

}  // namespace tessera
