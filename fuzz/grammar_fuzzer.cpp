// libFuzzer target for the structured-output compilers any HTTP client reaches: a JSON Schema
// (response_format), a regex, or a GBNF grammar. The first byte picks the kind (mod 3: schema, regex, GBNF), the
// rest is its source. Each input is compiled as server/structured_output.cpp compiles a request (same parsers,
// same default JsonSchemaLimits / CompileLimits / GrammarCacheLimits, the same extra `root` rule around the
// response), then, when it compiles, decoded under a Matcher over a fixed vocabulary for a bounded number of
// tokens chosen deterministically (from a hash of the input) among those the mask allows.
//
// Invariants (anything else aborts, as does any sanitizer report, timeout or memory blow-up):
//  - compiling either succeeds or throws grammar::GrammarError with a non-empty message; no other exception
//    (the server maps only GrammarError to a 400).
//  - the compiled automaton is self-consistent: a root rule with a start state, transitions and calls into
//    states and rules that exist, at most CompileLimits::max_dfa_states states.
//  - every parse state stays within PdaLimits (depth, stack count) and every stack's top consumes bytes.
//  - the mask never allows a token with no bytes (control tokens); it allows the end tokens exactly when the
//    grammar is complete; while the parse state is small enough to check, it equals the brute force (each
//    token's bytes stepped through the state on their own, no caches, no trie) and MaskBuilder::walk_all.
//  - every token the mask allows is accepted, and a token it refuses is refused without changing the state.
//  - finished() means complete with nothing that may follow (the mask is then the end tokens alone); dead()
//    means neither complete nor able to go on; both agree with the state stepped byte by byte.
//  - a second Matcher replaying the same tokens (now served from the grammar's mask caches) sees the same masks.
//
// The JSON Schema text must parse as JSON and nest at most 256 levels (what the server's body parser lets
// through); inputs it refuses earlier (not JSON, schema not an object or boolean, empty regex or grammar) are
// skipped.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/json_shape.h"
#include "grammar/compile.h"
#include "grammar/gbnf.h"
#include "grammar/grammar.h"
#include "grammar/grammar_error.h"
#include "grammar/json_schema.h"
#include "grammar/mask_builder.h"
#include "grammar/matcher.h"
#include "grammar/pda.h"
#include "grammar/regex.h"
#include "grammar/token_mask.h"
#include "grammar/vocabulary.h"

namespace {

using namespace tessera::grammar;
using tessera::json_shape;

constexpr int kMaxSteps = 96;             // tokens decoded per input
// The brute-force mask check runs while the state has at most this many cells, the walk_all check while it has at
// most a quarter (stepping deep stacks token by token under ASan is what makes an input slow).
constexpr size_t kBruteForceCells = 1024;
constexpr size_t kMaxJsonNesting = 256;    // server/openai_json.h
constexpr size_t kMaxJsonObjectMembers = 512;  // server/openai_json.h

void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "grammar_fuzzer: invariant violated: %s\n", what);
    std::abort();
  }
}

// Every single byte, JSON punctuation runs, literals and their prefixes, escapes, whitespace runs, words, whole
// and split UTF-8 characters (and a few malformed sequences), long runs that push nesting quickly, one
// duplicate piece; one control token and two end tokens (one with bytes, one without) with no grammar bytes.
struct FuzzVocab {
  std::vector<std::string> pieces;
  std::vector<int32_t> eog;
  int32_t control_id = -1;
  std::shared_ptr<const Vocabulary> vocab;

