// The sampling settings a model's authors recommend: Hugging Face generation_config.json (temperature, top_k,
// top_p, min_p, repetition_penalty, do_sample) and the GGUF keys llama.cpp's converter writes for them
// (general.sampling.temp / top_k / top_p / min_p / penalty_repeat). A converted folder carries them into its
// GGUF file; `serve` and `run` start every request from them, as vLLM does with its default
// `--generation-config auto`, and a request's own fields win.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tessera {

// Declared, not included: the engine's SamplingParams holds these defaults and must not pull in the GGUF reader.
namespace gguf {
class File;
struct Value;
}  // namespace gguf

struct SamplingDefaults {
  std::optional<float> temperature;  // 0 when generation_config says do_sample: false (greedy)
  std::optional<int32_t> top_k;
  std::optional<float> top_p;
  std::optional<float> min_p;
  std::optional<float> repetition_penalty;

  bool empty() const { return !temperature && !top_k && !top_p && !min_p && !repetition_penalty; }
  // "temperature 0.6, top_k 20, top_p 0.95" (for notes and logs); "none" when empty.
  std::string describe() const;
};

// From a parsed generation_config.json. Values outside the ranges requests may use are an error naming
// `source` and the field; absent and null fields stay unset.
SamplingDefaults sampling_defaults_from_generation_config(const nlohmann::json& config, const std::string& source);

// general.sampling.* key/values for a GGUF file (only the fields that are set) and back from a file's metadata
// (integer or float values alike; out-of-range values are an error naming the key).
// (The result is a gguf::Metadata, spelled out.)
std::vector<std::pair<std::string, gguf::Value>> sampling_metadata(const SamplingDefaults& defaults);
SamplingDefaults sampling_defaults_of(const gguf::File& file);

}  // namespace tessera
