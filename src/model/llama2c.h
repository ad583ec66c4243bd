// Import of llama2.c checkpoints (Karpathy's run.c format) into GGUF.
#pragma once

#include <string>

namespace tessera {

// Converts `checkpoint` (version-0 llama2.c .bin: 7 int32 header, fp32 weights) with its llama2.c tokenizer
// file into a GGUF file at `output` (fp32 tensors, tokenizer embedded). Throws tessera::Error on bad input.
void convert_llama2c_to_gguf(const std::string& checkpoint, const std::string& tokenizer, const std::string& output,
                             const std::string& model_name);

}  // namespace tessera
