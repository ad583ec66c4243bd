// The checks that keep a too-large model or KV cache from thrashing: every decode step streams all layer
// weights, so an mmapped model larger than the memory it can stay resident in is read back from disk for every
// token (minutes per token on a machine that would run it fine with a smaller quantization); a KV cache is
// allocated and touched up front, so one sized for a model's full training context (40,960 positions of
// Qwen3-32B: 10 GiB) can push the weights out. Failing before the first step with the sizes is the useful
// answer; an explicit option lets a user who knows better load it anyway.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "core/error.h"

namespace tessera {

class Model;

// What a memory check refused, so that a front end can add its own way out (a flag, a config key) to the
// message, which states the sizes only: the library does not know how its caller spells options.
class MemoryFitError : public Error {
 public:
  enum class Part { Weights, KvCache };
  MemoryFitError(Part part, std::string kv_source, const std::string& message)
      : Error(message), part(part), kv_source(std::move(kv_source)) {}
  Part part;
  std::string kv_source;  // KvCache: what sized the cache, as the caller named it
  bool with_draft = false;  // KvCache: a draft model's weights and cache were part of what did not fit
};

// Throws MemoryFitError when the weights the forward pass reads exceed `available_bytes` (0: unknown, no
// check). The message names the model and both sizes.
void require_weights_fit_in_memory(const Model& model, uint64_t available_bytes);

// What the KV cache may take beside the weights (the reserve) is engine/kv_sizing.h's kv_cache_budget_bytes.

// A draft model for speculative decoding, which shares the memory with the model it drafts for: its weights
// and its own KV cache (`kv_bytes`, apart from the model's).
struct DraftMemory {
  const Model* model = nullptr;  // none: no draft
  uint64_t kv_bytes = 0;
};

// Throws MemoryFitError when the weights and a KV cache of `kv_bytes` together (with the draft's weights and
// cache, when given) exceed `available_bytes` (0: no check). `kv_source` says what sized the cache in the
// caller's terms ("-c 40960", "--kv-blocks 4096"), for the message and the error's kv_source. The message
// names every size.
void require_kv_cache_fits_in_memory(const Model& model, uint64_t kv_bytes, uint64_t available_bytes,
                                     const std::string& kv_source, const DraftMemory& draft = {});

}  // namespace tessera
