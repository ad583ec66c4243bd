// The check that keeps a too-large model from thrashing: every decode step streams all layer weights, so an
// mmapped model larger than the memory it can stay resident in is read back from disk for every token (minutes
// per token on a machine that would run it fine with a smaller quantization). Failing before the first step
// with the sizes is the useful answer; an explicit option lets a user who knows better load it anyway.
#pragma once

#include <cstdint>

namespace tessera {

class Model;

// Throws tessera::Error when the weights the forward pass reads exceed `available_bytes` (0: unknown, no
// check). The message names the model, both sizes and the way out (a smaller type, or the override option).
void require_weights_fit_in_memory(const Model& model, uint64_t available_bytes);

}  // namespace tessera