  FuzzVocab() {
    for (int b = 0; b < 256; ++b) pieces.push_back(std::string(1, char(b)));
    for (const char* t :
         {"{\"", "\":", "\",", "\"}", "}]", "]}", ", \"", "\": \"", "\":\"", "\": ", "{}", "[]", "[{", "},", "}}",
          "]]", "[[", "{\n", "\n}", "\n  ", "\n    ", "\n\t", "  ", "    ", " \"", ", ", "true", "false", "null",
          "nul", "tr", "fa", "ue", "12", "345", "0.", ".5", "e+", "E-", "-1", "-0", "00", "1e", "99", "0", "10",
          "\\n", "\\\"", "\\\\", "\\/", "\\u", "\\u00", "\\u001f", "\\ud8", "\\uD83D", "\\u0041", "\\t", "\\b",
          "name", "age", "\"name\"", "\"name\": \"", "type", "id", "value", "items", "\"a", "b\"", "\"\"", " the",
          "ab", "ab", "abc", "bc", "xyz", "aaaa", "a+", "hello", "world", "root", "::=", " ::= ", "| ", "\"x\"",
          "2024-", "01-", "29", "T12:", "00Z", ":00", "12:30:00", "+01:00", "P1D", "T1H", "@", "user@", ".com",
          "example", "192.", "168", "255", "::", "ff", "-4a", "8b", "\xC3\xA9", "\xC3", "\xA9", "\xA9x", "\xE4\xB8\xAD",
          "\xE4\xB8", "\xB8\xAD", "\xAD\"", "\xF0\x9F\x98\x80", "\xF0\x9F", "\x98\x80", "\xF0\x9F\x98", "\xC3\xBC",
          "\xC3\x9F", "\xE2\x82\xAC", "\xF4\x8F\xBF\xBF", "\xEF\xBF\xBF", "\xE2\x80\xA8", "\xC2\xA0", "\xC0\x80",
          "\xED\xA0\x80", "\xF5\x80\x80\x80", "\xEF\xBB\xBF", "<tool_call>", "</tool_call>", "\t", "\r\n",
          "[[[[[[[[", "{\"a\":{\"a\":", "((((", "))))", "]]]]]]]]", "}}}}", "aaaaaaaaaaaaaaaa", "0000000000",
          "                ", "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"", "abcabc", "ok", "OK", "red", "\"red\"", "green"})
      pieces.push_back(t);
    control_id = int32_t(pieces.size());
    pieces.push_back("");
    eog.push_back(int32_t(pieces.size()));
    pieces.push_back("</s>");  // an end token's bytes are never grammar bytes
    eog.push_back(int32_t(pieces.size()));
    pieces.push_back("");
    vocab = std::make_shared<const Vocabulary>(pieces, eog);
  }

  bool is_eog(int32_t id) const { return id == eog[0] || id == eog[1]; }
};

const FuzzVocab& fuzz_vocab() {
  static const FuzzVocab v;
  return v;
}

enum class Mode { Schema, Regex, Gbnf };

// compile_request() in server/structured_output.cpp for one response format and no tools. Returns null for
// input the server refuses before compiling.
std::shared_ptr<const Grammar> compile_like_server(Mode mode, std::string_view source) {
  std::optional<nlohmann::ordered_json> schema;
  if (mode == Mode::Schema) {
    try {
      schema = nlohmann::ordered_json::parse(source.begin(), source.end());
    } catch (const nlohmann::ordered_json::exception&) {
      return nullptr;
    }
    const tessera::JsonShape shape = json_shape(source);
    if (shape.depth > kMaxJsonNesting || shape.widest_object > kMaxJsonObjectMembers) return nullptr;
    if (!(schema->is_object() || schema->is_boolean())) return nullptr;
  } else if (source.empty()) {
    return nullptr;
  }
  GrammarIR ir;
  std::optional<ExprId> response;
  if (mode == Mode::Gbnf) {
    parse_gbnf(source, ir);
    response = ir.ref(ir.root);
  }
  JsonGrammarBuilder json(ir);
  if (mode == Mode::Regex) response = parse_regex(source, ir);
  if (mode == Mode::Schema) response = json.schema(*schema);
  const int32_t root = ir.new_rule("root");
  ir.define(root, *response);
  ir.root = root;
  return std::make_shared<const Grammar>(compile(ir));
}

void check_automaton(const CompiledGrammar& g) {
  require(g.n_states() > 0, "compiled grammar without states");
  require(size_t(g.n_states()) <= CompileLimits{}.max_dfa_states, "more states than CompileLimits allows");
  require(g.n_byte_classes() >= 1 && g.n_byte_classes() <= 256, "byte class count out of range");
  require(g.root_rule() >= 0 && g.root_rule() < g.n_rules(), "root rule out of range");
  require(g.rule_start(g.root_rule()) >= 0, "the root rule has no automaton");
  for (int32_t r = 0; r < g.n_rules(); ++r) require(g.rule_start(r) < g.n_states(), "rule start out of range");
  for (int32_t s = 0; s < g.n_states(); ++s) {
    bool bytes = false;
    for (int b = 0; b < 256; ++b) {
      const int32_t t = g.next(s, uint8_t(b));
      require(t >= -1 && t < g.n_states(), "transition out of range");
      bytes = bytes || t >= 0;
    }
    require(bytes == bool(g.flags(s) & CompiledGrammar::kHasBytes), "kHasBytes disagrees with the transitions");
    require(!g.calls(s).empty() == bool(g.flags(s) & CompiledGrammar::kHasCalls), "kHasCalls disagrees with calls");
    for (const Call& c : g.calls(s)) {
      require(c.rule >= 0 && c.rule < g.n_rules() && g.rule_start(c.rule) >= 0, "call into a rule without automaton");
      require(c.ret >= 0 && c.ret < g.n_states(), "call returns to a state out of range");
    }
  }
}

