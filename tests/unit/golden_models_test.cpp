// Golden tests against the reference implementations: stories260K (llama2.c run.c, fp32) and the ecosystem's
// llama-2-tiny-random GGUF (llama.cpp). Also checks that the committed embedded model is exactly what
// `tessera convert` produces from the shipped llama2.c checkpoint.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/thread_pool.h"
#include "engine/offline_engine.h"
#include "model/llama2c.h"
#include "model/embedded_model.h"
#include "model/model.h"
#include "test_paths.h"

namespace tessera {
namespace {

using tessera::testing::shared_path;
using tessera::testing::source_path;

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return nlohmann::json::parse(in);
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

SamplingParams greedy(int max_tokens) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = max_tokens;
  return p;
}

TEST(GoldenStories, ConvertReproducesTheEmbeddedModel) {
  const auto out = std::filesystem::temp_directory_path() / ("tessera_convert_" + std::to_string(::getpid()) + ".gguf");
  convert_llama2c_to_gguf(shared_path("models/stories260K.bin"), shared_path("models/tok512.bin"), out.string(),
                          "stories260K");
  const auto converted = read_bytes(out.string());
  std::filesystem::remove(out);
  const auto committed = read_bytes(source_path("models/stories260K.gguf"));
  ASSERT_FALSE(converted.empty());
  EXPECT_EQ(converted, committed) << "models/stories260K.gguf is stale: regenerate it with `tessera convert`";
  const auto embedded = embedded_model_bytes();
  EXPECT_TRUE(std::equal(embedded.begin(), embedded.end(), committed.begin(), committed.end()));
}

TEST(GoldenStories, GreedyContinuationsMatchRunC) {
  auto model = Model::load_embedded();
  const auto cases = read_json(shared_path("fixtures/stories260K_greedy.json"));
  ASSERT_EQ(cases.size(), 8u);
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    OfflineEngine generator(model, pool);
    for (const auto& c : cases) {
      const auto prompt = model->tokenizer().encode(c["prompt"].get<std::string>(), true);
      EXPECT_EQ(prompt, c["prompt_ids"].get<std::vector<int32_t>>()) << c["prompt"];
      const auto result = generator.generate(prompt, greedy(64));
      EXPECT_EQ(result.tokens, c["generated_ids"].get<std::vector<int32_t>>()) << c["prompt"];
      EXPECT_EQ(result.text, c["text"].get<std::string>()) << c["prompt"];
    }
  }
}

TEST(GoldenStories, PromptLogitsMatchRunC) {
  auto model = Model::load_embedded();
  const auto meta = read_json(shared_path("fixtures/stories260K_logits.json"));
  const auto ids = meta["token_ids"].get<std::vector<int32_t>>();
  const auto raw = read_bytes(shared_path("fixtures/stories260K_logits.bin"));
  ASSERT_EQ(raw.size(), ids.size() * 512 * sizeof(float));
  std::vector<float> expected(raw.size() / sizeof(float));
  std::memcpy(expected.data(), raw.data(), raw.size());
  ThreadPool pool(2);
  OfflineEngine generator(model, pool);
  const auto logits = generator.prompt_logits(ids);
  ASSERT_EQ(logits.size(), expected.size());
  float max_diff = 0.0f;
  for (size_t i = 0; i < logits.size(); ++i) max_diff = std::max(max_diff, std::fabs(logits[i] - expected[i]));
  EXPECT_LE(max_diff, 1e-4f);
}

TEST(GoldenTinyRandom, LlamaCppGreedyIdsAndLogits) {
  auto model = Model::load(shared_path("models/llama-2-tiny-random.gguf"));
  const auto ref = read_json(shared_path("fixtures/llama2_tiny_random_logits.json"));
  const auto prompt = model->tokenizer().encode(ref["prompt"].get<std::string>(), true);
  ASSERT_EQ(prompt, ref["prompt_ids"].get<std::vector<int32_t>>());
  ThreadPool pool(2);
  OfflineEngine generator(model, pool);
  const auto logits = generator.prompt_logits(prompt);
  const size_t n_vocab = size_t(model->config().n_vocab);
  const float* last = logits.data() + (prompt.size() - 1) * n_vocab;
  // Tessera keeps K/V in fp32 here, so compare with llama.cpp's F32-KV run.
  for (const auto& entry : ref["kv_f32_variant"]["last_pos_top20"]) {
    EXPECT_NEAR(last[entry[0].get<size_t>()], entry[1].get<float>(), 1e-4) << "token " << entry[0];
  }
  const auto result = generator.generate(prompt, greedy(16));
  EXPECT_EQ(result.tokens, ref["greedy_ids"].get<std::vector<int32_t>>());
}

}  // namespace
}  // namespace tessera
