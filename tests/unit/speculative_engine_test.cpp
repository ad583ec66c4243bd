// Speculative decoding inside the continuous-batching engine, on the embedded model: greedy output identical to
// plain decoding on every golden prompt for both proposers (draft: the model's own INT4 copy; prompt lookup),
// bit-identical logits in mixed batches (with and without speculation, different k, chunked prefill,
// preemption), stop strings and max_tokens on the exact token, no leaked blocks (the target's or the draft's)
// after a randomized run with cancellations, and the options' checks.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>

#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/engine.h"
#include "engine/offline_engine.h"
#include "engine_test_util.h"
#include "grammar_test_util.h"
#include "json_schema_check.h"
#include "model/model.h"
#include "quantizer/quantizer.h"
#include "test_paths.h"

namespace tessera {
namespace {

using namespace tessera::testing;

// The embedded model's INT4 copy (round-to-nearest, groups of 32): the common draft, a quantized target.
std::shared_ptr<const Model> int4_draft() {
  static std::shared_ptr<const Model> m = [] {
    const auto path = std::filesystem::temp_directory_path() / ("tessera_spec_int4_" + std::to_string(::getpid()) + ".gguf");
    quant::QuantizeOptions q;
    q.format = quant::WeightFormat::Int4;
    quant::quantize_model(*model(), path.string(), q);
    auto loaded = Model::load(path.string());
    std::filesystem::remove(path);
    return std::shared_ptr<const Model>(std::move(loaded));
  }();
  return m;
}

SpeculativeOptions ngram(int64_t k) {
  SpeculativeOptions s;
  s.method = SpecMethod::Ngram;
  s.spec_tokens = k;
  s.switch_policy = SpecSwitch::Always;  // every eligible step verifies: what the tests exercise
  return s;
}

SpeculativeOptions draft(int64_t k) {
  SpeculativeOptions s = ngram(k);
  s.method = SpecMethod::Draft;
  s.draft_model = int4_draft();
  return s;
}

TEST(Speculative, GreedyGoldenPromptsAreIdenticalWithBothProposers) {
  std::ifstream in(shared_path("fixtures/stories260K_greedy.json"));
  const auto cases = nlohmann::json::parse(in);
  ASSERT_EQ(cases.size(), 8u);
  ThreadPool pool(2);
  for (const SpeculativeOptions& spec : {ngram(4), draft(4), ngram(1), draft(8)}) {
    OfflineEngine engine(model(), pool, 0, 512, KvType::F32, spec);
    for (const auto& c : cases) {
      SamplingParams p;
      p.temperature = 0.0f;
      p.max_tokens = 64;
      const auto result = engine.generate(c["prompt_ids"].get<std::vector<int32_t>>(), p);
      EXPECT_EQ(result.tokens, c["generated_ids"].get<std::vector<int32_t>>())
          << spec_method_name(spec.method) << " k=" << spec.spec_tokens << ": " << c["prompt"];
      EXPECT_EQ(result.text, c["text"].get<std::string>()) << c["prompt"];
    }
    // The engine publishes its stats after the step that finished the last request: wait for that one.
    for (int i = 0; i < 200 && engine.stats().spec_kv_blocks_used != 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const EngineStats s = engine.stats();
    EXPECT_GT(s.n_spec_drafts, 0u) << spec_method_name(spec.method) << ": speculation never ran";
    EXPECT_GT(s.n_spec_accepted_tokens, 0u) << spec_method_name(spec.method) << ": nothing was ever accepted";
    EXPECT_EQ(s.spec_kv_blocks_used, 0) << "the draft's blocks outlived their sequences";
  }
}

// Constrained requests speculate: each guessed position is verified against the grammar's mask after the
// guesses before it. Greedy output equals constrained decoding without speculation (tokens and bit-identical
// logits rows), also when max_tokens or a stop string cuts it inside a verified run; the guesses ran and were
// accepted, and sampled outputs with speculation still match the schema.
TEST(Speculative, ConstrainedRequestsSpeculateAgainstTheirMask) {
  const nlohmann::ordered_json schema = nlohmann::ordered_json::parse(R"({
    "type": "object",
    "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 12},
                   "mood": {"enum": ["happy", "sad", "sleepy"]},
                   "friends": {"type": "array", "maxItems": 3, "items": {"type": "string", "maxLength": 8}}},
    "required": ["name", "mood", "friends"], "additionalProperties": false})");
  const tessera::testing::SchemaCheck check(schema);
  auto constraint = std::make_shared<grammar::Constraint>();
  constraint->grammar = grammar::testing::schema_grammar(schema);
  for (const SpeculativeOptions& spec : {ngram(4), draft(4)}) {
    const std::string where = spec_method_name(spec.method);
    EngineOptions with = small_options();
    with.speculative = spec;
    uint64_t drafts = 0, accepted = 0;
    for (const char* prompt : {"Once upon a time", "Tom had a red ball", "One day"}) {
      Request r = greedy_request(prompt, 200);
      r.constraint = constraint;
      const Outcome plain = run_alone(r);
      Engine engine(model(), with);
      Collector c;
      engine.submit(r, c.callback());
      const Outcome speculated = c.wait();
      expect_no_leaks(engine);
      expect_same_outcome(speculated, plain, where + ": " + prompt);
      EXPECT_EQ(speculated.reason, FinishReason::Stop) << where << ": " << speculated.text;
      EXPECT_EQ(check.check(nlohmann::ordered_json::parse(speculated.text)), "") << speculated.text;
      drafts += engine.stats().n_spec_drafts;
      accepted += engine.stats().n_spec_accepted_tokens;
      // max_tokens and a stop string ending the output inside a verified run: the same cut as without.
      Request cut = r;
      cut.sampling.max_tokens = 7;
      const Outcome plain_cut = run_alone(cut);
      EXPECT_EQ(plain_cut.reason, FinishReason::Length);
      expect_same_outcome(run_alone(cut, with), plain_cut, where + ", max_tokens 7: " + prompt);
      cut.sampling.max_tokens = 200;
      cut.sampling.stop = {plain.text.substr(9, 3)};
      const Outcome plain_stop = run_alone(cut);
      EXPECT_EQ(plain_stop.reason, FinishReason::Stop);
      expect_same_outcome(run_alone(cut, with), plain_stop, where + ", stop: " + prompt);
    }
    EXPECT_GT(drafts, 0u) << where << ": constrained requests never speculated";
    EXPECT_GT(accepted, 0u) << where << ": no guess was ever accepted";
    Engine engine(model(), with);
    std::vector<std::unique_ptr<Collector>> collectors;
    for (uint64_t seed = 1; seed <= 6; ++seed) {
      Request r = greedy_request(seed % 2 ? "Lily and Ben" : "Once upon a time", 200);
      r.capture_logits = false;
      r.constraint = constraint;
      r.sampling.temperature = 0.8f;
      r.sampling.top_p = 0.95f;
      r.sampling.seed = seed;
      r.sampling.has_seed = true;
      collectors.push_back(std::make_unique<Collector>());
      engine.submit(r, collectors.back()->callback());
    }
    for (auto& c : collectors) {
      const Outcome o = c->wait();
      ASSERT_EQ(o.reason, FinishReason::Stop) << where << ": " << o.text;
      nlohmann::ordered_json doc;
      ASSERT_NO_THROW(doc = nlohmann::ordered_json::parse(o.text)) << where << ": " << o.text;
      EXPECT_EQ(check.check(doc), "") << where << ": " << o.text;
    }
    expect_no_leaks(engine);
  }
}

TEST(Speculative, GreedyTinyRandomGoldenIsIdentical) {
  // The llama.cpp reference's greedy ids on a model with a 32000-token vocabulary; prompt lookup only (the
  // model has no INT4 copy here).
  auto m = Model::load(shared_path("models/llama-2-tiny-random.gguf"));
  std::ifstream in(shared_path("fixtures/llama2_tiny_random_logits.json"));
  const auto ref = nlohmann::json::parse(in);
  ThreadPool pool(2);
  OfflineEngine engine(std::move(m), pool, 0, 512, KvType::F32, ngram(4));
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = 16;
  EXPECT_EQ(engine.generate(ref["prompt_ids"].get<std::vector<int32_t>>(), p).tokens,
            ref["greedy_ids"].get<std::vector<int32_t>>());
}

// Mixed batches: bit-identical tokens and logits to each prompt decoded alone without speculation, with
// speculating and non-speculating requests together, under several k, chunk sizes and a pool small enough
// to preempt.
TEST(Speculative, MixedBatchesAreBitIdenticalToPlainDecoding) {
  std::vector<Outcome> solo;
  for (const auto& p : kPrompts) solo.push_back(run_alone(greedy_request(p, 40)));
  std::mt19937 rng(11);
  for (int trial = 0; trial < 6; ++trial) {
    EngineOptions o = small_options();
    const int64_t k = std::array<int64_t, 6>{1, 2, 4, 8, 3, 16}[size_t(trial)];
    o.speculative = trial % 2 ? draft(k) : ngram(k);
    o.scheduling.max_batched_tokens = std::uniform_int_distribution<int64_t>(12, 80)(rng);
    o.scheduling.max_seqs = trial % 3 == 0 ? 8 : 5;
    o.kv_block_size = trial % 2 ? 16 : 4;
    o.kv_blocks = trial % 3 == 0 ? (o.kv_block_size == 16 ? 12 : 48) : 256;  // every third: preemption
    Engine engine(model(), o);
    std::vector<size_t> order(kPrompts.size() * 2);
    for (size_t i = 0; i < order.size(); ++i) order[i] = i % kPrompts.size();
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<std::unique_ptr<Collector>> collectors;
    for (size_t j = 0; j < order.size(); ++j) {
      Request r = greedy_request(kPrompts[order[j]], 40);
      r.speculative = j % 3 != 2;  // a third of the requests opt out
      collectors.push_back(std::make_unique<Collector>());
      engine.submit(r, collectors.back()->callback());
    }
    for (size_t j = 0; j < order.size(); ++j) {
      expect_same_outcome(collectors[j]->wait(), solo[order[j]],
                          "trial " + std::to_string(trial) + " request " + std::to_string(j));
    }
    const EngineStats s = engine.stats();
    EXPECT_GT(s.n_spec_drafts, 0u) << "trial " << trial;
    if (trial % 3 == 0) {
      EXPECT_GT(s.n_preemptions, 0u) << "trial " << trial;
    }
    expect_no_leaks(engine);
    EXPECT_EQ(engine.stats().spec_kv_blocks_used, 0) << "trial " << trial;
  }
}

// Preemption gives back the draft's blocks with the target's. After every step the draft may hold, for each
// running sequence, at most one block more than the target holds for it (its k - 1 guessed positions, k <= the
// block size + 1, past the target's tokens); a preempted sequence's draft blocks held while it waits break that.
// Outputs stay bit-identical to plain decoding and nothing is left held at the end.
TEST(Speculative, PreemptionReleasesTheDraftsBlocks) {
  std::vector<Outcome> solo;
  for (const auto& p : kPrompts) solo.push_back(run_alone(greedy_request(p, 48)));
  EngineOptions o = small_options();
  o.speculative = draft(4);
  o.kv_block_size = 4;
  o.kv_blocks = 40;  // about two of these sequences at full length: the rest wait, preempted
  o.prefix_caching = false;  // each block the target holds is one sequence's, as each of the draft's is
  o.scheduling.max_seqs = 6;
  // Declared before the engine, which calls the observer until it is destroyed.
  std::mutex mutex;
  int64_t max_draft_blocks = 0, n_over = 0, n_steps = 0;
  std::string first_over;
  Engine engine(model(), o);
  engine.set_step_observer([&](const StepStats&) {
    // On the engine thread, after the step's stats were published.
    const EngineStats s = engine.stats();
    std::lock_guard lock(mutex);
    ++n_steps;
    max_draft_blocks = std::max(max_draft_blocks, s.spec_kv_blocks_used);
    if (s.spec_kv_blocks_used > s.kv_blocks_used + s.n_running && n_over++ == 0) {
      first_over = "step " + std::to_string(s.n_steps) + ": draft " + std::to_string(s.spec_kv_blocks_used) +
                   " blocks, target " + std::to_string(s.kv_blocks_used) + " for " + std::to_string(s.n_running) +
                   " running, " + std::to_string(s.n_waiting) + " waiting";
    }
  });
  std::vector<std::unique_ptr<Collector>> collectors;
  for (const auto& p : kPrompts) {
    collectors.push_back(std::make_unique<Collector>());
    engine.submit(greedy_request(p, 48), collectors.back()->callback());
  }
  for (size_t j = 0; j < kPrompts.size(); ++j) expect_same_outcome(collectors[j]->wait(), solo[j], kPrompts[j]);
  expect_no_leaks(engine);
  for (int i = 0; i < 200 && engine.stats().spec_kv_blocks_used != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const EngineStats s = engine.stats();
  EXPECT_GT(s.n_preemptions, 0u) << "the pool was meant to preempt";
  EXPECT_GT(s.n_spec_accepted_tokens, 0u);
  EXPECT_EQ(s.spec_kv_blocks_used, 0);
  std::lock_guard lock(mutex);
  EXPECT_GT(n_steps, 0);
  EXPECT_LE(max_draft_blocks, o.kv_blocks);
  EXPECT_EQ(n_over, 0) << "the draft kept blocks for sequences that were not running, first at " << first_over;
}

// A cancel, or a deadline that passed, ends a speculating request at the next step: right after a step that
// verified a draft (the step observer, on the engine thread, once that step's tokens went out), the request is
// cancelled or its deadline is made to pass; not one token more arrives, and neither cache holds a block after.
TEST(Speculative, CancelAndDeadlineStopASpeculatingRequestWithinOneStep) {
  for (const bool by_deadline : {false, true}) {
    for (const SpeculativeOptions& spec : {ngram(4), draft(4)}) {
      if (by_deadline && spec.method == SpecMethod::Ngram) continue;  // one proposer is enough: it waits
      const std::string where = std::string(by_deadline ? "deadline, " : "cancel, ") + spec_method_name(spec.method);
      EngineOptions o = small_options();
      o.speculative = spec;
      Collector c;
      std::atomic<uint64_t> id{0};
      std::atomic<int64_t> tokens_at_stop{-1};
      Request r = greedy_request(kPrompts[5] + " " + kPrompts[5], 400);  // repeats itself: lookup guesses too
      r.sampling.ignore_eos = true;
      const auto deadline = Clock::now() + std::chrono::seconds(2);
      if (by_deadline) r.deadline = deadline;
      Engine engine(model(), o);
      engine.set_step_observer([&](const StepStats& st) {
        if (st.n_draft_tokens == 0 || tokens_at_stop >= 0 || id == 0) return;
        tokens_at_stop = int64_t(c.n_tokens());
        if (by_deadline) {
          std::this_thread::sleep_until(deadline + std::chrono::milliseconds(1));
        } else {
          engine.cancel(id);
        }
      });
      id = engine.submit(r, c.callback());
      const Outcome out = c.wait();
      ASSERT_GE(tokens_at_stop, 1) << where << ": no step verified a draft before the request ended";
      EXPECT_EQ(out.reason, by_deadline ? FinishReason::Timeout : FinishReason::Cancelled) << where;
      EXPECT_EQ(int64_t(out.tokens.size()), tokens_at_stop.load()) << where << ": tokens after the stop";
      expect_no_leaks(engine);
      for (int i = 0; i < 200 && engine.stats().spec_kv_blocks_used != 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      EXPECT_EQ(engine.stats().spec_kv_blocks_used, 0) << where;
    }
  }
}

// Stop strings and max_tokens end a speculating request on the same token as a plain one, though a
// verification step may emit several tokens at once.
TEST(Speculative, StopStringsAndMaxTokensLandOnTheExactToken) {
  const Outcome plain = run_alone(greedy_request("Once upon a time", 60));
  ASSERT_GT(plain.text.size(), 40u);
  const std::string stop = plain.text.substr(30, 4);
  for (const SpeculativeOptions& spec : {ngram(8), draft(8)}) {
    EngineOptions o = small_options();
    o.speculative = spec;
    for (int max_tokens : {1, 2, 5, 9, 33}) {
      const Outcome want = run_alone(greedy_request("Once upon a time", max_tokens));
      const Outcome got = run_alone(greedy_request("Once upon a time", max_tokens), o);
      EXPECT_EQ(got.tokens, want.tokens) << "max_tokens " << max_tokens;
      EXPECT_EQ(got.stats.n_generated_tokens, max_tokens);
      EXPECT_EQ(got.reason, FinishReason::Length);
    }
    Request r = greedy_request("Once upon a time", 60);
    r.sampling.stop = {stop};
    Request plain_r = r;
    const Outcome want = run_alone(plain_r);
    const Outcome got = run_alone(r, o);
    EXPECT_EQ(want.reason, FinishReason::Stop);
    EXPECT_EQ(got.reason, FinishReason::Stop);
    EXPECT_EQ(got.text, want.text);
    EXPECT_EQ(got.tokens, want.tokens);
  }
}

// Logit bias, stop token ids and min_tokens act on every verified position as on a plain step: the tokens are
// the same, though a verification step emits several at once.
TEST(Speculative, TokenControlsGiveThePlainTokens) {
  const Outcome free_run = run_alone(greedy_request("Once upon a time", 40));
  ASSERT_EQ(free_run.tokens.size(), 40u);
  std::vector<Request> requests;
  Request bias = greedy_request("Once upon a time", 40);
  bias.sampling.logit_bias = {{free_run.tokens[5], -100.0f}, {free_run.tokens[20], 3.0f}};
  requests.push_back(bias);
  Request stop_id = greedy_request("Once upon a time", 40);
  stop_id.sampling.stop_token_ids = {free_run.tokens[17]};
  requests.push_back(stop_id);
  Request held = stop_id;
  held.sampling.min_tokens = 25;
  held.sampling.stop = {free_run.text.substr(10, 3)};
  requests.push_back(held);
  for (const SpeculativeOptions& spec : {ngram(8), draft(8)}) {
    EngineOptions o = small_options();
    o.speculative = spec;
    for (size_t i = 0; i < requests.size(); ++i) {
      const Outcome want = run_alone(requests[i]);
      const Outcome got = run_alone(requests[i], o);
      EXPECT_EQ(got.tokens, want.tokens) << "request " << i;
      EXPECT_EQ(got.text, want.text) << "request " << i;
      EXPECT_EQ(got.reason, want.reason) << "request " << i;
    }
  }
}

// Randomized: greedy and sampled requests, stop strings, short and long outputs, cancellations at random
// moments, n > 1; afterwards neither the target's pool nor the draft's holds a block.
TEST(Speculative, NoBlockLeaksAfterARandomizedMixedRun) {
  for (const SpeculativeOptions& spec : {ngram(4), draft(3)}) {
    EngineOptions o = small_options();
    o.speculative = spec;
    o.kv_blocks = 40;  // tight: preemption and draft drops happen
    o.kv_block_size = 4;
    o.scheduling.max_batched_tokens = 48;
    Engine engine(model(), o);
    std::mt19937 rng(5);
    std::vector<uint64_t> ids;
    for (int i = 0; i < 24; ++i) {
      Request r = greedy_request(kPrompts[size_t(i) % kPrompts.size()], std::uniform_int_distribution<int>(1, 50)(rng));
      r.capture_logits = false;
      if (i % 2) {
        r.sampling.temperature = 0.8f;
        r.sampling.top_p = 0.9f;
        r.sampling.seed = uint64_t(i);
        r.sampling.has_seed = true;
      }
      if (i % 5 == 0) r.sampling.stop = {"the"};
      if (i % 7 == 0) r.n = 2;
      r.speculative = i % 4 != 3;
      ids.push_back(engine.submit(r, [](const StreamEvent&) {}));  // the leak check waits for all of them
      if (i % 6 == 5) engine.cancel(ids[size_t(std::uniform_int_distribution<int>(0, i)(rng))]);
    }
    expect_no_leaks(engine);
    EXPECT_EQ(engine.stats().spec_kv_blocks_used, 0) << spec_method_name(spec.method);
    EXPECT_GT(engine.stats().n_spec_drafts, 0u) << spec_method_name(spec.method);
  }
}

TEST(Speculative, BadOptionsAreRefusedWithTheirReason) {
  auto refused = [](const SpeculativeOptions& s) {
    EngineOptions o = small_options();
    o.speculative = s;
    try {
      Engine engine(model(), o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(refused(ngram(0)).find("spec tokens must be in 1..16"), std::string::npos);
  EXPECT_NE(refused(ngram(kMaxSpecTokens + 1)).find("spec tokens must be in 1..16"), std::string::npos);
  SpeculativeOptions missing = draft(4);
  missing.draft_model = nullptr;
  EXPECT_NE(refused(missing).find("needs the draft model"), std::string::npos);
  SpeculativeOptions other = draft(4);
  other.draft_model = Model::load(shared_path("models/llama-2-tiny-random.gguf"));
  const std::string why = refused(other);
  EXPECT_NE(why.find("vocabularies differ (512 tokens vs 32000)"), std::string::npos) << why;
}

}  // namespace
}  // namespace tessera
