// Streaming detokenization: never emits invalid UTF-8, holds back split characters, and adds up to decode().
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "formats/gguf.h"
#include "test_paths.h"
#include "tokenizer/llama2c_vocab.h"
#include "tokenizer/tokenizer.h"
#include "core/utf8.h"

namespace tessera {
namespace {

using ::tessera::testing::shared_path;

std::unique_ptr<Tokenizer> llama_spm() {
  const auto file = gguf::File::open(shared_path("tokenizer-vectors/ggml-vocab-llama-spm.gguf"));
  return make_tokenizer(vocab_from_gguf(*file));
}

int32_t byte_token(uint8_t byte) { return byte + 3; }  // <0xXX> ids in both test vocabularies

// Streams `ids` and checks every chunk; returns the concatenation.
std::string stream(const Tokenizer& tokenizer, const std::vector<int32_t>& ids, bool skip_leading_space = true) {
  IncrementalDecoder decoder(tokenizer, skip_leading_space);
  std::string all;
  for (const int32_t id : ids) {
    const std::string chunk = decoder.push(id);
    EXPECT_TRUE(utf8::is_valid(chunk)) << "after id " << id;
    all += chunk;
  }
  const std::string tail = decoder.flush();
  EXPECT_TRUE(utf8::is_valid(tail));
  return all + tail;
}

TEST(TokenizerDecode, StreamsEmojiAndCjkSplitIntoBytes) {
  const auto tokenizer = llama_spm();
  const std::string text =
      "I \xF0\x9F\x9A\x80 love \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E and \xF0\x9F\x98\xB6\xE2\x80\x8D"
      "\xF0\x9F\x8C\xAB\xEF\xB8\x8F \xE1\x9E\x80\xE1\x9E\xB6!";
  const auto ids = tokenizer->encode(text, true);
  // The rocket has no token of its own: it must arrive as four byte tokens.
  const std::vector<int32_t> rocket = {byte_token(0xF0), byte_token(0x9F), byte_token(0x9A), byte_token(0x80)};
  EXPECT_NE(std::search(ids.begin(), ids.end(), rocket.begin(), rocket.end()), ids.end());
  EXPECT_EQ(tokenizer->decode(ids), text);
  EXPECT_EQ(stream(*tokenizer, ids), text);

  // Held back until complete: the first three bytes of the rocket yield nothing, the fourth the character.
  IncrementalDecoder decoder(*tokenizer);
  EXPECT_EQ(decoder.push(rocket[0]), "");
  EXPECT_EQ(decoder.push(rocket[1]), "");
  EXPECT_EQ(decoder.push(rocket[2]), "");
  EXPECT_EQ(decoder.push(rocket[3]), "\xF0\x9F\x9A\x80");
  EXPECT_EQ(decoder.flush(), "");
}

TEST(TokenizerDecode, StreamingMatchesDecodeOnAllVectors) {
  const auto tokenizer = llama_spm();
  std::ifstream in(shared_path("tokenizer-vectors/llama-spm.inp"), std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string inp = ss.str();
  const std::string separator = "\n__ggml_vocab_test__\n";
  size_t n_cases = 0;
  for (size_t pos = 0, end; (end = inp.find(separator, pos)) != std::string::npos; pos = end + separator.size()) {
    const std::string text = inp.substr(pos, end - pos);
    for (const bool add_bos : {false, true}) {
      const auto ids = tokenizer->encode(text, add_bos);
      EXPECT_EQ(stream(*tokenizer, ids), tokenizer->decode(ids)) << text;
      EXPECT_EQ(stream(*tokenizer, ids), text);
    }
    ++n_cases;
  }
  EXPECT_EQ(n_cases, 46u);
}

TEST(TokenizerDecode, InvalidBytesBecomeReplacementWhenCertain) {
  const auto tokenizer = llama_spm();
  const std::string fffd(utf8::kReplacement);
  IncrementalDecoder decoder(*tokenizer);
  EXPECT_EQ(decoder.push(byte_token(0xE2)), "");
  EXPECT_EQ(decoder.push(byte_token(0x82)), "");         // still a valid prefix of a 3-byte character
  EXPECT_EQ(decoder.push(byte_token('A')), fffd + "A");  // now certain: E2 82 is one ill-formed subpart
  EXPECT_EQ(decoder.push(byte_token(0xFF)), fffd);       // never valid: replaced at once
  EXPECT_EQ(decoder.push(byte_token(0x80)), fffd);       // lone continuation byte
  EXPECT_EQ(decoder.push(byte_token(0xF0)), "");
  EXPECT_EQ(decoder.flush(), fffd);  // truncated at the end of the stream
  EXPECT_EQ(decoder.flush(), "");

  // Whatever the bytes, the stream is valid UTF-8 and equals the sanitized full decode.
  std::vector<int32_t> ids = {1};
  uint32_t state = 12345;
  for (int i = 0; i < 2000; ++i) {
    state = state * 1664525u + 1013904223u;
    const uint32_t r = state >> 8;
    ids.push_back(r % 3 == 0 ? static_cast<int32_t>(r % 32000) : byte_token(static_cast<uint8_t>(r >> 4)));
  }
  EXPECT_EQ(stream(*tokenizer, ids), utf8::sanitize(tokenizer->decode(ids)));
}

TEST(TokenizerDecode, LeadingSpace) {
  const auto tokenizer = llama_spm();
  const auto ids = tokenizer->encode("Hello world", true);  // <s> ▁Hello ▁world
  EXPECT_EQ(tokenizer->decode(ids), "Hello world");
  EXPECT_EQ(stream(*tokenizer, ids), "Hello world");
  EXPECT_EQ(stream(*tokenizer, ids, /*skip_leading_space=*/false), " Hello world");
  // A continuation chunk decoded on its own keeps its spaces when the caller says so.
  const std::vector<int32_t> tail(ids.begin() + 2, ids.end());
  EXPECT_EQ(stream(*tokenizer, tail, false), " world");
}

TEST(TokenizerDecode, Tok512StreamsLikeRunC) {
  const auto tokenizer = make_tokenizer(vocab_from_llama2c(shared_path("models/tok512.bin")));
  const std::string text = "Lily saw a \xE6\x97\xA5 and said \"hi\" \xF0\x9F\x8D\x95!";
  const auto ids = tokenizer->encode(text, true);
  EXPECT_EQ(tokenizer->decode(ids), text);
  EXPECT_EQ(stream(*tokenizer, ids), text);
}

TEST(TokenizerUtf8, ScanFollowsUnicodeTable) {
  using utf8::SeqState;
  const auto scan = [](std::string_view s) { return utf8::scan(s, 0); };
  EXPECT_EQ(scan("a").state, SeqState::Valid);
  EXPECT_EQ(scan("\xC3\xA9").length, 2u);
  EXPECT_EQ(scan("\xE0\x80\x80").state, SeqState::Invalid);  // overlong
  EXPECT_EQ(scan("\xE0\x80\x80").length, 1u);
  EXPECT_EQ(scan("\xED\xA0\x80").state, SeqState::Invalid);      // surrogate
  EXPECT_EQ(scan("\xF4\x90\x80\x80").state, SeqState::Invalid);  // above U+10FFFF
  EXPECT_EQ(scan("\xF0\x9F\x9A").state, SeqState::Truncated);
  EXPECT_EQ(scan("\xF0\x9F\x9A").length, 3u);
  EXPECT_EQ(scan("\xF0\x9F\x9A"
                 "A")
                .state,
            SeqState::Invalid);
  EXPECT_EQ(scan("\xF0\x9F\x9A"
                 "A")
                .length,
            3u);
  EXPECT_EQ(utf8::sanitize("a\xFF"
                           "b\xE2\x82"),
            "a\xEF\xBF\xBD"
            "b\xEF\xBF\xBD");
}

}  // namespace
}  // namespace tessera
