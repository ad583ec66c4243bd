// Constrained decoding in the batching engine on the embedded model: greedy and sampled output (with every
// sampling option, and n > 1 samples that fork) always parses and validates; constrained and free sequences share
// batches without changing each other's tokens; end-of-generation only where the grammar may end; a grammar
// that cannot complete within max_tokens ends with Length and a text that is not a complete document.
#include <gtest/gtest.h>

#include <future>
#include <map>
#include <mutex>
#include <regex>

#include "engine/constraint.h"
#include "engine/engine.h"
#include "grammar_test_util.h"
#include "json_schema_check.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace tessera {
namespace {

using nlohmann::ordered_json;

std::shared_ptr<const Model> model() {
  static std::shared_ptr<const Model> m = Model::load_embedded();
  return m;
}

EngineOptions options() {
  EngineOptions o;
  o.threads = 2;
  o.kv_blocks = 512;
  o.scheduling.max_batched_tokens = 256;
  o.scheduling.max_seqs = 16;
  return o;
}

struct Outcome {
  std::vector<int32_t> tokens;
  std::string text;
  FinishReason reason = FinishReason::Error;
  std::string error;
};

// Submits every request to one engine at once (they share batches) and waits for all their samples.
std::vector<Outcome> run_together(Engine& engine, const std::vector<Request>& requests) {
  std::mutex mutex;
  std::map<std::pair<size_t, int32_t>, Outcome> out;
  size_t expected = 0, finished = 0;
  std::promise<void> done;
  for (const Request& r : requests) expected += size_t(r.n);
  for (size_t i = 0; i < requests.size(); ++i) {
    engine.submit(requests[i], [&, i](const StreamEvent& ev) {
      std::lock_guard lock(mutex);
      Outcome& o = out[{i, ev.index}];
      o.text += ev.text;
      if (ev.kind == StreamEvent::Kind::Token) {
        o.tokens.push_back(ev.token);
      } else {
        o.reason = ev.finish_reason;
        o.error = ev.error;
        if (++finished == expected) done.set_value();
      }
    });
  }
  done.get_future().wait();
  EXPECT_TRUE(engine.wait_idle(std::chrono::seconds(30)));
  std::vector<Outcome> list;
  for (auto& [key, o] : out) list.push_back(std::move(o));
  return list;
}

std::vector<Outcome> run(const std::vector<Request>& requests) {
  Engine engine(model(), options());
  return run_together(engine, requests);
}

Request request(const std::string& prompt, int max_tokens, std::shared_ptr<const grammar::Grammar> g) {
  Request r;
  r.prompt = model()->tokenizer().encode(prompt, true);
  r.sampling.temperature = 0.0f;
  r.sampling.max_tokens = max_tokens;
  if (g) {
    auto c = std::make_shared<grammar::Constraint>();
    c->grammar = std::move(g);
    r.constraint = std::move(c);
  }
  return r;
}

// Strings are bounded, so that the little story model ends its documents within max_tokens.
const char* kSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1, "maxLength": 12},
    "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "mood": {"enum": ["happy", "sad", "sleepy"]},
    "friends": {"type": "array", "maxItems": 3, "items": {
      "type": "object", "properties": {"name": {"type": "string", "maxLength": 8}, "best": {"type": "boolean"}},
      "required": ["name", "best"], "additionalProperties": false}}
  },
  "required": ["name", "age", "mood", "friends"],
  "additionalProperties": false
})";

void expect_valid(const Outcome& o, const tessera::testing::SchemaCheck& check, const std::string& what) {
  ASSERT_EQ(o.reason, FinishReason::Stop) << what << ": " << o.text << " " << o.error;
  ordered_json doc;
  ASSERT_NO_THROW(doc = ordered_json::parse(o.text)) << what << ": " << o.text;
  EXPECT_EQ(check.check(doc), "") << what << ": " << o.text;
  EXPECT_EQ(o.text, model()->tokenizer().decode(o.tokens)) << what;
}

TEST(EngineConstraint, GreedyOutputFollowsTheSchema) {
  const ordered_json schema = ordered_json::parse(kSchema);
  const tessera::testing::SchemaCheck check(schema);
  const auto g = grammar::testing::schema_grammar(schema);
  for (const char* prompt : {"Once upon a time", "Tom had a red ball", "One day"}) {
    const std::vector<Outcome> out = run({request(prompt, 300, g)});
    expect_valid(out[0], check, prompt);
  }
}

