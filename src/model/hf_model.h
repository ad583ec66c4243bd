// A Hugging Face model folder (config.json, *.safetensors, tokenizer files) seen as a GGUF file: the one mapping
// of Hugging Face names and config fields to GGUF tensor names and metadata keys, shared by serving a folder
// directly (Model::from_gguf binds the in-memory file unchanged) and by `tessera convert` (which writes it).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "formats/gguf.h"

namespace tessera {

struct HfFolder {
  // Tensors under their GGUF names, pointing into the safetensors mappings (no copy) except: q/k projections of
  // Llama/Mistral, whose rows are permuted into GGUF's adjacent-pair RoPE order as llama.cpp's converter does
  // (a copy of those two matrices per layer, so that a folder and its converted GGUF compute identically), a
  // tensor whose bytes are not aligned to its element size (copied), and rope_freqs.weight (computed from
  // config.json's llama3 rope_scaling). Metadata: the GGUF keys llama.cpp writes for the architecture, the
  // tokenizer.* keys (tokenizer.chat_template from tokenizer_config.json) and tessera.eog_token_ids.
  std::shared_ptr<gguf::File> file;
  std::vector<std::string> notes;  // what was found, one line each (tessera info)
};

// Throws tessera::Error naming the folder, file, tensor or field at fault: no config.json, an unsupported
// architecture or dtype, a missing shard or tensor, a tensor of the wrong shape, an unexpected tensor.
HfFolder open_hf_folder(const std::string& dir);

// A directory is read as a Hugging Face folder, anything else as a GGUF file.
std::shared_ptr<gguf::File> open_model_file(const std::string& path);

}  // namespace tessera
