// Helpers of the grammar tests: compiling each input kind, whole-string matching through the automaton, a small
// vocabulary full of tokens that straddle grammar boundaries, and the brute-force allowed set (every token's
// bytes stepped through the parse state) that the cached masks must equal.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "grammar/compile.h"
#include "grammar/gbnf.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/mask_builder.h"
#include "grammar/matcher.h"
#include "grammar/regex.h"

namespace tessera::grammar::testing {

// `ir` with `body` as its root rule, compiled.
inline std::shared_ptr<const Grammar> compile_root(GrammarIR& ir, ExprId body) {
  const int32_t root = ir.rule("root");
  ir.define(root, body);
  ir.root = root;
  return std::make_shared<const Grammar>(compile(ir));
}

inline std::shared_ptr<const Grammar> regex_grammar(std::string_view pattern, bool json_string = false) {
  GrammarIR ir;
  RegexOptions options;
  options.json_string = json_string;
  return compile_root(ir, parse_regex(pattern, ir, options));
}

inline std::shared_ptr<const Grammar> gbnf_grammar(std::string_view text) {
  GrammarIR ir;
  parse_gbnf(text, ir);
  return std::make_shared<const Grammar>(compile(ir));
}

inline std::shared_ptr<const Grammar> schema_grammar(const nlohmann::ordered_json& schema) {
  GrammarIR ir;
  JsonGrammarBuilder builder(ir);
  return compile_root(ir, builder.schema(schema));
}

inline std::shared_ptr<const Grammar> json_object_grammar() {
  GrammarIR ir;
  JsonGrammarBuilder builder(ir);
  return compile_root(ir, builder.any_object());
}

// The parse state after `text` from the start (dead when some byte is refused).
inline StackSet state_after(const CompiledGrammar& g, std::string_view text) {
  PdaRunner runner(g);
  StackSet cur, next;
  runner.start(cur);
  for (char c : text) {
    if (cur.empty()) return {};
    runner.advance(cur, uint8_t(c), next);
    std::swap(cur, next);
  }
  return cur;
}

// Whole-string match: every byte accepted and the root complete at the end.
inline bool full_match(const CompiledGrammar& g, std::string_view text) { return state_after(g, text).accepting; }

// A prefix of some string of the language.
inline bool viable_prefix(const CompiledGrammar& g, std::string_view text) { return !state_after(g, text).dead(); }

// Every single byte, then multi-byte tokens that cross JSON and tag boundaries, split UTF-8 characters (é and
// 中 in pieces), escapes, whitespace runs; the last id is an end-of-generation token with no bytes, and one
// control token has no bytes either.
struct SmallVocab {
  std::vector<std::string> pieces;
  std::vector<int32_t> eog;
  int32_t eog_id = -1;
  int32_t control_id = -1;
  std::shared_ptr<const Vocabulary> vocab;

  SmallVocab() {
    for (int b = 0; b < 256; ++b) pieces.push_back(std::string(1, char(b)));
    for (const char* t :
         {"{\"", "\":", "\",", "\"}", "}]", "]}", ", \"", "\": \"", "\":\"", "{}", "[]", "[{", "},", "}}", "\n  ",
          "\n    ", "  ", "    ", " \"", "true", "false", "null", "nul", "tr", "12", "345", "0.", ".5", "e+", "-1",
          "\\n", "\\\"", "\\u00", "\\u", "\\ud8", "name", "age", "\"name\"", "\"name\": \"", " the", "ab", "abc",
          "bc", "xyz", "\xC3\xA9", "\xC3", "\xA9x", "\xE4\xB8\xAD", "\xE4\xB8", "\xAD\"", "\xF0\x9F\x98\x80", "<tool_call>",
          "<tool", "_call>", ">{\"", "</tool_call>", "\n<tool_call>\n{\"", "Sure<tool_call>", "red", "\"red\"", "green",
          "2024-", "01-", "29", "T12:", "00Z", "12:30:00", "abcabc", "aaaa", "a+", "\"a", "b\"", "\"\"", "0", "00",
          "1e", "E-", "99", "-0", "\t", "\r\n", "\u00e9t\u00e9", "ok", "OK", "ko"})
      pieces.push_back(t);
    control_id = int32_t(pieces.size());
    pieces.push_back("");
    eog_id = int32_t(pieces.size());
    pieces.push_back("");
    eog = {eog_id};
    vocab = std::make_shared<const Vocabulary>(pieces, eog);
  }
};

// The tokens `state` allows, checked one by one without any cache or trie.
inline TokenMask brute_force_mask(const CompiledGrammar& g, const Vocabulary& vocab, const StackSet& state) {
  TokenMask mask(vocab.n_vocab());
  MaskBuilder builder(g, vocab);
  StackSet out;
  for (int32_t id = 0; id < vocab.n_vocab(); ++id) {
    const std::string_view bytes = vocab.token_bytes(id);
    if (bytes.empty()) continue;
    if (builder.advance_bytes(state, bytes, out)) mask.set(id);
  }
  if (state.accepting)
    for (int32_t id : vocab.eog_ids()) mask.set(id);
  return mask;
}

// Random walk: draws allowed tokens (the end-of-generation token with probability `p_end` when allowed) until
// the matcher finishes, an end token is drawn, or `max_tokens`. Returns the text and whether it ended cleanly.
struct Walk {
  std::string text;
  bool complete = false;
};

inline Walk random_walk(const std::shared_ptr<const Grammar>& grammar, const SmallVocab& v, std::mt19937& rng,
                        int max_tokens = 400, double p_end = 0.5) {
  auto constraint = std::make_shared<Constraint>();
  constraint->grammar = grammar;
  Matcher m(constraint, v.vocab);
  TokenMask mask;
  Walk walk;
  for (int step = 0; step < max_tokens; ++step) {
    m.fill_mask(mask);
    std::vector<int32_t> allowed;
    mask.for_each([&](int32_t id) { allowed.push_back(id); });
    if (allowed.empty()) return walk;
    if (mask.test(v.eog_id) && (allowed.size() == 1 || std::uniform_real_distribution<>(0, 1)(rng) < p_end)) {
      walk.complete = true;
      return walk;
    }
    std::erase(allowed, v.eog_id);
    const int32_t id = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
    EXPECT_TRUE(m.accept(id));
    walk.text += v.vocab->token_bytes(id);
    if (m.finished()) {
      walk.complete = true;
      return walk;
    }
  }
  return walk;
}

}  // namespace tessera::grammar::testing
