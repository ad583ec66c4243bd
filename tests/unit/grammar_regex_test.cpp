// Regular expressions as automata: whole-string acceptance equals std::regex (ECMAScript) on random strings,
// random walks through the mask only produce matches, Unicode classes over UTF-8, JSON-string spelling, and
// every unsupported construct or excessive pattern is refused with a reason, quickly.
#include <gtest/gtest.h>

#include <chrono>
#include <regex>

#include "grammar/grammar_error.h"
#include "grammar_test_util.h"
#include "time_bound.h"

namespace tessera::grammar {
namespace {

std::string random_string(std::mt19937& rng, std::string_view alphabet, size_t max_len) {
  std::string s;
  const size_t n = std::uniform_int_distribution<size_t>(0, max_len)(rng);
  for (size_t i = 0; i < n; ++i) s += alphabet[std::uniform_int_distribution<size_t>(0, alphabet.size() - 1)(rng)];
  return s;
}

TEST(GrammarRegex, WholeStringMatchEqualsStdRegex) {
  const char* patterns[] = {"abc",         "a|b|abc",          "(ab)*c",        "[a-c]{2,5}x?",    "[^a-c]+",
                            "(?:ab|b)+a?", "\\d{1,3}(\\.\\d+)?", "a.{0,3}b",      "(a|ab)(c|bcd)",   "x*y+z?",
                            "[\\w-]+",     "\\s*a\\s*",        "(a{2}|b{1,2})*", "^[0-9a-f]{2,4}$", "[-a]",
                            "a\\.b\\+c",   "[\\]\\-a]+",       "(|a)b",         "a{0}b",           "(a*)*"};
  const std::string alphabet = "abcdxyz019.-_ \t]+";
  std::mt19937 rng(42);
  for (const char* p : patterns) {
    const auto g = testing::regex_grammar(p);
    const std::regex reference(p, std::regex::ECMAScript);
    for (int i = 0; i < 400; ++i) {
      const std::string s = random_string(rng, alphabet, 8);
      ASSERT_EQ(testing::full_match(g->automaton(), s), std::regex_match(s, reference)) << p << " on '" << s << "'";
    }
  }
}

TEST(GrammarRegex, RandomWalksAlwaysMatch) {
  const testing::SmallVocab v;
  std::mt19937 rng(7);
  for (const char* p : {"[a-z]{3,8}@[a-z]+\\.(com|org)", "-?(0|[1-9][0-9]*)(\\.[0-9]+)?", "(ab|abc|ok)+",
                        "(2024|1999)-(0[1-9]|1[0-2])"}) {
    const auto g = testing::regex_grammar(p);
    const std::regex reference(p, std::regex::ECMAScript);
    int complete = 0;
    for (int i = 0; i < 40; ++i) {
      const testing::Walk w = testing::random_walk(g, v, rng);
      if (!w.complete) continue;
      ++complete;
      EXPECT_TRUE(std::regex_match(w.text, reference)) << p << " produced '" << w.text << "'";
    }
    EXPECT_GT(complete, 30) << p;
  }
}

TEST(GrammarRegex, UnicodeClassesWorkOnUtf8Bytes) {
  const auto g = testing::regex_grammar("[\\u00e9\\u4e2d-\\u4e2f]+|\\u{1F600}");
  EXPECT_TRUE(testing::full_match(g->automaton(), "\xC3\xA9\xE4\xB8\xAD\xE4\xB8\xAF"));
  EXPECT_TRUE(testing::full_match(g->automaton(), "\xF0\x9F\x98\x80"));
  EXPECT_FALSE(testing::full_match(g->automaton(), "\xC3\xA8"));
  EXPECT_FALSE(testing::full_match(g->automaton(), "\xE4\xB8\xB0"));
  EXPECT_TRUE(testing::viable_prefix(g->automaton(), "\xC3"));  // half a character
  EXPECT_FALSE(testing::viable_prefix(g->automaton(), "\xC4"));
  // '.' is any character but a line terminator, whatever its length; never a broken one.
  const auto dot = testing::regex_grammar(".");
  EXPECT_TRUE(testing::full_match(dot->automaton(), "\xF4\x8F\xBF\xBF"));
  EXPECT_FALSE(testing::full_match(dot->automaton(), "\n"));
  EXPECT_FALSE(testing::full_match(dot->automaton(), "\xED\xA0\x80"));  // a surrogate
  EXPECT_FALSE(testing::full_match(dot->automaton(), "\xC0\xAF"));      // overlong
}

TEST(GrammarRegex, JsonStringModeSpellsCharactersAsJsonDoes) {
  const auto g = testing::regex_grammar("a\"\\\\\\n[\\x00-\\x01]", true);
  EXPECT_TRUE(testing::full_match(g->automaton(), "a\\\"\\\\\\n\\u0001"));
  EXPECT_TRUE(testing::full_match(g->automaton(), "a\\\"\\\\\\n\\u0000"));
  EXPECT_FALSE(testing::full_match(g->automaton(), "a\"\\\n\x01"));  // raw: not valid inside a JSON string
}

TEST(GrammarRegex, UnsupportedConstructsAreRefusedWithTheReason) {
  const std::pair<const char*, const char*> cases[] = {
      {"(a)\\1", "backreferences"},       {"a(?=b)", "lookahead"},       {"(?<=a)b", "lookbehind"},
      {"\\bword", "word boundaries"},     {"a^b", "'^'"},                {"a$b", "'$'"},
      {"\\p{L}", "Unicode property"},     {"a{1001}", "above 1000"},     {"(ab", "missing ')'"},
      {"ab)", "unmatched ')'"},           {"[a-", "missing ']'"},        {"*a", "nothing to repeat"},
      {"a**", "nothing to repeat"},       {"[z-a]", "out of order"},     {"a{3,2}", "n < m"},
      {"\\q", "unknown escape"},          {"[[:alpha:]]", "POSIX"},      {"x\\", "ends with a backslash"},
  };
  for (const auto& [pattern, reason] : cases) {
    try {
      testing::regex_grammar(pattern);
      ADD_FAILURE() << pattern << " was accepted";
    } catch (const GrammarError& e) {
      EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << pattern << ": " << e.what();
    }
  }
}

TEST(GrammarRegex, ExponentialPatternsFailFastInsteadOfBlowingUp) {
  // The DFA of (a|b)*a(a|b){n} has 2^n states; nested counted repetition multiplies NFA states.
  for (const char* p : {"(a|b)*a(a|b){24}", "((a{1000}){1000}){1000}", "(((a|b){100}){100}){100}"}) {
    const auto start = std::chrono::steady_clock::now();
    EXPECT_THROW(testing::regex_grammar(p), GrammarError) << p;
    EXPECT_LT(std::chrono::steady_clock::now() - start, tessera::testing::time_bound(10)) << p;
  }
  // Hostile inputs for backtracking engines are plain automata here.
  const auto g = testing::regex_grammar("(a+)+b");
  EXPECT_FALSE(testing::full_match(g->automaton(), std::string(5000, 'a') + "c"));
  EXPECT_THROW(testing::regex_grammar(std::string(20000, 'a')), GrammarError);
  EXPECT_THROW(testing::regex_grammar(std::string(200, '(') + std::string(200, ')')), GrammarError);
}

}  // namespace
}  // namespace tessera::grammar
