// The continuous-batching engine on the embedded model: batch invariance under random mixtures, chunk sizes
// and forced preemption; a full pool never wedges; prefix caching; cancellation, deadlines, priorities,
// the static and window policies; and no leaked blocks after any test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <numeric>
#include <random>

#include "core/error.h"
#include "engine/engine.h"
#include "model/model.h"
#include "quantizer/quantizer.h"
#include "engine_test_util.h"

namespace tessera {
namespace {

using namespace tessera::testing;

TEST(Engine, GreedyMatchesLengthAndStopsAtMaxTokens) {
  const Outcome o = run_alone(greedy_request("Once upon a time", 20));
  EXPECT_EQ(o.tokens.size(), 20u);
  EXPECT_EQ(o.reason, FinishReason::Length);
  EXPECT_EQ(o.stats.n_generated_tokens, 20);
  EXPECT_EQ(o.text, model()->tokenizer().decode(o.tokens).substr(0, o.text.size()));
}

TEST(Engine, BatchInvarianceUnderRandomMixturesChunksAndPreemption) {
  // Reference: each prompt alone.
  std::vector<Outcome> solo;
  for (const auto& p : kPrompts) solo.push_back(run_alone(greedy_request(p, 48)));

  std::mt19937 rng(7);
  for (int trial = 0; trial < 6; ++trial) {
    EngineOptions o = small_options();
    o.scheduling.max_batched_tokens = std::uniform_int_distribution<int64_t>(1, 80)(rng);
    o.scheduling.max_seqs = trial % 3 == 0 ? 8 : std::uniform_int_distribution<int64_t>(1, 8)(rng);
    o.kv_block_size = trial % 2 ? 16 : 4;
    // Every third trial: a pool too small for all sequences at once, so preemption must happen.
    o.kv_blocks = trial % 3 == 0 ? (o.kv_block_size == 16 ? 10 : 40) : 256;
    o.prefix_caching = trial % 2 == 0;
    Engine engine(model(), o);
    std::vector<size_t> order(kPrompts.size() * 2);
    for (size_t i = 0; i < order.size(); ++i) order[i] = i % kPrompts.size();
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<std::unique_ptr<Collector>> collectors;
    for (size_t i : order) {
      collectors.push_back(std::make_unique<Collector>());
      engine.submit(greedy_request(kPrompts[i], 48), collectors.back()->callback());
    }
    for (size_t k = 0; k < order.size(); ++k) {
      expect_same_outcome(collectors[k]->wait(), solo[order[k]],
                          "trial " + std::to_string(trial) + " prompt " + std::to_string(order[k]));
    }
    if (trial % 3 == 0) {
      EXPECT_GT(engine.stats().n_preemptions, 0u) << "trial " << trial;
    }
    expect_no_leaks(engine);
  }
}

// INT8 weights with LLM.int8()-style outliers: each token picks its own outlier columns, so a sequence's logits
// stay bit-identical alone or batched with others (a threshold of 1 makes most tokens have some).
TEST(Engine, AnInvalidInt8ThresholdFailsTheLoad) {
  LoadOptions bad;
  bad.int8_threshold = -2.0f;
  EXPECT_THROW(Model::load_embedded(bad), Error);
}

TEST(Engine, Int8OutliersKeepBatchInvariance) {
  const auto path = std::filesystem::temp_directory_path() / ("tessera_engine_i8_" + std::to_string(::getpid()) + ".gguf");
  quant::QuantizeOptions q;
  q.format = quant::WeightFormat::Int8;
  quant::quantize_model(*model(), path.string(), q);
  LoadOptions load;
  load.int8_threshold = 1.0f;
  const std::shared_ptr<const Model> i8 = Model::load(path.string(), load);
  std::filesystem::remove(path);
  auto request = [&](const std::string& prompt) {
    Request r = greedy_request(prompt, 24);
    r.prompt = i8->tokenizer().encode(prompt, true);
    return r;
  };
  std::vector<Outcome> solo;
  for (const auto& p : kPrompts) {
    Engine engine(i8, small_options());
    Collector c;
    engine.submit(request(p), c.callback());
    solo.push_back(c.wait());
    expect_no_leaks(engine);
  }
  EngineOptions o = small_options();
  o.scheduling.max_batched_tokens = 37;  // chunked prefill mixed with decode steps
  Engine engine(i8, o);
  std::vector<std::unique_ptr<Collector>> collectors;
  for (const auto& p : kPrompts) {
    collectors.push_back(std::make_unique<Collector>());
    engine.submit(request(p), collectors.back()->callback());
  }
  for (size_t k = 0; k < kPrompts.size(); ++k) expect_same_outcome(collectors[k]->wait(), solo[k], "prompt " + std::to_string(k));
  expect_no_leaks(engine);
}

TEST(Engine, FullPoolUnderAStreamOfRequestsNeverWedges) {
  EngineOptions o = small_options();
  o.kv_blocks = 12;  // 192 positions for up to 16 sequences that each want up to ~150
  o.scheduling.max_seqs = 16;
  Engine engine(model(), o);
  std::vector<std::unique_ptr<Collector>> collectors;
  for (int i = 0; i < 40; ++i) {
    collectors.push_back(std::make_unique<Collector>());
    Request r = greedy_request(kPrompts[size_t(i) % kPrompts.size()], 60 + i * 2);
    r.sampling.ignore_eos = true;
    engine.submit(r, collectors.back()->callback());
  }
  for (int i = 0; i < 40; ++i) {
    const Outcome out = collectors[size_t(i)]->wait();
    EXPECT_EQ(out.reason, FinishReason::Length);
    EXPECT_EQ(int(out.tokens.size()), 60 + i * 2);
  }
  EXPECT_GT(engine.stats().n_preemptions, 0u);
  expect_no_leaks(engine);
}

TEST(Engine, PrefixCacheComputesOnlyTheNewTokens) {
  EngineOptions o = small_options();
  o.kv_block_size = 16;
  Engine engine(model(), o);
  std::string prefix;
  for (int i = 0; i < 12; ++i) prefix += "Lily and Ben went to the park to play. ";
  Request first = greedy_request(prefix + "Then", 8);
  const auto n_first = int64_t(first.prompt.size());
  Collector a;
  engine.submit(first, a.callback());
  a.wait();
  ASSERT_TRUE(engine.wait_idle(std::chrono::seconds(10)));
  const uint64_t computed_before = engine.stats().n_computed_tokens;

  Request second = greedy_request(prefix + "Then the dog", 8);
  const auto n_second = int64_t(second.prompt.size());
  Collector b;
  engine.submit(second, b.callback());
  const Outcome out = b.wait();
  ASSERT_TRUE(engine.wait_idle(std::chrono::seconds(10)));
  const uint64_t computed = engine.stats().n_computed_tokens - computed_before;

  // The shared full blocks come from the cache; only the rest of the prompt and the decode steps run.
  const int64_t shared_blocks = (n_first - 1) / 16;
  EXPECT_GE(out.stats.n_cached_prompt_tokens, (shared_blocks - 1) * 16);
  EXPECT_GT(out.stats.n_cached_prompt_tokens, 0);
  EXPECT_EQ(int64_t(computed), n_second - out.stats.n_cached_prompt_tokens + int64_t(out.tokens.size()) - 1);
  // And the output is what a cold run produces.
  EXPECT_EQ(out.tokens, run_alone(greedy_request(prefix + "Then the dog", 8)).tokens);
  expect_no_leaks(engine);
}

// Requests in different cache namespaces (tenants) share no prefix blocks; the same namespace does.
TEST(Engine, PrefixCacheNamespacesShareNothing) {
  EngineOptions o = small_options();
  o.kv_block_size = 16;
  Engine engine(model(), o);
  std::string prefix;
  for (int i = 0; i < 8; ++i) prefix += "Lily and Ben went to the park to play. ";
  auto run = [&](uint64_t ns, const std::string& tail) {
    Request r = greedy_request(prefix + tail, 4);
    r.cache_namespace = ns;
    Collector c;
    engine.submit(r, c.callback());
    const Outcome out = c.wait();
    EXPECT_TRUE(engine.wait_idle(std::chrono::seconds(10)));
    return out;
  };
  const Outcome first = run(7, "Then");
  EXPECT_EQ(first.stats.n_cached_prompt_tokens, 0);
  const Outcome other_tenant = run(8, "Then the dog");
  EXPECT_EQ(other_tenant.stats.n_cached_prompt_tokens, 0);
  EXPECT_EQ(run(0, "Then a cat").stats.n_cached_prompt_tokens, 0);
  const Outcome same_tenant = run(7, "Then the cat");
  EXPECT_GT(same_tenant.stats.n_cached_prompt_tokens, 0);
  EXPECT_EQ(other_tenant.tokens, run_alone(greedy_request(prefix + "Then the dog", 4)).tokens);
  expect_no_leaks(engine);
}

TEST(Engine, RequestThatCanNeverFitIsRejected) {
  EngineOptions o = small_options();
  o.kv_blocks = 4;
  o.kv_block_size = 16;
  Engine engine(model(), o);
  Request r = greedy_request("Once upon a time", 100);  // needs 7 blocks
  EXPECT_THROW(engine.submit(r, [](const StreamEvent&) {}), Error);
  Request empty;
  EXPECT_THROW(engine.submit(empty, [](const StreamEvent&) {}), Error);
  Request bad = greedy_request("Once", 4);
  bad.prompt.push_back(100000);
  EXPECT_THROW(engine.submit(bad, [](const StreamEvent&) {}), Error);
  Request too_long = greedy_request("Once", 4);
  too_long.prompt.assign(600, 300);  // context is 512
  EXPECT_THROW(engine.submit(too_long, [](const StreamEvent&) {}), Error);
}

TEST(Engine, CancelEndsTheRequestAndFreesItsBlocks) {
  Engine engine(model(), small_options());
  Collector c;
  Request r = greedy_request("Once upon a time", 400);
  r.sampling.ignore_eos = true;
  const uint64_t id = engine.submit(r, c.callback());
  for (int i = 0; i < 2000 && c.n_tokens() < 5; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  engine.cancel(id);
  const Outcome out = c.wait();
  EXPECT_EQ(out.reason, FinishReason::Cancelled);
  EXPECT_LT(out.tokens.size(), 400u);
  expect_no_leaks(engine);
}

// A cancel made right after its submit always wins, whatever the step loop is doing in between: submits and
// cancels are one ordered queue (a separate cancel set, swapped after the submits were admitted, dropped a cancel
// whose submit landed between the two).
TEST(Engine, ACancelRightAfterItsSubmitIsNeverLost) {
  Engine engine(model(), small_options());
  Collector busy;  // keeps the loop stepping throughout
  Request long_running = greedy_request("Once upon a time", 480);
  long_running.sampling.ignore_eos = true;
  const uint64_t busy_id = engine.submit(long_running, busy.callback());
  std::vector<std::unique_ptr<Collector>> collectors;
  for (int i = 0; i < 300; ++i) {
    collectors.push_back(std::make_unique<Collector>());
    Request r = greedy_request(i % 2 ? "Tom had a red ball" : "One day", 400);
    r.sampling.ignore_eos = true;
    engine.cancel(engine.submit(r, collectors.back()->callback()));
  }
  for (auto& c : collectors) {
    const Outcome out = c->wait();
    EXPECT_EQ(out.reason, FinishReason::Cancelled);
    EXPECT_LT(out.tokens.size(), 400u);
  }
  engine.cancel(busy_id);
  busy.wait();
  expect_no_leaks(engine);
}

// A request whose callback throws ends with FinishReason::Error; the engine, and every other request, go on.
TEST(Engine, ACallbackThatThrowsEndsOnlyItsRequest) {
  Engine engine(model(), small_options());
  std::promise<StreamEvent> finished;
  auto throwing = [&finished, n = 0](const StreamEvent& ev) mutable {
    if (ev.kind == StreamEvent::Kind::Finished) {
      finished.set_value(ev);
      throw std::runtime_error("the last event throws too");  // reported and dropped
    }
    if (++n == 3) throw std::runtime_error("handler bug");
  };
  Collector good;
  engine.submit(greedy_request("Once upon a time", 40), throwing);
  engine.submit(greedy_request("Once upon a time", 40), good.callback());
  const StreamEvent ev = finished.get_future().get();
  EXPECT_EQ(ev.finish_reason, FinishReason::Error);
  EXPECT_EQ(ev.error, "handler bug");
  const Outcome out = good.wait();
  EXPECT_EQ(out.reason, FinishReason::Length);
  EXPECT_EQ(out.tokens, run_alone(greedy_request("Once upon a time", 40)).tokens);
  expect_no_leaks(engine);
}

// With report_start, a request announces once that it left the queue, before its first token; a request still
// queued has not.
TEST(Engine, ReportStartAnnouncesTheFirstStep) {
  EngineOptions o = small_options();
  o.scheduling.max_seqs = 1;
  Engine engine(model(), o);
  std::mutex mu;
  std::vector<std::pair<int, StreamEvent::Kind>> events;  // (request, kind)
  std::promise<void> second_done;
  auto record = [&](int which) {
    return [&, which](const StreamEvent& ev) {
      std::lock_guard lock(mu);
      if (ev.kind != StreamEvent::Kind::Token || events.empty() || events.back() != std::pair{which, ev.kind})
        events.emplace_back(which, ev.kind);
      if (which == 2 && ev.kind == StreamEvent::Kind::Finished) second_done.set_value();
    };
  };
  Request first = greedy_request("Once upon a time", 40), second = greedy_request("One day", 5);
  first.report_start = second.report_start = true;
  first.sampling.ignore_eos = true;
  engine.submit(first, record(1));
  engine.submit(second, record(2));  // waits: one sequence at a time
  second_done.get_future().wait();
  std::lock_guard lock(mu);
  using K = StreamEvent::Kind;
  const std::vector<std::pair<int, K>> expected = {{1, K::Started}, {1, K::Token},   {1, K::Finished},
                                                   {2, K::Started}, {2, K::Token},   {2, K::Finished}};
  EXPECT_EQ(events, expected);
}

// stop(): what runs ends Cancelled, and a later submit is refused as EngineUnavailable (a 503 for the server,
// not the request's fault).
TEST(Engine, StopEndsWhatRunsAndRefusesNewRequests) {
  Engine engine(model(), small_options());
  Collector c;
  Request r = greedy_request("Once upon a time", 480);
  r.sampling.ignore_eos = true;
  engine.submit(r, c.callback());
  engine.stop();
  const Outcome out = c.wait();
  EXPECT_EQ(out.reason, FinishReason::Cancelled);
  EXPECT_THROW(engine.submit(greedy_request("Once", 4), [](const StreamEvent&) {}), EngineUnavailable);
  engine.stop();  // idempotent
}

TEST(Engine, DeadlineEndsWithTimeout) {
  Engine engine(model(), small_options());
  Collector c;
  Request r = greedy_request("Once upon a time", 400);
  r.sampling.ignore_eos = true;
  // 400 tokens of the embedded model take ~30 ms at ~15k tokens/s on an idle core; 2 ms is far inside that, and a
  // loaded machine only makes the deadline come sooner in the generation.
  r.deadline = Clock::now() + std::chrono::milliseconds(2);
  engine.submit(r, c.callback());
  const Outcome out = c.wait();
  EXPECT_EQ(out.reason, FinishReason::Timeout);
  EXPECT_LT(out.tokens.size(), 400u);
  expect_no_leaks(engine);
}

TEST(Engine, HigherPriorityPreemptsWhenTheSequenceLimitIsFull) {
  EngineOptions o = small_options();
  o.scheduling.max_seqs = 1;
  Engine engine(model(), o);
  Collector low, high;
  Request slow = greedy_request("Once upon a time", 300);
  slow.sampling.ignore_eos = true;
  slow.priority = 5;
  engine.submit(slow, low.callback());
  for (int i = 0; i < 2000 && low.n_tokens() < 3; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  Request urgent = greedy_request("Tom had a red ball", 10);
  urgent.priority = 0;
  engine.submit(urgent, high.callback());
  const Outcome h = high.wait();
  EXPECT_LT(low.n_tokens(), 300u) << "the low-priority request should still be running when the urgent one ends";
  const Outcome l = low.wait();
  EXPECT_EQ(h.reason, FinishReason::Length);
  EXPECT_GE(l.stats.n_preemptions, 1);
  // Preemption and recomputation do not change the result.
  Request slow_alone = slow;
  EXPECT_EQ(l.tokens, run_alone(slow_alone).tokens);
  expect_no_leaks(engine);
}

TEST(Engine, StaticAndWindowPoliciesGiveTheSameGreedyResults) {
  for (SchedulingPolicy mode : {SchedulingPolicy::Static, SchedulingPolicy::Window}) {
    EngineOptions o = small_options();
    o.scheduling.policy = mode;
    o.scheduling.max_seqs = 3;
    o.scheduling.batch_size = 3;
    o.scheduling.max_wait_ms = 20;
    Engine engine(model(), o);
    std::vector<std::unique_ptr<Collector>> collectors;
    for (const auto& p : kPrompts) {
      collectors.push_back(std::make_unique<Collector>());
      engine.submit(greedy_request(p, 24), collectors.back()->callback());
    }
    for (size_t i = 0; i < kPrompts.size(); ++i) {
      EXPECT_EQ(collectors[i]->wait().tokens, run_alone(greedy_request(kPrompts[i], 24)).tokens)
          << scheduling_policy_name(mode) << " prompt " << i;
    }
    expect_no_leaks(engine);
  }
}

// submit_all hands the engine one arrival: a static batch forms from all of them, whatever the step thread was
// doing; and a batch with a request that can never run is refused whole.
TEST(Engine, SubmitAllIsOneArrival) {
  EngineOptions o = small_options();
  o.scheduling.policy = SchedulingPolicy::Static;
  o.scheduling.max_seqs = 4;
  for (int round = 0; round < 20; ++round) {
    // Declared before the engine, so destroyed after it: the observer of the last step may still be running
    // until the engine's thread is joined (the sanitizer build caught a write into a freed vector).
    std::mutex mutex;
    std::vector<int64_t> seqs_per_step;
    Engine engine(model(), o);
    engine.set_step_observer([&](const StepStats& st) {
      std::lock_guard lock(mutex);
      seqs_per_step.push_back(st.n_seqs);
    });
    std::vector<std::unique_ptr<Collector>> collectors;
    std::vector<std::pair<Request, EventCallback>> batch;
    for (int i = 0; i < 4; ++i) {
      collectors.push_back(std::make_unique<Collector>());
      batch.emplace_back(greedy_request(kPrompts[size_t(i)], 3 + i), collectors.back()->callback());
    }
    const std::vector<uint64_t> ids = engine.submit_all(std::move(batch));
    ASSERT_EQ(ids.size(), 4u);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(int(collectors[size_t(i)]->wait().tokens.size()), 3 + i);
    ASSERT_TRUE(engine.wait_idle(std::chrono::milliseconds(1000)));
    // One static batch: a step per token of its longest member (6; the first comes with the prefill). The
    // observer of the last step may still be running; the first step's ran before the second began.
    EXPECT_EQ(engine.stats().n_steps, 6u) << "round " << round;
    std::lock_guard lock(mutex);
    ASSERT_FALSE(seqs_per_step.empty());
    EXPECT_EQ(seqs_per_step.front(), 4) << "round " << round;
  }

  Engine engine(model(), small_options());
  Collector fine;
  std::vector<std::pair<Request, EventCallback>> batch;
  batch.emplace_back(greedy_request(kPrompts[0], 4), fine.callback());
  Request empty = greedy_request(kPrompts[1], 4);
  empty.prompt.clear();
  batch.emplace_back(empty, [](const StreamEvent&) { ADD_FAILURE() << "a refused batch ran"; });
  EXPECT_THROW(engine.submit_all(std::move(batch)), InvalidRequest);
  EXPECT_TRUE(engine.wait_idle(std::chrono::milliseconds(1000)));
  EXPECT_EQ(engine.stats().n_steps, 0u);
  EXPECT_EQ(engine.stats().n_waiting, 0);
  EXPECT_EQ(fine.n_tokens(), 0u);
  expect_no_leaks(engine);
}

TEST(Engine, SeededSamplingIsReproducibleAcrossBatches) {
  Request r = greedy_request("Once upon a time", 40);
  r.sampling.temperature = 0.9f;
  r.sampling.top_p = 0.95f;
  r.sampling.seed = 1234;
  r.sampling.has_seed = true;
  const Outcome alone = run_alone(r);
  Engine engine(model(), small_options());
  std::vector<std::unique_ptr<Collector>> cs;
  for (int i = 0; i < 4; ++i) {
    cs.push_back(std::make_unique<Collector>());
    Request other = greedy_request(kPrompts[size_t(i)], 30);
    engine.submit(i == 2 ? r : other, cs.back()->callback());
  }
  EXPECT_EQ(cs[2]->wait().tokens, alone.tokens);
  for (auto& c : cs) c->wait();
  expect_no_leaks(engine);
}

TEST(Engine, SamplesOfOnePromptForkAndMatchSeparateRuns) {
  // n = 3 samples share the prompt's blocks (copy-on-write); sample i must equal a lone run with seed + i.
  Request r = greedy_request(kPrompts[3], 30);
  r.sampling.temperature = 1.0f;
  r.sampling.seed = 77;
  r.sampling.has_seed = true;
  r.n = 3;
  EngineOptions o = small_options();
  o.kv_block_size = 16;  // the prompt ends inside a block, so the forks must copy it before writing
  Engine engine(model(), o);
  std::mutex mutex;
  std::map<int32_t, std::vector<int32_t>> tokens;
  std::map<int32_t, FinishReason> reasons;
  std::promise<void> done;
  engine.submit(r, [&](const StreamEvent& ev) {
    std::lock_guard lock(mutex);
    if (ev.kind == StreamEvent::Kind::Token) {
      tokens[ev.index].push_back(ev.token);
    } else {
      reasons[ev.index] = ev.finish_reason;
      if (reasons.size() == 3) done.set_value();
    }
  });
  done.get_future().wait();
  ASSERT_TRUE(engine.wait_idle(std::chrono::seconds(10)));
  EXPECT_EQ(engine.stats().n_computed_tokens, r.prompt.size() + 3 * 29) << "the prompt is computed once";
  for (int32_t i = 0; i < 3; ++i) {
    Request alone = r;
    alone.n = 1;
    alone.sampling.seed = 77 + uint64_t(i);
    EXPECT_EQ(tokens[i], run_alone(alone).tokens) << "sample " << i;
  }
  EXPECT_NE(tokens[0], tokens[1]);
  expect_no_leaks(engine);
}

TEST(Engine, StopStringsEndGenerationAndAreNotReturned) {
  const Outcome free_run = run_alone(greedy_request("Once upon a time", 40));
  ASSERT_NE(free_run.text.find("Lily"), std::string::npos);
  Request r = greedy_request("Once upon a time", 40);
  r.sampling.stop = {"Lily"};
  const Outcome out = run_alone(r);
  EXPECT_EQ(out.reason, FinishReason::Stop);
  EXPECT_EQ(out.text, free_run.text.substr(0, free_run.text.find("Lily")));
}

// The position of the first token of `tokens` at or after `from` that did not occur before it.
size_t first_new_token(const std::vector<int32_t>& tokens, size_t from) {
  size_t at = from;
  while (at < tokens.size() && std::find(tokens.begin(), tokens.begin() + long(at), tokens[at]) != tokens.begin() + long(at))
    ++at;
  return at;
}

TEST(Engine, StopTokenIdsEndGenerationLikeAnEndToken) {
  const Outcome free_run = run_alone(greedy_request("Once upon a time", 30));
  ASSERT_EQ(free_run.tokens.size(), 30u);
  const size_t at = first_new_token(free_run.tokens, 6);
  ASSERT_LT(at, 30u);
  Request r = greedy_request("Once upon a time", 30);
  r.sampling.stop_token_ids = {free_run.tokens[at]};
  const Outcome out = run_alone(r);
  EXPECT_EQ(out.reason, FinishReason::Stop);
  EXPECT_EQ(out.tokens, std::vector<int32_t>(free_run.tokens.begin(), free_run.tokens.begin() + long(at)));
  EXPECT_EQ(out.stats.n_generated_tokens, int64_t(at));
  EXPECT_EQ(free_run.text.rfind(out.text, 0), 0u) << "the stop token's text is not part of the output";
  EXPECT_LT(out.text.size(), free_run.text.size());
}

TEST(Engine, MinTokensGoesPastStopTokensAndStopStrings) {
  const Outcome free_run = run_alone(greedy_request("Once upon a time", 40));
  ASSERT_EQ(free_run.tokens.size(), 40u);
  const size_t at = first_new_token(free_run.tokens, 6);
  ASSERT_LT(at, 20u);
  const int32_t stop_token = free_run.tokens[at];
  Request r = greedy_request("Once upon a time", 40);
  r.sampling.stop_token_ids = {stop_token};
  r.sampling.min_tokens = int32_t(at) + 5;
  const Outcome held = run_alone(r);
  ASSERT_GE(held.tokens.size(), at + 5);
  EXPECT_TRUE(std::equal(free_run.tokens.begin(), free_run.tokens.begin() + long(at), held.tokens.begin()));
  EXPECT_EQ(std::count(held.tokens.begin(), held.tokens.begin() + long(at) + 5, stop_token), 0)
      << "the stop token was not sampled before min_tokens";
  if (held.tokens.size() < 40u) {
    EXPECT_EQ(held.reason, FinishReason::Stop);
  }

  // A stop string met before min_tokens is output text (min_tokens = max_tokens: none counts). The free run
  // has no end token to hold back, so the output is the free run's.
  const size_t lily = free_run.text.find("Lily");
  ASSERT_NE(lily, std::string::npos);
  Request s = greedy_request("Once upon a time", 40);
  s.sampling.stop = {"Lily"};
  s.sampling.min_tokens = 40;
  const Outcome past = run_alone(s);
  EXPECT_EQ(past.tokens, free_run.tokens);
  EXPECT_EQ(past.text, free_run.text);
  EXPECT_EQ(past.reason, FinishReason::Length);
  const Outcome cut = run_alone([&] { Request c = s; c.sampling.min_tokens = 0; return c; }());
  EXPECT_EQ(cut.text, free_run.text.substr(0, lily));
}

TEST(Engine, LogitBiasSteersGreedyDecoding) {
  const Outcome free_run = run_alone(greedy_request("Once upon a time", 12));
  ASSERT_EQ(free_run.tokens.size(), 12u);
  Request ban = greedy_request("Once upon a time", 12);
  ban.sampling.logit_bias = {{free_run.tokens[3], -100.0f}};
  const Outcome banned = run_alone(ban);
  EXPECT_TRUE(std::equal(free_run.tokens.begin(), free_run.tokens.begin() + 3, banned.tokens.begin()));
  EXPECT_EQ(std::count(banned.tokens.begin(), banned.tokens.end(), free_run.tokens[3]), 0);
  // +100 outweighs any logit of this model: every token is the favoured one.
  const int32_t favoured = model()->tokenizer().encode(" dragon", false).front();
  Request force = greedy_request("Once upon a time", 6);
  force.sampling.logit_bias = {{favoured, 100.0f}};
  EXPECT_EQ(run_alone(force).tokens, std::vector<int32_t>(6, favoured));
  Request out_of_range = greedy_request("Once upon a time", 6);
  out_of_range.sampling.logit_bias = {{int32_t(model()->config().n_vocab), 1.0f}};
  Engine engine(model(), small_options());
  try {
    engine.submit(out_of_range, [](const StreamEvent&) {});
    ADD_FAILURE() << "a bias for a token outside the vocabulary was accepted";
  } catch (const InvalidRequest& e) {
    EXPECT_EQ(e.field(), "logit_bias");
    EXPECT_NE(std::string(e.what()).find("out of range"), std::string::npos) << e.what();
  }
}

// Prompt logprobs (OpenAI's echo with logprobs): each prompt token after the first, against the raw rows that
// prompt_logits gives, with its top alternatives; with max_tokens 0 nothing is generated, otherwise the output is
// the plain greedy run's, and a preempted prompt never sends a position twice.
TEST(Engine, PromptLogprobsAreTheRawRowsLogSoftmax) {
  const std::vector<int32_t> prompt = model()->tokenizer().encode("Once upon a time there was a little dog", true);
  const auto n_vocab = size_t(model()->config().n_vocab);
  Request rows_request = greedy_request("x", 0);
  rows_request.prompt = prompt;
  rows_request.prompt_logits = true;
  std::vector<float> rows;
  {
    Engine engine(model(), small_options());
    std::promise<void> done;
    engine.submit(rows_request, [&](const StreamEvent& ev) {
      if (ev.kind == StreamEvent::Kind::PromptLogits) rows.insert(rows.end(), ev.logits.begin(), ev.logits.end());
      if (ev.kind == StreamEvent::Kind::Finished) done.set_value();
    });
    done.get_future().wait();
  }
  ASSERT_EQ(rows.size(), prompt.size() * n_vocab);

  for (const int max_tokens : {0, 8}) {
    Request r = greedy_request("x", max_tokens);
    r.prompt = prompt;
    r.prompt_logprobs = 3;
    EngineOptions o = small_options();
    o.scheduling.max_batched_tokens = 4;  // the prompt in several chunks
    const Outcome out = run_alone(r, o);
    ASSERT_EQ(out.prompt_logprobs.size(), prompt.size() - 1) << "max_tokens " << max_tokens;
    for (size_t p = 0; p + 1 < prompt.size(); ++p) {
      const std::span<const float> row(rows.data() + p * n_vocab, n_vocab);
      double z = 0.0;
      for (float x : row) z += std::exp(double(x));
      const PositionLogprobs& got = out.prompt_logprobs[p];
      EXPECT_EQ(got.token, prompt[p + 1]);
      EXPECT_EQ(got.position, int64_t(p + 1));
      EXPECT_NEAR(got.logprob, double(row[size_t(prompt[p + 1])]) - std::log(z), 1e-4) << p;
      ASSERT_EQ(got.top.size(), 3u);
      std::vector<int32_t> order(n_vocab);
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + 3, order.end(),
                        [&](int32_t a, int32_t b) { return row[size_t(a)] > row[size_t(b)]; });
      for (size_t k = 0; k < 3; ++k) EXPECT_EQ(got.top[k].first, order[k]) << p << " " << k;
      EXPECT_GE(got.top[0].second, got.logprob);
      const auto in_top = std::find(order.begin(), order.begin() + 3, got.token) - order.begin();
      if (in_top < 3) {
        EXPECT_EQ(got.rank, in_top + 1) << p;
      } else {
        EXPECT_GT(got.rank, 3) << p;
      }
    }
    if (max_tokens == 0) {
      EXPECT_TRUE(out.tokens.empty());
      EXPECT_EQ(out.reason, FinishReason::Length);
    } else {
      Request plain = greedy_request("x", max_tokens);
      plain.prompt = prompt;
      EXPECT_EQ(out.tokens, run_alone(plain).tokens);
    }
  }
  Request bad = greedy_request("x", 1);
  bad.prompt_logprobs = 21;
  Engine engine(model(), small_options());
  EXPECT_THROW(engine.submit(bad, [](const StreamEvent&) {}), InvalidRequest);
}

}  // namespace
}  // namespace tessera
