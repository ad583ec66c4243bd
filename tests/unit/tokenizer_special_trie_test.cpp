// Special-token matching: the trie finds what comparing every piece at every position finds, and its cost does
// not grow with the number of special tokens (the chat encoder and the byte-level BPE tokenizer both use it).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <random>

#include "formats/gguf.h"
#include "server/chat_template.h"
#include "test_paths.h"
#include "tokenizer/special_token_trie.h"
#include "tokenizer/tokenizer.h"

namespace tessera {
namespace {

TEST(SpecialTokenTrie, LongestPieceOfTheAskedKinds) {
  SpecialTokenTrie t;
  EXPECT_TRUE(t.empty());
  t.add("<|im", 10, false);
  t.add("<|im_start|>", 11, true);
  t.add("<|im_end|>", 12, true);
  t.add("[INST]", 13, false);
  t.add("<|im_end|>", 14, false);  // the same piece as a user-defined token too
  t.add("<|im_start|>", 15, true);  // a duplicate: the first id stays
  EXPECT_FALSE(t.empty());
  EXPECT_TRUE(t.may_start('<'));
  EXPECT_FALSE(t.may_start('a'));
  const std::string text = "a<|im_start|>b<|im_end|>[INST]<|im";
  EXPECT_EQ(t.longest_match(text, 0, true).id, -1);
  EXPECT_EQ(t.longest_match(text, 1, true).id, 11);
  EXPECT_EQ(t.longest_match(text, 1, true).length, 12u);
  EXPECT_EQ(t.longest_match(text, 1, false).id, 10);  // the control piece is not asked for: its prefix is
  EXPECT_EQ(t.longest_match(text, 1, false).length, 4u);
  EXPECT_EQ(t.longest_match(text, 14, true).id, 12);
  EXPECT_EQ(t.longest_match(text, 14, false).id, 14);
  EXPECT_EQ(t.longest_match(text, 24, false).id, 13);
  EXPECT_EQ(t.longest_match(text, 30, true).id, 10);  // cut short by the end of the text
  EXPECT_EQ(t.longest_match(text, 31, true).id, -1);
  EXPECT_EQ(t.longest_match(text, 99, true).id, -1);
}

// The reference: every piece compared at the position, longest first, then the lowest id.
SpecialTokenTrie::Match brute_force(const std::vector<std::string>& pieces, const std::vector<bool>& control,
                                    const std::string& text, size_t pos, bool with_control) {
  SpecialTokenTrie::Match best;
  for (size_t id = 0; id < pieces.size(); ++id) {
    if (control[id] && !with_control) continue;
    if (text.compare(pos, pieces[id].size(), pieces[id]) == 0 && pieces[id].size() > best.length)
      best = {int32_t(id), pieces[id].size()};
  }
  return best;
}

TEST(SpecialTokenTrie, FindsWhatComparingEveryPieceFinds) {
  std::mt19937 rng(3);
  const std::string alphabet = "<|ab";
  auto random_string = [&](size_t max_len) {
    std::string s(1 + rng() % max_len, ' ');
    for (char& c : s) c = alphabet[rng() % alphabet.size()];
    return s;
  };
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<std::string> pieces;
    std::vector<bool> control;
    SpecialTokenTrie t;
    for (int i = 0; i < 30; ++i) {
      pieces.push_back(random_string(6));
      control.push_back(rng() % 2);
      t.add(pieces.back(), int32_t(i), control.back());
    }
    const std::string text = random_string(200);
    for (size_t pos = 0; pos <= text.size(); ++pos) {
      for (const bool with_control : {false, true}) {
        const auto want = brute_force(pieces, control, text, pos, with_control);
        const auto got = t.longest_match(text, pos, with_control);
        ASSERT_EQ(got.id, want.id) << trial << " at " << pos;
        ASSERT_EQ(got.length, want.length) << trial << " at " << pos;
      }
    }
  }
}

// GPT-2's vocabulary, plus `n_specials` control tokens in Llama 3's "<|reserved_special_token_N|>" style.
std::unique_ptr<Tokenizer> gpt2_with_specials(int n_specials) {
  const auto file = gguf::File::open(testing::shared_path("tokenizer-vectors/ggml-vocab-gpt-2.gguf"));
  Vocab v = vocab_from_gguf(*file);
  for (int i = 0; i < n_specials; ++i) {
    v.tokens.push_back("<|reserved_special_token_" + std::to_string(i) + "|>");
    v.scores.push_back(0.0f);
    v.kinds.push_back(TokenKind::Control);
  }
  return make_tokenizer(std::move(v));
}

double seconds_to_encode(const server::SpecialTokenEncoder& encoder, const std::string& text,
                         std::vector<int32_t>& ids) {
  const auto t0 = std::chrono::steady_clock::now();
  ids = encoder.encode(text, false);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Regression: at each '<' every special token was compared, in the chat encoder and again in the tokenizer: a
// megabyte of '<' against a thousand "<|...|>" tokens took seconds on the server's io thread. With the trie it
// costs what the same text costs with no special tokens at all.
TEST(SpecialTokenTrie, EncodingCostDoesNotGrowWithTheNumberOfSpecialTokens) {
  const auto plain = gpt2_with_specials(0);
  const auto many = gpt2_with_specials(1000);
  const server::SpecialTokenEncoder plain_encoder(*plain), many_encoder(*many);
  const std::string run(1 << 20, '<');
  std::vector<int32_t> plain_ids, many_ids;
  seconds_to_encode(plain_encoder, run, plain_ids);  // warm both tokenizers' word caches alike
  seconds_to_encode(many_encoder, run, many_ids);
  const double t_plain = seconds_to_encode(plain_encoder, run, plain_ids);
  const double t_many = seconds_to_encode(many_encoder, run + "<|reserved_special_token_999|>", many_ids);
  ASSERT_EQ(many_ids.size(), plain_ids.size() + 1);
  EXPECT_EQ(many_ids.back(), plain->n_vocab() + 999);
  EXPECT_TRUE(std::equal(plain_ids.begin(), plain_ids.end(), many_ids.begin()));
  EXPECT_LT(t_many, 3 * t_plain + 0.05) << "with 1000 special tokens " << t_many << " s, with none " << t_plain << " s";
}

}  // namespace
}  // namespace tessera