void check_state(const CompiledGrammar& g, const StackSet& s) {
  const PdaLimits limits;
  require(s.size() <= size_t(limits.max_stacks), "more stacks than PdaLimits::max_stacks");
  uint32_t begin = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    require(s.ends[i] > begin && s.ends[i] <= s.cells.size(), "stack bounds out of order");
    require(s.ends[i] - begin <= uint32_t(limits.max_depth), "stack deeper than PdaLimits::max_depth");
    for (int32_t c : s.stack(i)) require(c >= 0 && c < g.n_states(), "stack cell out of range");
    require(g.flags(s.top(i)) & CompiledGrammar::kHasBytes, "a stack's top does not consume bytes");
    begin = s.ends[i];
  }
  require(begin == s.cells.size(), "cells past the last stack");
}

// The tokens `state` allows, one token at a time (MaskBuilder::advance_bytes), without cache or trie.
TokenMask brute_force(MaskBuilder& builder, const StackSet& state) {
  const FuzzVocab& v = fuzz_vocab();
  TokenMask mask(v.vocab->n_vocab());
  StackSet out;
  for (int32_t id = 0; id < v.vocab->n_vocab(); ++id) {
    const std::string_view bytes = v.vocab->token_bytes(id);
    if (!bytes.empty() && builder.advance_bytes(state, bytes, out)) mask.set(id);
  }
  if (state.accepting)
    for (int32_t id : v.eog) mask.set(id);
  return mask;
}

std::string printable(std::string_view bytes) {
  std::string out;
  for (char c : bytes) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += c;
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", unsigned(uint8_t(c)));
      out += hex;
    }
  }
  return out;
}

void report_mask_difference(const StackSet& state, const std::string& text, const TokenMask& mask,
                            const TokenMask& expected) {
  const FuzzVocab& v = fuzz_vocab();
  size_t depth = 0;
  for (size_t i = 0; i < state.size(); ++i) depth = std::max(depth, state.stack(i).size());
  std::fprintf(stderr, "grammar_fuzzer: after '%s' (%zu stacks, deepest %zu, accepting %d):\n",
               printable(text).c_str(), state.size(), depth, int(state.accepting));
  int shown = 0;
  for (int32_t id = 0; id < v.vocab->n_vocab() && shown < 20; ++id) {
    if (mask.test(id) == expected.test(id)) continue;
    std::fprintf(stderr, "  token %d '%s': mask %d, brute force %d\n", id,
                 printable(v.vocab->token_bytes(id)).c_str(), int(mask.test(id)), int(expected.test(id)));
    ++shown;
  }
}

struct Rng {
  uint64_t s;
  uint64_t next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  }
};

