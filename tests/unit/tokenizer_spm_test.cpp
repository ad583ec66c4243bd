// SentencePiece BPE against llama.cpp's test vectors (llama-spm, phi-3), a llama.cpp-tokenized prompt, and
// edge cases: empty text, spaces, invalid UTF-8, user-defined/control tokens, a 100 KB input.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "formats/gguf.h"
#include "test_paths.h"
#include "tokenizer_vectors.h"
#include "tokenizer/tokenizer.h"
#include "core/utf8.h"
#include "time_bound.h"

namespace tessera {
namespace {

using ::tessera::testing::describe;
using ::tessera::testing::read_file;
using ::tessera::testing::read_vectors;
using ::tessera::testing::shared_path;
using ::tessera::testing::VectorCase;

std::unique_ptr<Tokenizer> load(const std::string& relative) {
  const auto file = gguf::File::open(shared_path(relative));
  return make_tokenizer(vocab_from_gguf(*file));
}


void expect_vectors(const std::string& name, const std::string& vocab_file) {
  const auto tokenizer = load("tokenizer-vectors/" + vocab_file);
  const auto cases = read_vectors(name);
  ASSERT_EQ(cases.size(), 46u);
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto ids = tokenizer->encode(cases[i].text, /*add_bos=*/false);
    EXPECT_EQ(ids, cases[i].ids) << name << " case " << i << " text '" << cases[i].text << "'\n got      "
                                 << describe(ids) << "\n expected " << describe(cases[i].ids);
    // Byte fallback makes SentencePiece lossless here.
    EXPECT_EQ(tokenizer->decode(ids), cases[i].text) << name << " case " << i;
    const auto with_bos = tokenizer->encode(cases[i].text, /*add_bos=*/true);
    ASSERT_FALSE(with_bos.empty());
    EXPECT_EQ(with_bos.front(), 1);
    EXPECT_EQ(std::vector<int32_t>(with_bos.begin() + 1, with_bos.end()), cases[i].ids);
    EXPECT_EQ(tokenizer->decode(with_bos), cases[i].text) << name << " case " << i;
  }
}

TEST(TokenizerSpm, LlamaSpmVectors) { expect_vectors("llama-spm", "ggml-vocab-llama-spm.gguf"); }

TEST(TokenizerSpm, Phi3Vectors) { expect_vectors("phi-3", "ggml-vocab-phi-3.gguf"); }

TEST(TokenizerSpm, MatchesLlamaCppPromptOfTinyRandomModel) {
  const auto fixture = nlohmann::json::parse(read_file(shared_path("fixtures/llama2_tiny_random_logits.json")));
  const auto tokenizer = load("models/llama-2-tiny-random.gguf");
  const auto ids = tokenizer->encode(fixture["prompt"].get<std::string>(), true);
  EXPECT_EQ(ids, fixture["prompt_ids"].get<std::vector<int32_t>>());
  const auto greedy = fixture["greedy_ids"].get<std::vector<int32_t>>();
  const auto pieces = fixture["greedy_pieces"].get<std::vector<std::string>>();
  ASSERT_EQ(greedy.size(), pieces.size());
  for (size_t i = 0; i < greedy.size(); ++i) EXPECT_EQ(tokenizer->token_piece(greedy[i]), pieces[i]) << i;
}

TEST(TokenizerSpm, EmptyAndWhitespace) {
  const auto tokenizer = load("tokenizer-vectors/ggml-vocab-llama-spm.gguf");
  EXPECT_TRUE(tokenizer->encode("", false).empty());
  EXPECT_EQ(tokenizer->encode("", true), std::vector<int32_t>{1});
  EXPECT_EQ(tokenizer->decode(std::vector<int32_t>{}), "");
  EXPECT_EQ(tokenizer->decode(std::vector<int32_t>{1}), "");
  for (const std::string spaces : {" ", "  ", "     ", "          \n  "}) {
    const auto ids = tokenizer->encode(spaces, false);
    EXPECT_FALSE(ids.empty());
    EXPECT_EQ(tokenizer->decode(ids), spaces);
  }
}

TEST(TokenizerSpm, ControlTokenTextIsNotSpecial) {
  const auto tokenizer = load("tokenizer-vectors/ggml-vocab-llama-spm.gguf");
  const auto ids = tokenizer->encode("<s>hi</s>", false);
  for (const int32_t id : ids) {
    EXPECT_NE(id, 1);
    EXPECT_NE(id, 2);
  }
  EXPECT_EQ(tokenizer->decode(ids), "<s>hi</s>");
}

TEST(TokenizerSpm, UserDefinedTokensAreMatchedInText) {
  // In phi-3's vocabulary "</s>" (id 2) is user-defined: llama.cpp cuts it out before BPE and puts the dummy
  // prefix in front of the text that follows; control tokens such as <|end|> stay text.
  const auto tokenizer = load("tokenizer-vectors/ggml-vocab-phi-3.gguf");
  const auto hello = tokenizer->encode("Hello", false);
  const auto ids = tokenizer->encode("Hello</s>Hello", false);
  std::vector<int32_t> expected = hello;
  expected.push_back(2);
  expected.insert(expected.end(), hello.begin(), hello.end());
  EXPECT_EQ(ids, expected);
  EXPECT_EQ(tokenizer->encode("</s>", false), std::vector<int32_t>{2});
  const auto end_ids = tokenizer->encode("<|end|>", false);
  EXPECT_EQ(std::count(end_ids.begin(), end_ids.end(), 32007), 0);
}

TEST(TokenizerSpm, InvalidUtf8FallsBackToBytes) {
  const auto tokenizer = load("tokenizer-vectors/ggml-vocab-llama-spm.gguf");
  // Byte token ids are byte + 3 in this vocabulary; 29871 is "▁".
  EXPECT_EQ(tokenizer->encode("\xFF", false), (std::vector<int32_t>{29871, 0xFF + 3}));
  const std::string inputs[] = {
      std::string("\xFF\xFE abc \xE2\x82", 8),  // stray bytes and a truncated sequence at the end
      std::string("a\xC3(b", 4),                // lead byte followed by ASCII
      std::string("\xED\xA0\x80x", 4),          // an encoded surrogate
      std::string("\xC0\xAFz\x80\x80", 5),      // overlong form and lone continuations
      std::string("\0mid\0", 5),                // NUL bytes
  };
  for (const std::string& text : inputs) {
    const auto ids = tokenizer->encode(text, true);
    EXPECT_EQ(tokenizer->decode(ids), text);
  }
  // Random bytes: never a crash, always lossless.
  for (const std::string& text : ::tessera::testing::random_byte_strings(2024, 300)) {
    EXPECT_EQ(tokenizer->decode(tokenizer->encode(text, true)), text);
  }
  // An invalid byte is its own character: the valid text around it still merges normally.
  const auto ids = tokenizer->encode(std::string("Hello\xFFworld"), false);
  EXPECT_EQ(ids[0], 15043);  // "▁Hello"
  EXPECT_EQ(ids[1], 0xFF + 3);
}

TEST(TokenizerSpm, LongInputIsFastAndLossless) {
  const std::string corpus = read_file(shared_path("corpus/war-and-peace-400k.txt"));
  ASSERT_GE(corpus.size(), 100'000u);
  // Cut at a line end so the slice is valid UTF-8 and round-trips exactly.
  const std::string text = corpus.substr(0, corpus.find('\n', 100'000));
  const auto tokenizer = load("tokenizer-vectors/ggml-vocab-llama-spm.gguf");
  const auto start = std::chrono::steady_clock::now();
  const auto ids = tokenizer->encode(text, true);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 5.0 * tessera::testing::kTimeBoundScale) << "100 KB took " << seconds << " s";
  EXPECT_GT(ids.size(), 15'000u);
  EXPECT_LT(ids.size(), 50'000u);
  EXPECT_EQ(tokenizer->decode(ids), text);
  // One long run of a single repeated pair is the worst case for stale queue entries.
  const std::string spaces(100'000, ' ');
  EXPECT_EQ(tokenizer->decode(tokenizer->encode(spaces, false)), spaces);
}

TEST(TokenizerSpm, PiecesAndSpecialIds) {
  const auto tokenizer = load("tokenizer-vectors/ggml-vocab-llama-spm.gguf");
  EXPECT_EQ(tokenizer->n_vocab(), 32000);
  EXPECT_EQ(tokenizer->token_piece(1), "");            // <s>
  EXPECT_EQ(tokenizer->token_piece(0), "");            // <unk>
  EXPECT_EQ(tokenizer->token_piece(0x41 + 3), "A");    // <0x41>
  EXPECT_EQ(tokenizer->token_piece(15043), " Hello");  // ▁Hello
  EXPECT_EQ(tokenizer->token_piece(29871), " ");       // ▁
  EXPECT_THROW(tokenizer->token_piece(32000), Error);
  EXPECT_THROW(tokenizer->token_piece(-1), Error);
  EXPECT_TRUE(tokenizer->is_eog(2));
  EXPECT_FALSE(tokenizer->is_eog(1));
  EXPECT_FALSE(tokenizer->is_eog(15043));

  const auto phi3 = load("tokenizer-vectors/ggml-vocab-phi-3.gguf");
  EXPECT_TRUE(phi3->is_eog(32000));         // <|endoftext|>, the EOS
  EXPECT_TRUE(phi3->is_eog(32007));         // <|end|>, end of turn
  EXPECT_FALSE(phi3->is_eog(32010));        // <|user|>
  EXPECT_EQ(phi3->token_piece(2), "</s>");  // user-defined: written verbatim
}

}  // namespace
}  // namespace tessera