TEST(EngineConstraint, SampledOutputWithEverySamplingOptionFollowsTheSchema) {
  const ordered_json schema = ordered_json::parse(kSchema);
  const tessera::testing::SchemaCheck check(schema);
  const auto g = grammar::testing::schema_grammar(schema);
  std::vector<Request> requests;
  for (int i = 0; i < 6; ++i) {
    Request r = request(i % 2 ? "Lily and Ben went to the park" : "Once upon a time", 300, g);
    r.sampling.temperature = 0.7f + 0.2f * float(i);
    r.sampling.seed = 100 + uint64_t(i);
    r.sampling.has_seed = true;
    if (i == 1) r.sampling.top_k = 5;
    if (i == 2) r.sampling.top_p = 0.8f;
    if (i == 3) r.sampling.min_p = 0.1f;
    if (i == 4) {
      r.sampling.repetition_penalty = 1.3f;
      r.sampling.frequency_penalty = 0.5f;
      r.sampling.presence_penalty = -0.5f;
    }
    if (i == 5) {
      r.n = 3;  // forks after the prompt: each sample gets its own matcher
      r.logprobs = true;
      r.top_logprobs = 5;
    }
    requests.push_back(r);
  }
  const std::vector<Outcome> out = run(requests);
  ASSERT_EQ(out.size(), 8u);
  for (size_t i = 0; i < out.size(); ++i) expect_valid(out[i], check, "sample " + std::to_string(i));
  EXPECT_NE(out[5].text, out[6].text) << "forked samples are different draws";
}

TEST(EngineConstraint, ConstrainedAndFreeSequencesShareBatchesUnchanged) {
  const auto g = grammar::testing::schema_grammar(ordered_json::parse(kSchema));
  const std::vector<std::string> prompts = {"Once upon a time", "Tom had a red ball", "One day", "Max was a happy cat"};
  std::vector<Request> mixed;
  for (size_t i = 0; i < prompts.size(); ++i) mixed.push_back(request(prompts[i], 60, i % 2 ? g : nullptr));
  const std::vector<Outcome> together = run(mixed);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const Outcome alone = run({mixed[i]})[0];
    EXPECT_EQ(together[i].tokens, alone.tokens) << prompts[i];
  }
  // The constraint changed what the constrained ones say.
  EXPECT_NE(together[1].tokens, run({request(prompts[1], 60, nullptr)})[0].tokens);
}

TEST(EngineConstraint, EndOfGenerationOnlyWhereTheGrammarMayEnd) {
  // After some letters the grammar wants the byte 0x01 a number of times and then allows the end: this model
  // gives its end-of-sequence token about the odds of 0x01 there, so sampled runs take the end within a few
  // steps of being allowed it, and never before.
  std::vector<Request> requests;
  for (int i = 0; i < 8; ++i) {
    Request r = request("Once upon a time", 60, grammar::testing::regex_grammar("[a-z ]{10}\\x01{8}\\x01*"));
    r.sampling.temperature = 1.0f;
    r.sampling.seed = 500 + uint64_t(i);
    r.sampling.has_seed = true;
    requests.push_back(r);
  }
  int ended = 0;
  for (const Outcome& o : run(requests)) {
    EXPECT_TRUE(std::regex_match(o.text, std::regex("[a-z ]{10}\\x01{8,}"))) << o.text;
    ended += o.reason == FinishReason::Stop;
  }
  EXPECT_GE(ended, 6) << "the end, once allowed, is taken";
  // With ignore_eos the end is where nothing may follow: 40 letters, then the request stops.
  Request forty = request("Once upon a time", 200, grammar::testing::regex_grammar("[a-z ]{30,40}"));
  forty.sampling.ignore_eos = true;
  const Outcome l = run({forty})[0];
  EXPECT_EQ(l.reason, FinishReason::Stop);
  EXPECT_EQ(l.text.size(), 40u) << l.text;
}

TEST(EngineConstraint, AGrammarThatCannotCompleteEndsWithLength) {
  const ordered_json schema = ordered_json::parse(R"({"type": "object", "properties": {
      "story": {"type": "string", "minLength": 200}}, "required": ["story"], "additionalProperties": false})");
  const auto g = grammar::testing::schema_grammar(schema);
  const Outcome o = run({request("Once upon a time", 20, g)})[0];
  EXPECT_EQ(o.reason, FinishReason::Length);
  EXPECT_EQ(o.tokens.size(), 20u);
  EXPECT_TRUE(o.text.starts_with("{")) << o.text;
  EXPECT_FALSE(ordered_json::accept(o.text)) << "an incomplete document: " << o.text;
  EXPECT_TRUE(grammar::testing::viable_prefix(g->automaton(), o.text)) << o.text;
}

TEST(EngineConstraint, GrammarMasksAreLearnedOnceAndShared) {
  // A second request with the same compiled grammar walks the same states: every mask comes from the cache.
  const auto g = grammar::testing::schema_grammar(ordered_json::parse(kSchema));
  Engine engine(model(), options());
  const std::string first = run_together(engine, {request("Once upon a time", 300, g)})[0].text;
  const std::shared_ptr<grammar::MaskCache> cache = g->masks(*engine.grammar_vocabulary());
  const grammar::MaskCacheStats before = cache->stats();
  EXPECT_GT(before.state_misses, 0u);
  EXPECT_EQ(run_together(engine, {request("Once upon a time", 300, g)})[0].text, first);
  const grammar::MaskCacheStats after = cache->stats();
  EXPECT_EQ(after.state_misses, before.state_misses);
  EXPECT_GT(after.state_hits, before.state_hits + 10);
}

}  // namespace
}  // namespace tessera
