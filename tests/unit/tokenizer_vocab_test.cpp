// Reading tokenizer.ggml.* metadata: real vocab-only GGUF files and clear errors for broken ones.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>

#include "core/error.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "tokenizer/vocab_gguf.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"

namespace tessera {
namespace {

using ::tessera::testing::shared_path;

TEST(TokenizerVocab, ReadsLlamaSpmGguf) {
  const auto file = gguf::File::open(shared_path("tokenizer-vectors/ggml-vocab-llama-spm.gguf"));
  const Vocab vocab = vocab_from_gguf(*file);
  EXPECT_EQ(vocab.model, "llama");
  ASSERT_EQ(vocab.tokens.size(), 32000u);
  EXPECT_EQ(vocab.scores.size(), 32000u);
  EXPECT_EQ(vocab.kinds.size(), 32000u);
  EXPECT_EQ(vocab.tokens[1], "<s>");
  EXPECT_EQ(vocab.kinds[0], TokenKind::Unknown);
  EXPECT_EQ(vocab.kinds[1], TokenKind::Control);
  EXPECT_EQ(vocab.kinds[3], TokenKind::Byte);
  EXPECT_EQ(vocab.kinds[15043], TokenKind::Normal);
  EXPECT_EQ(vocab.bos, 1);
  EXPECT_EQ(vocab.eos, 2);
  EXPECT_EQ(vocab.unk, 0);
  EXPECT_EQ(vocab.pad, -1);
  EXPECT_TRUE(vocab.add_bos);
  EXPECT_FALSE(vocab.add_eos);
  EXPECT_TRUE(vocab.add_space_prefix);  // not in the file: SentencePiece's default
}

TEST(TokenizerVocab, Phi3AndGpt2) {
  const auto phi3 = vocab_from_gguf(*gguf::File::open(shared_path("tokenizer-vectors/ggml-vocab-phi-3.gguf")));
  EXPECT_EQ(phi3.tokens.size(), 32064u);
  EXPECT_EQ(phi3.eos, 32000);
  EXPECT_EQ(phi3.pad, 32000);
  EXPECT_EQ(phi3.kinds[2], TokenKind::UserDefined);
  // The chat template travels with the vocabulary (the server renders chat prompts with it).
  EXPECT_NE(phi3.chat_template.find("<|user|>"), std::string::npos);

  // Byte-level BPE: merges and the pre-tokenizer name come along.
  const auto gpt2 = vocab_from_gguf(*gguf::File::open(shared_path("tokenizer-vectors/ggml-vocab-gpt-2.gguf")));
  EXPECT_EQ(gpt2.model, "gpt2");
  EXPECT_FALSE(gpt2.add_space_prefix);
  EXPECT_EQ(gpt2.pre, "gpt-2");
  ASSERT_EQ(gpt2.merges.size(), 50000u);
  EXPECT_EQ(gpt2.merges[0], "\xC4\xA0 t");  // "Ġ t"
  EXPECT_EQ(gpt2.chat_template, "");
  EXPECT_NE(make_tokenizer(gpt2), nullptr);

  // A tokenizer model nobody implements: the error names it.
  Vocab unknown = gpt2;
  unknown.model = "bert";
  try {
    make_tokenizer(unknown);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bert"), std::string::npos) << e.what();
  }
  Vocab unknown_pre = gpt2;
  unknown_pre.pre = "jais";
  try {
    make_tokenizer(unknown_pre);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("jais"), std::string::npos) << e.what();
  }
}

// Writes a small vocab-only GGUF, lets `edit` break it, and returns the error vocab_from_gguf reports.
class TokenizerVocabErrors : public ::testing::Test {
 protected:
  void TearDown() override { std::filesystem::remove(path_); }

