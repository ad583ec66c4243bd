#include "formats/sampling_defaults.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/gguf.h"

namespace tessera {
namespace {

using json = nlohmann::json;

constexpr const char* kTempKey = "general.sampling.temp";
constexpr const char* kTopKKey = "general.sampling.top_k";
constexpr const char* kTopPKey = "general.sampling.top_p";
constexpr const char* kMinPKey = "general.sampling.min_p";
constexpr const char* kRepeatKey = "general.sampling.penalty_repeat";

// The ranges the OpenAI endpoints accept for the same fields (server/openai_json.cpp), so that a default
// never makes every request invalid.
struct Range {
  double lo, hi;
};
constexpr Range kTempRange{0.0, 2.0}, kProbRange{0.0, 1.0}, kTopPRange{1e-6, 1.0}, kRepeatRange{0.01, 10.0};
constexpr Range kTopKRange{0.0, double(1 << 20)};

double checked(double v, Range r, const std::string& source, const char* name) {
  if (!(v >= r.lo && v <= r.hi)) fail("{}: {} is {}, outside [{}, {}]", source, name, v, r.lo, r.hi);
  return v;
}

std::optional<double> json_number(const json& config, const char* name, Range r, const std::string& source) {
  if (!config.contains(name) || config[name].is_null()) return std::nullopt;
  const json& v = config[name];
  if (!v.is_number()) fail("{}: {} holds {}, not a number", source, name, v.dump());
  return checked(v.get<double>(), r, source, name);
}

std::optional<double> gguf_number(const gguf::File& file, const char* key, Range r) {
  const gguf::Value* v = file.find(key);
  if (!v) return std::nullopt;
  if (!v->is_integer() && !v->is_float()) fail("{}: {} is not a number", file.name(), key);
  return checked(v->as_float(), r, file.name(), key);
}

}  // namespace

std::string SamplingDefaults::describe() const {
  std::string out;
  const auto add = [&](const char* name, const auto& v) {
    if (v) out += fmt::format("{}{} {}", out.empty() ? "" : ", ", name, *v);
  };
  add("temperature", temperature);
  add("top_k", top_k);
  add("top_p", top_p);
  add("min_p", min_p);
  add("repetition_penalty", repetition_penalty);
  return out.empty() ? "none" : out;
}

SamplingDefaults sampling_defaults_from_generation_config(const json& config, const std::string& source) {
  SamplingDefaults d;
  if (!config.is_object()) return d;
  if (auto v = json_number(config, "temperature", kTempRange, source)) d.temperature = float(*v);
  if (auto v = json_number(config, "top_k", kTopKRange, source)) d.top_k = int32_t(*v);
  if (auto v = json_number(config, "top_p", kTopPRange, source)) d.top_p = float(*v);
  if (auto v = json_number(config, "min_p", kProbRange, source)) d.min_p = float(*v);
  if (auto v = json_number(config, "repetition_penalty", kRepeatRange, source)) d.repetition_penalty = float(*v);
  // do_sample: false declares greedy decoding, whatever the temperature says (transformers ignores the
  // sampling fields then). Absent, the fields are taken as they are, as vLLM does: many folders set a
  // temperature without it.
  if (config.contains("do_sample") && !config["do_sample"].is_null()) {
    const json& s = config["do_sample"];
    if (!s.is_boolean()) fail("{}: do_sample holds {}, not true or false", source, s.dump());
    if (!s.get<bool>()) {
      d = SamplingDefaults{};
      d.temperature = 0.0f;
    }
  }
  return d;
}

gguf::Metadata sampling_metadata(const SamplingDefaults& d) {
  using gguf::Value;
  gguf::Metadata m;
  if (d.temperature) m.emplace_back(kTempKey, Value::make_f32(*d.temperature));
  if (d.top_k) m.emplace_back(kTopKKey, Value::make_i32(*d.top_k));
  if (d.top_p) m.emplace_back(kTopPKey, Value::make_f32(*d.top_p));
  if (d.min_p) m.emplace_back(kMinPKey, Value::make_f32(*d.min_p));
  if (d.repetition_penalty) m.emplace_back(kRepeatKey, Value::make_f32(*d.repetition_penalty));
  return m;
}

SamplingDefaults sampling_defaults_of(const gguf::File& file) {
  SamplingDefaults d;
  if (auto v = gguf_number(file, kTempKey, kTempRange)) d.temperature = float(*v);
  if (auto v = gguf_number(file, kTopKKey, kTopKRange)) d.top_k = int32_t(*v);
  if (auto v = gguf_number(file, kTopPKey, kTopPRange)) d.top_p = float(*v);
  if (auto v = gguf_number(file, kMinPKey, kProbRange)) d.min_p = float(*v);
  if (auto v = gguf_number(file, kRepeatKey, kRepeatRange)) d.repetition_penalty = float(*v);
  return d;
}

}  // namespace tessera