void decode(const std::shared_ptr<const Grammar>& grammar, uint64_t seed) {
  const FuzzVocab& v = fuzz_vocab();
  const CompiledGrammar& g = grammar->automaton();
  auto constraint = std::make_shared<Constraint>();
  constraint->grammar = grammar;
  Matcher m(constraint, v.vocab);
  MaskBuilder shadow_builder(g, *v.vocab);  // the reference: its own runner and scratch
  StackSet state, next, probe;
  shadow_builder.runner().start(state);
  Rng rng{seed | 1};
  // How tokens are picked: uniformly, the longest allowed, or the previous one again while allowed (which
  // drives nesting deep fast).
  const uint64_t policy = rng.next() % 3;
  std::vector<int32_t> tokens;
  std::string text;  // the bytes accepted so far
  std::vector<TokenMask> masks;
  TokenMask mask;
  int32_t prev = -1;
  for (int step = 0; step < kMaxSteps; ++step) {
    check_state(g, state);
    require(m.dead() == state.dead(), "dead() disagrees with the state stepped byte by byte");
    require(m.finished() == (state.empty() && state.accepting), "finished() disagrees with the state");
    m.fill_mask(mask);
    require(mask.size() == v.vocab->n_vocab(), "mask not sized to the vocabulary");
    require(!mask.test(v.control_id), "a token without bytes is allowed");
    for (int32_t id : v.eog) require(mask.test(id) == state.accepting, "end token allowed iff complete is false");
    if (m.finished()) require(mask.count() == int64_t(v.eog.size()), "finished but more than the end is allowed");
    if (state.cells.size() <= kBruteForceCells) {
      const TokenMask expected = brute_force(shadow_builder, state);
      if (!(mask == expected)) report_mask_difference(state, text, mask, expected);
      require(mask == expected, "mask differs from the brute force");
    }
    if (state.cells.size() <= kBruteForceCells / 4) {
      TokenMask walked(v.vocab->n_vocab());
      shadow_builder.walk_all(state, walked);
      if (state.accepting)
        for (int32_t id : v.eog) walked.set(id);
      require(walked == mask, "walk_all differs from the mask");
    }
    masks.push_back(mask);
    std::vector<int32_t> allowed;
    mask.for_each([&](int32_t id) {
      if (!v.is_eog(id)) allowed.push_back(id);
    });
    // A refused token changes nothing.
    const auto refused = int32_t(rng.next() % uint64_t(v.vocab->n_vocab()));
    if (!mask.test(refused)) {
      require(!m.accept(refused), "a token outside the mask was accepted");
      TokenMask again;
      m.fill_mask(again);
      require(again == mask, "refusing a token changed the mask");
    }
    if (allowed.empty() || (state.accepting && rng.next() % 8 == 0)) {
      if (state.accepting) require(m.accept(v.eog[rng.next() % 2]), "an allowed end token was refused");
      break;
    }
    int32_t id = allowed[rng.next() % allowed.size()];
    if (policy == 1) {
      for (int32_t a : allowed)
        if (v.vocab->token_bytes(a).size() > v.vocab->token_bytes(id).size()) id = a;
    } else if (policy == 2 && prev >= 0 && mask.test(prev) && rng.next() % 16 != 0) {
      id = prev;
    }
    require(m.accept(id), "a token the mask allows was refused");
    require(shadow_builder.advance_bytes(state, v.vocab->token_bytes(id), next), "the brute force refuses the token");
    std::swap(state, next);
    text += v.vocab->token_bytes(id);
    tokens.push_back(id);
    prev = id;
  }

  // The same tokens again: masks now come from the grammar's caches.
  Matcher replay(constraint, v.vocab);
  for (size_t i = 0; i < masks.size(); ++i) {
    replay.fill_mask(mask);
    require(mask == masks[i], "a cached mask differs from the one computed");
    if (i < tokens.size()) require(replay.accept(tokens[i]), "the replay refused a token");
  }
}

// TESSERA_FUZZ_VERBOSE=1 prints what became of each input (to see what a reproducer or seed does).
bool verbose() {
  static const bool v = std::getenv("TESSERA_FUZZ_VERBOSE") != nullptr;
  return v;
}

uint64_t fnv1a(const uint8_t* data, size_t size) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < size; ++i) h = (h ^ data[i]) * 0x100000001b3ull;
  return h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const Mode mode = data[0] % 3 == 0 ? Mode::Schema : data[0] % 3 == 1 ? Mode::Regex : Mode::Gbnf;
  const std::string_view source(reinterpret_cast<const char*>(data + 1), size - 1);
  std::shared_ptr<const Grammar> grammar;
  try {
    grammar = compile_like_server(mode, source);
  } catch (const GrammarError& e) {
    require(e.what()[0] != '\0', "GrammarError without a message");
    if (verbose()) std::fprintf(stderr, "refused: %s\n", e.what());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "grammar_fuzzer: unexpected exception: %s\n", e.what());
    require(false, "compiling threw something other than GrammarError");
  }
  if (!grammar) {
    if (verbose()) std::fprintf(stderr, "skipped (refused before compiling)\n");
    return 0;
  }
  if (verbose())
    std::fprintf(stderr, "compiled: %d states, %d rules, %d byte classes\n", grammar->automaton().n_states(),
                 grammar->automaton().n_rules(), grammar->automaton().n_byte_classes());
  check_automaton(grammar->automaton());
  decode(grammar, fnv1a(data, size));
  return 0;
}