  std::string load_error(const std::function<void(gguf::Writer&)>& edit) {
    gguf::Writer writer;
    writer.set_string("general.architecture", "llama");
    writer.set_string("tokenizer.ggml.model", "llama");
    writer.set_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>",
                                                      "\xE2\x96\x81"
                                                      "a"});
    writer.set_f32_array("tokenizer.ggml.scores", {0, 0, 0, -1});
    writer.set_i32_array("tokenizer.ggml.token_type", {2, 3, 3, 1});
    writer.set_u32("tokenizer.ggml.bos_token_id", 1);
    writer.set_u32("tokenizer.ggml.eos_token_id", 2);
    edit(writer);
    writer.write(path_);
    try {
      const Vocab vocab = vocab_from_gguf(*gguf::File::open(path_));
      make_tokenizer(vocab);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  std::string path_ =
      (std::filesystem::temp_directory_path() / ("tessera_tok_vocab_" + std::to_string(::getpid()) + ".gguf")).string();
};

TEST_F(TokenizerVocabErrors, ReportsWhatIsWrong) {
  const auto expect_error = [&](const std::function<void(gguf::Writer&)>& edit, const std::string& needle) {
    const std::string error = load_error(edit);
    EXPECT_NE(error.find(needle), std::string::npos) << "error '" << error << "' lacks '" << needle << "'";
  };
  EXPECT_EQ(load_error([](gguf::Writer&) {}), "");  // the base file is fine
  // A vocabulary without <0xXX> pieces falls back to <unk>, so it still builds.
  expect_error([](gguf::Writer& w) { w.set_f32_array("tokenizer.ggml.scores", {0, 0, 0}); }, "tokenizer.ggml.scores");
  expect_error(
      [](gguf::Writer& w) {
        w.set_i32_array("tokenizer.ggml.token_type", {2, 3, 3, 1, 1});
      },
      "tokenizer.ggml.token_type");
  expect_error([](gguf::Writer& w) { w.set_i32_array("tokenizer.ggml.token_type", {2, 3, 3, 9}); }, "token type");
  expect_error([](gguf::Writer& w) { w.set_u32("tokenizer.ggml.bos_token_id", 4); }, "BOS");
  expect_error([](gguf::Writer& w) { w.set_u32("tokenizer.ggml.eos_token_id", 100); }, "EOS");
  expect_error([](gguf::Writer& w) { w.set_f32("tokenizer.ggml.eos_token_id", 1.5f); }, "eos_token_id");
  expect_error([](gguf::Writer& w) { w.set_string_array("tokenizer.ggml.tokens", {}); }, "empty");
  expect_error([](gguf::Writer& w) { w.set_string("tokenizer.ggml.tokens", "x"); }, "tokenizer.ggml.tokens");
  expect_error([](gguf::Writer& w) { w.set_string("tokenizer.ggml.model", "rwkv"); }, "rwkv");
  expect_error([](gguf::Writer& w) { w.set_u32("tokenizer.ggml.model", 3); }, "tokenizer.ggml.model");
}

TEST_F(TokenizerVocabErrors, ChatTemplateRoundTrips) {
  EXPECT_EQ(load_error([](gguf::Writer& w) { w.set_string("tokenizer.chat_template", "{{ messages }}"); }), "");
  EXPECT_EQ(vocab_from_gguf(*gguf::File::open(path_)).chat_template, "{{ messages }}");
  Vocab vocab = vocab_from_gguf(*gguf::File::open(path_));
  vocab.chat_template = "{% for m in messages %}{{ m.content }}{% endfor %}";
  gguf::Writer writer;
  write_vocab(writer, vocab);
  writer.write(path_);
  EXPECT_EQ(vocab_from_gguf(*gguf::File::open(path_)).chat_template, vocab.chat_template);
  // Not a string: the error names the key.
  EXPECT_NE(load_error([](gguf::Writer& w) { w.set_u32("tokenizer.chat_template", 1); }).find("tokenizer.chat_template"),
            std::string::npos);
}

TEST_F(TokenizerVocabErrors, MissingKeys) {
  gguf::Writer writer;
  writer.set_string("general.architecture", "llama");
  writer.write(path_);
  try {
    vocab_from_gguf(*gguf::File::open(path_));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.ggml.model"), std::string::npos) << e.what();
  }
  gguf::Writer no_scores;
  no_scores.set_string("tokenizer.ggml.model", "llama");
  no_scores.set_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>"});
  no_scores.write(path_);
  try {
    vocab_from_gguf(*gguf::File::open(path_));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.ggml.scores"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessera
