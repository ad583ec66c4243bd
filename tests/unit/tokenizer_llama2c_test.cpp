// llama2.c tokenizer.bin import and SentencePiece encoding against run.c's encode() on tok512.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "test_paths.h"
#include "tokenizer/llama2c_vocab.h"
#include "tokenizer/tokenizer.h"

namespace tessera {
namespace {

using ::tessera::testing::shared_path;

TEST(TokenizerLlama2c, LoadsTok512InGgufConvention) {
  const Vocab vocab = vocab_from_llama2c(shared_path("models/tok512.bin"));
  ASSERT_EQ(vocab.tokens.size(), 512u);
  EXPECT_EQ(vocab.model, "llama");
  EXPECT_EQ(vocab.tokens[0], "<unk>");
  EXPECT_EQ(vocab.tokens[1], "<s>");
  EXPECT_EQ(vocab.tokens[2], "</s>");
  EXPECT_EQ(vocab.kinds[0], TokenKind::Unknown);
  EXPECT_EQ(vocab.kinds[1], TokenKind::Control);
  EXPECT_EQ(vocab.kinds[2], TokenKind::Control);
  EXPECT_EQ(vocab.tokens[3], "<0x00>");
  EXPECT_EQ(vocab.kinds[3], TokenKind::Byte);
  EXPECT_EQ(vocab.kinds[258], TokenKind::Byte);
  EXPECT_EQ(vocab.tokens[259], "\xE2\x96\x81t");  // " t" in the file
  EXPECT_EQ(vocab.kinds[259], TokenKind::Normal);
  EXPECT_EQ(vocab.tokens[410], "\xE2\x96\x81");
  EXPECT_FLOAT_EQ(vocab.scores[260], -1.0f);
  EXPECT_EQ(vocab.bos, 1);
  EXPECT_EQ(vocab.eos, 2);
  EXPECT_EQ(vocab.unk, 0);
  EXPECT_TRUE(vocab.add_bos);
  EXPECT_TRUE(vocab.add_space_prefix);
  for (const auto& token : vocab.tokens) EXPECT_EQ(token.find(' '), std::string::npos) << token;
}

TEST(TokenizerLlama2c, MatchesRunCEncode) {
  std::ifstream in(shared_path("fixtures/tok512_tokenize.json"));
  ASSERT_TRUE(in.good());
  const auto fixture = nlohmann::json::parse(in);
  const auto tokenizer = make_tokenizer(vocab_from_llama2c(shared_path("models/tok512.bin")));
  ASSERT_EQ(fixture["cases"].size(), 20u);
  for (const auto& c : fixture["cases"]) {
    const auto text = c["text"].get<std::string>();
    const auto expected = c["ids"].get<std::vector<int32_t>>();
    const auto ids = tokenizer->encode(text, /*add_bos=*/true);
    EXPECT_EQ(ids, expected) << "text '" << text << "'";
    EXPECT_EQ(tokenizer->decode(ids), text);
  }
}

class TokenizerLlama2cFile : public ::testing::Test {
 protected:
  void write(const std::string& bytes) {
    std::ofstream out(path_, std::ios::binary);
    out << bytes;
  }
  void TearDown() override { std::filesystem::remove(path_); }
  std::string path_ =
      (std::filesystem::temp_directory_path() / ("tessera_tok_llama2c_" + std::to_string(::getpid()) + ".bin"))
          .string();
};

std::string le32(uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); }
std::string entry(float score, const std::string& piece) {
  uint32_t bits;
  std::memcpy(&bits, &score, 4);
  return le32(bits) + le32(static_cast<uint32_t>(piece.size())) + piece;
}

TEST_F(TokenizerLlama2cFile, RejectsMissingAndTruncatedFiles) {
  EXPECT_THROW(vocab_from_llama2c(path_ + ".missing"), Error);

  const std::string good = le32(8) + entry(0, "<unk>") + entry(0, "\n<s>\n") + entry(0, "\n</s>\n") + entry(-1, " a");
  write(good);
  const Vocab vocab = vocab_from_llama2c(path_);
  EXPECT_EQ(vocab.tokens.size(), 4u);
  EXPECT_EQ(vocab.tokens[3],
            "\xE2\x96\x81"
            "a");

  write(good.substr(0, good.size() - 1));  // last piece cut short
  try {
    vocab_from_llama2c(path_);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }

  write(le32(8) + entry(0, "<unk>") + le32(0) + le32(0xFFFFFFF0u));  // negative length
  EXPECT_THROW(vocab_from_llama2c(path_), Error);

  write(le32(8) + entry(0, "<unk>"));  // too few tokens for <s>, </s>
  EXPECT_THROW(vocab_from_llama2c(path_), Error);

  write("");
  EXPECT_THROW(vocab_from_llama2c(path_), Error);
}

}  // namespace
}  // namespace tessera
