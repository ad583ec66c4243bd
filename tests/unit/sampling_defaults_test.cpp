// The model's recommended sampling settings: generation_config.json → GGUF general.sampling.* → the base a
// request starts from.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "engine/sampling_params.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "formats/sampling_defaults.h"
#include "hf_test_folder.h"
#include "server/openai_json.h"

namespace tessera {
namespace {

using nlohmann::json;

SamplingDefaults from_config(const json& config) { return sampling_defaults_from_generation_config(config, "gc.json"); }

std::string config_error(const json& config) {
  try {
    from_config(config);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error for " << config.dump();
  return {};
}

TEST(SamplingDefaults, ReadsGenerationConfigFields) {
  // Qwen3's generation_config.json.
  const SamplingDefaults d = from_config(
      {{"bos_token_id", 151643}, {"do_sample", true}, {"eos_token_id", {151645, 151643}}, {"pad_token_id", 151643},
       {"temperature", 0.6}, {"top_k", 20}, {"top_p", 0.95}, {"transformers_version", "4.51.0"}});
  EXPECT_EQ(d.temperature, 0.6f);
  EXPECT_EQ(d.top_k, 20);
  EXPECT_EQ(d.top_p, 0.95f);
  EXPECT_FALSE(d.min_p || d.repetition_penalty);
  EXPECT_EQ(d.describe(), "temperature 0.6, top_k 20, top_p 0.95");

  const SamplingDefaults all = from_config({{"temperature", 1.0}, {"min_p", 0.05}, {"repetition_penalty", 1.1},
                                            {"top_k", nullptr}});
  EXPECT_EQ(all.min_p, 0.05f);
  EXPECT_EQ(all.repetition_penalty, 1.1f);
  EXPECT_FALSE(all.top_k);

  // Only stop ids (Mistral's): nothing to recommend.
  EXPECT_TRUE(from_config({{"bos_token_id", 1}, {"eos_token_id", 2}}).empty());
  EXPECT_EQ(from_config(json::object()).describe(), "none");
}

TEST(SamplingDefaults, DoSampleFalseMeansGreedy) {
  const SamplingDefaults d = from_config({{"do_sample", false}, {"temperature", 0.9}, {"top_p", 0.6}});
  EXPECT_EQ(d.temperature, 0.0f);
  EXPECT_FALSE(d.top_p);
  // Absent, the fields count as they are (vLLM's reading; many folders omit do_sample).
  EXPECT_EQ(from_config({{"temperature", 0.9}}).temperature, 0.9f);
}

TEST(SamplingDefaults, OutOfRangeOrMistypedFieldsAreErrors) {
  EXPECT_EQ(config_error({{"temperature", 3.0}}), "gc.json: temperature is 3, outside [0, 2]");
  EXPECT_EQ(config_error({{"top_p", 0.0}}), "gc.json: top_p is 0, outside [1e-06, 1]");
  EXPECT_EQ(config_error({{"top_k", -1}}), "gc.json: top_k is -1, outside [0, 1048576]");
  EXPECT_EQ(config_error({{"temperature", "hot"}}), "gc.json: temperature holds \"hot\", not a number");
  EXPECT_EQ(config_error({{"do_sample", "yes"}}), "gc.json: do_sample holds \"yes\", not true or false");
}

TEST(SamplingDefaults, RoundTripThroughGgufMetadata) {
  SamplingDefaults d;
  d.temperature = 0.7f;
  d.top_k = 40;
  d.min_p = 0.1f;
  gguf::Writer writer;
  writer.set_string("general.architecture", "llama");
  for (auto& [key, value] : sampling_metadata(d)) writer.set(key, std::move(value));
  testing::TempDir dir("sampling_defaults");
  writer.write(dir.path + "/m.gguf");
  const auto file = gguf::File::open(dir.path + "/m.gguf");
  EXPECT_EQ(file->find("general.sampling.top_p"), nullptr);
  const SamplingDefaults back = sampling_defaults_of(*file);
  EXPECT_EQ(back.temperature, 0.7f);
  EXPECT_EQ(back.top_k, 40);
  EXPECT_EQ(back.min_p, 0.1f);
  EXPECT_FALSE(back.top_p || back.repetition_penalty);
}

TEST(SamplingDefaults, BadGgufValuesAreErrors) {
  gguf::Writer writer;
  writer.set_string("general.sampling.temp", "warm");
  writer.set("general.sampling.top_p", gguf::Value::make_f32(2.0f));
  testing::TempDir dir("sampling_defaults_bad");
  writer.write(dir.path + "/bad.gguf");
  const auto file = gguf::File::open(dir.path + "/bad.gguf");
  try {
    sampling_defaults_of(*file);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), file->name() + ": general.sampling.temp is not a number");
  }
}

TEST(SamplingDefaults, RequestsStartFromTheModelsValuesAndTheirOwnFieldsWin) {
  SamplingDefaults d;
  d.temperature = 0.6f;
  d.top_k = 20;
  d.top_p = 0.95f;
  const SamplingParams base = with_defaults({}, d);
  EXPECT_EQ(base.temperature, 0.6f);
  EXPECT_EQ(base.top_k, 20);
  EXPECT_EQ(base.min_p, 0.0f);  // untouched fields keep the neutral value

  const server::ApiRequest plain = server::parse_chat_request(
      {{"messages", {{{"role", "user"}, {"content", "hi"}}}}}, {}, base);
  EXPECT_EQ(plain.sampling.temperature, 0.6f);
  EXPECT_EQ(plain.sampling.top_k, 20);
  EXPECT_EQ(plain.sampling.top_p, 0.95f);

  const server::ApiRequest own =
      server::parse_completion_request({{"prompt", "x"}, {"temperature", 0}, {"top_k", 5}}, {}, base);
  EXPECT_EQ(own.sampling.temperature, 0.0f);
  EXPECT_EQ(own.sampling.top_k, 5);
  EXPECT_EQ(own.sampling.top_p, 0.95f);
  EXPECT_TRUE(own.deterministic());
}

}  // namespace
}  // namespace tessera
