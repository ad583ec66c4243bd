// The pieces of the engine core: the step plan's logits rows (fixed when planned), the output processor (the
// one per-token tail), KV sizing, and the synchronous front end against the serving loop it drives.
#include <gtest/gtest.h>

#include <cmath>
#include <future>
#include <numeric>

#include "core/error.h"
#include "engine/engine.h"
#include "engine/kv_sizing.h"
#include "model/memory_fit.h"
#include "engine/offline_engine.h"
#include "engine/output_processor.h"
#include "model/model.h"
#include "sched/scheduler.h"

namespace tessera {
namespace {

std::shared_ptr<const Model> model() {
  static std::shared_ptr<const Model> m = Model::load_embedded();
  return m;
}

ThreadPool& pool() {
  static ThreadPool p(2);
  return p;
}

Sequence sequence(uint64_t id, int n_prompt) {
  Sequence s;
  s.id = id;
  s.arrival = id;
  s.tokens.resize(size_t(n_prompt));
  std::iota(s.tokens.begin(), s.tokens.end(), 100);
  s.n_prompt = n_prompt;
  s.max_len = n_prompt + 8;
  return s;
}

TEST(StepPlan, LogitsRowsAreFixedWhenPlanned) {
  BlockManager bm(32, 4, true);
  Scheduler sched(bm, {.max_batched_tokens = 12, .max_seqs = 4});
  Sequence a = sequence(1, 5), b = sequence(2, 10);
  sched.add(&a, Clock::now());
  sched.add(&b, Clock::now());
  const StepPlan p = sched.schedule(Clock::now());
  ASSERT_EQ(p.chunks.size(), 2u);
  // a: its whole prompt, so its last token's row; b: the first 7 of 10, no row.
  EXPECT_EQ(p.chunks[0].first, 0);
  EXPECT_EQ(p.chunks[0].n_tokens, 5);
  EXPECT_TRUE(p.chunks[0].completes);
  EXPECT_EQ(p.chunks[0].n_logits, 1);
  EXPECT_EQ(p.chunks[0].logits_row, 0);
  EXPECT_EQ(p.chunks[1].n_tokens, 7);
  EXPECT_FALSE(p.chunks[1].completes);
  EXPECT_EQ(p.chunks[1].n_logits, 0);
  EXPECT_EQ(p.n_logits, 1);
  // After the pass the plan still says the same, whatever the sequences now hold.
  sched.on_computed(&a, 5);
  sched.on_computed(&b, 7);
  a.tokens.push_back(7);
  EXPECT_TRUE(p.chunks[0].completes);
  EXPECT_FALSE(p.chunks[1].completes);

  const StepPlan q = sched.schedule(Clock::now());
  ASSERT_EQ(q.chunks.size(), 2u);
  EXPECT_EQ(q.chunks[0].first, 5);  // a decodes
  EXPECT_EQ(q.chunks[0].logits_row, 0);
  EXPECT_EQ(q.chunks[1].first, 7);  // b finishes its prompt
  EXPECT_EQ(q.chunks[1].n_tokens, 3);
  EXPECT_EQ(q.chunks[1].logits_row, 1);
  EXPECT_EQ(q.n_logits, 2);
  sched.remove(&a);
  sched.remove(&b);
}

TEST(StepPlan, AllLogitsWantsEveryRowAndReusesNoCachedPrefix) {
  BlockManager bm(32, 4, true);
  Scheduler sched(bm, {.max_batched_tokens = 64, .max_seqs = 4});
  Sequence first = sequence(1, 9);
  sched.add(&first, Clock::now());
  StepPlan p = sched.schedule(Clock::now());
  sched.on_computed(&first, 9);  // registers its two full blocks
  sched.remove(&first);

  Sequence again = sequence(2, 9);  // same tokens: its prefix is cached
  again.all_logits = true;
  sched.add(&again, Clock::now());
  p = sched.schedule(Clock::now());
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].first, 0) << "no cached block reused: their positions have no logits";
  EXPECT_EQ(p.chunks[0].n_tokens, 9);
  EXPECT_EQ(p.chunks[0].n_logits, 9);
  EXPECT_EQ(p.n_logits, 9);
  sched.remove(&again);
}

Request request_for(const std::vector<int32_t>& prompt, int max_tokens) {
  Request r;
  r.prompt = prompt;
  r.sampling.temperature = 0.0f;
  r.sampling.max_tokens = max_tokens;
  return r;
}

RequestProblem problem_of(const Request& r, const RequestLimits& limits) {
  try {
    check_request(r, limits);
  } catch (const InvalidRequest& e) {
    return e.problem();
  }
  ADD_FAILURE() << "accepted";
  return RequestProblem::InvalidParameter;
}

TEST(CheckRequest, EachRefusalHasItsProblem) {
  const RequestLimits limits{.n_vocab = 100, .n_ctx = 32, .block_size = 4, .n_blocks = 6};
  Request ok = request_for({1, 2, 3}, 5);
  EXPECT_NO_THROW(check_request(ok, limits));
  Request r = ok;
  r.sampling.top_p = 0.0f;
  EXPECT_EQ(problem_of(r, limits), RequestProblem::InvalidParameter);
  r = ok;
  r.n = 0;
  EXPECT_EQ(problem_of(r, limits), RequestProblem::InvalidParameter);
  r = ok;
  r.top_logprobs = 21;
  EXPECT_EQ(problem_of(r, limits), RequestProblem::InvalidParameter);
  r = ok;
  r.prompt.clear();
  EXPECT_EQ(problem_of(r, limits), RequestProblem::EmptyPrompt);
  r = ok;
  r.prompt[1] = 100;
  EXPECT_EQ(problem_of(r, limits), RequestProblem::InvalidToken);
  // The context: a prompt that leaves no room is refused; prompt + max_tokens beyond it only when it must fit
  // (else the sample ends with the context: 32 positions, 8 blocks).
  const RequestLimits roomy{.n_vocab = 100, .n_ctx = 32, .block_size = 4, .n_blocks = 64};
  const RequestLimits seven_blocks{.n_vocab = 100, .n_ctx = 32, .block_size = 4, .n_blocks = 7};
  r = request_for(std::vector<int32_t>(20, 1), 20);
  EXPECT_NO_THROW(check_request(r, roomy));
  EXPECT_EQ(problem_of(r, seven_blocks), RequestProblem::CacheTooSmall);
  r.must_fit_context = true;
  EXPECT_EQ(problem_of(r, roomy), RequestProblem::ContextLength);
  r = request_for(std::vector<int32_t>(32, 1), 1);
  EXPECT_EQ(problem_of(r, roomy), RequestProblem::ContextLength);
  r.sampling.max_tokens = 0;
  r.prompt_logits = true;  // only the prompt's logits: it may fill the context
  EXPECT_NO_THROW(check_request(r, roomy));
}

TEST(OutputProcessor, EndOfGenerationIsNotOutputAndEndsWithStop) {
  const Tokenizer& tok = model()->tokenizer();
  const Request r = request_for(tok.encode("Once upon a time", true), 10);
  OutputProcessor out(tok, r);
  Sampler sampler(r.sampling);
  const std::vector<float> logits(size_t(tok.n_vocab()), 0.0f);
  sampler.sample(logits, r.prompt);
  StreamEvent ev;
  const TokenOutcome o = out.accept(tok.vocab().eos, sampler, logits, 5, 100, ev);
  EXPECT_FALSE(o.keep);
  EXPECT_EQ(o.finish, FinishReason::Stop);
  EXPECT_EQ(out.n_generated(), 0);
}

TEST(OutputProcessor, LengthAndStopStringsAndTheFlush) {
  const Tokenizer& tok = model()->tokenizer();
  // " and they were happy": the tokenizer's space prefix makes the first word " and".
  const std::vector<int32_t> text = tok.encode("and they were happy", false);
  ASSERT_GE(text.size(), 3u);
  const std::vector<float> logits(size_t(tok.n_vocab()), 0.0f);

  // max_tokens ends it with Length after the last token; so does a full context.
  Request r = request_for(tok.encode("Once", true), 2);
  OutputProcessor out(tok, r);
  Sampler sampler(r.sampling);
  sampler.sample(logits, r.prompt);
  StreamEvent ev;
  EXPECT_FALSE(out.accept(text[0], sampler, logits, 3, 100, ev).finish);
  EXPECT_EQ(ev.token, text[0]);
  EXPECT_EQ(out.accept(text[1], sampler, logits, 4, 100, ev).finish, FinishReason::Length);
  OutputProcessor full(tok, r);
  EXPECT_EQ(full.accept(text[0], sampler, logits, 100, 100, ev).finish, FinishReason::Length);

  // A stop string ends it with Stop; the text before it is released, the stop string never.
  Request s = request_for(tok.encode("Once", true), 50);
  s.sampling.stop = {"they"};
  OutputProcessor stops(tok, s);
  std::string streamed;
  std::optional<FinishReason> end;
  for (int32_t id : text) {
    StreamEvent e;
    end = stops.accept(id, sampler, logits, 3, 100, e).finish;
    streamed += e.text;
    if (end) break;
  }
  EXPECT_EQ(end, FinishReason::Stop);
  StreamEvent fin = finished_event(1, 0, FinishReason::Stop, {}, {});
  stops.finish(FinishReason::Stop, fin);
  EXPECT_EQ(streamed + fin.text, " and ");
}

TEST(OutputProcessor, LeadingSpaceIsDroppedOnlyAfterABosOnlyPrompt) {
  const Tokenizer& tok = model()->tokenizer();
  const std::vector<int32_t> once = tok.encode("Once", false);
  const std::vector<float> logits(size_t(tok.n_vocab()), 0.0f);
  auto first_text = [&](const std::vector<int32_t>& prompt) {
    const Request r = request_for(prompt, 10);
    OutputProcessor out(tok, r);
    Sampler sampler(r.sampling);
    std::string text;
    for (int32_t id : once) {
      StreamEvent ev;
      out.accept(id, sampler, logits, 10, 100, ev);
      text += ev.text;
    }
    StreamEvent fin = finished_event(1, 0, FinishReason::Length, {}, {});
    out.finish(FinishReason::Length, fin);
    return text + fin.text;
  };
  // decode() drops the space prefix the tokenizer added; so does the stream right after BOS, and only there.
  EXPECT_EQ(first_text({tok.vocab().bos}), tok.decode(once));
  EXPECT_EQ(first_text(tok.encode("Hi", true)), " " + tok.decode(once));
}

TEST(KvSizing, ContextFloorsBlocksAndTheDefaultCap) {
  const ModelConfig& c = model()->config();
  EXPECT_EQ(kv_blocks_for_context(1), 1);
  EXPECT_EQ(kv_blocks_for_context(16), 1);
  EXPECT_EQ(kv_blocks_for_context(17), 2);
  const uint64_t block = kv_block_bytes(c, kDefaultKvBlockSize, KvType::F16);
  EXPECT_EQ(kv_cache_bytes_for_context(c, 100, KvType::F16), 7 * block);
  // A budget of 20 blocks holds 320 positions: floored to 256. Below 256, whole blocks.
  EXPECT_EQ(context_that_fits(c, 20 * block + block / 2, KvType::F16), 256);
  EXPECT_EQ(context_that_fits(c, 5 * block, KvType::F16), 80);
  EXPECT_EQ(context_that_fits(c, block - 1, KvType::F16), 0);

  EngineOptions o;
  o.scheduling.max_seqs = 4;
  EXPECT_EQ(engine_kv_blocks(c, o), 4 * kv_blocks_for_context(usable_context(c, 0)));
  o.kv_cache_bytes = 10 * block;
  EXPECT_EQ(engine_kv_blocks(c, o), 10);
  o.kv_blocks = 3;
  EXPECT_EQ(engine_kv_blocks(c, o), 3);
  EngineOptions huge;
  huge.scheduling.max_seqs = 1 << 20;
  EXPECT_EQ(uint64_t(engine_kv_blocks(c, huge)), kDefaultKvCacheCapBytes / block);
}

TEST(KvSizing, FitShrinksADerivedSizeAndChecksAGivenOne) {
  const Model& m = *model();
  std::string note;
  // Unknown memory: nothing is checked or shrunk.
  EXPECT_EQ(fit_context(m, 0, KvType::F32, 0, "-c", &note), usable_context(m.config(), 0));
  EXPECT_TRUE(note.empty());
  EngineOptions o;
  EXPECT_EQ(fit_kv_pool(m, o, 0, {}, &note),
            uint64_t(engine_kv_blocks(m.config(), o)) * engine_kv_block_bytes(m.config(), o));
  // A given size that cannot fit is refused, naming what set it.
  try {
    fit_context(m, 256, KvType::F32, m.weight_bytes() + 1, "-c 256");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("-c 256"), std::string::npos) << e.what();
  }
}

// A served model and its fallback share the memory: both weights are set aside, then each pool in order gets
// what is left. (The reserve beside the weights is 256 MiB at these sizes: kv_cache_budget_bytes.)
TEST(KvSizing, EnginesSharingTheMemoryFitInOrderAfterAllTheWeights) {
  const Model& m = *model();
  const uint64_t w = m.weight_bytes(), reserve = uint64_t{256} << 20;
  EngineOptions first, second;
  const uint64_t block = engine_kv_block_bytes(m.config(), first);
  const uint64_t planned = uint64_t(engine_kv_blocks(m.config(), first)) * block;
  const uint64_t one_sequence = kv_cache_bytes_for_context(m.config(), usable_context(m.config(), 0), first.kv_type);
  ASSERT_LE(one_sequence, planned / 2);
  std::vector<KvPoolFit> fits =
      fit_kv_pools({{&m, &first, "", ""}, {&m, &second, "", ""}}, 2 * w + reserve + planned + planned / 2);
  ASSERT_EQ(fits.size(), 2u);
  EXPECT_EQ(fits[0].bytes, planned);  // the first engine's whole default pool fits
  EXPECT_TRUE(fits[0].note.empty());
  EXPECT_EQ(fits[1].bytes, planned / 2 / block * block);  // the second gets what is left, in whole blocks
  EXPECT_FALSE(fits[1].note.empty());
  EXPECT_EQ(second.kv_cache_bytes, planned / 2);

  // Less than one sequence left for the second, but it fits in the reserve: one full sequence, not zero (which
  // would read as "derive the default").
  EngineOptions a, b;
  fits = fit_kv_pools({{&m, &a, "", ""}, {&m, &b, "", ""}}, 2 * w + reserve + planned);
  EXPECT_EQ(fits[1].bytes, (one_sequence + block - 1) / block * block);
  // Room beside both weights for one and a half sequences: the first takes one, the second's is refused,
  // naming what set its context.
  EngineOptions c, d;
  try {
    fit_kv_pools({{&m, &c, "", ""}, {&m, &d, "", "-c 512"}}, 2 * w + one_sequence + one_sequence / 2);
    FAIL() << "expected an error";
  } catch (const MemoryFitError& e) {
    EXPECT_EQ(e.kv_source, "-c 512 (one sequence)");
  }
  // Unknown memory: nothing checked or shrunk.
  EngineOptions e, f;
  fits = fit_kv_pools({{&m, &e, "", ""}, {&m, &f, "", ""}}, 0);
  EXPECT_EQ(fits[0].bytes, planned);
  EXPECT_EQ(fits[1].bytes, planned);
}

// A draft model's weights and its own cache (as many blocks as the target's) share the memory with the
// target's: a pool block costs both caches' blocks, and every fit counts the draft. The embedded model drafts
// for itself here, so a block costs exactly twice the target's.
TEST(KvSizing, ADraftModelsWeightsAndCacheCountInEveryFit) {
  const Model& m = *model();
  const uint64_t w = m.weight_bytes(), reserve = uint64_t{256} << 20;
  EngineOptions plain, spec;
  spec.speculative.method = SpecMethod::Draft;
  spec.speculative.draft_model = model();
  const uint64_t block = engine_kv_block_bytes(m.config(), plain);
  ASSERT_EQ(engine_kv_block_bytes(m.config(), spec), 2 * block);
  spec.kv_cache_bytes = 10 * 2 * block;
  EXPECT_EQ(engine_kv_blocks(m.config(), spec), 10);  // a given size covers both caches
  spec.kv_cache_bytes = 0;

  // A given block count: both weights and both caches fit to the byte, or the check refuses with every size.
  EngineOptions given = spec;
  given.kv_blocks = 10;
  EXPECT_EQ(fit_kv_pool(m, given, 2 * w + 10 * 2 * block, "--kv-blocks 10"), 10 * 2 * block);
  try {
    fit_kv_pool(m, given, 2 * w + 10 * 2 * block - 1, "--kv-blocks 10");
    FAIL() << "expected an error: the draft's weights and cache do not fit";
  } catch (const MemoryFitError& e) {
    const std::string message = e.what();
    EXPECT_EQ(e.kv_source, "--kv-blocks 10");
    EXPECT_NE(message.find("the draft model " + m.name()), std::string::npos) << message;
    EXPECT_EQ(message.find("--draft-model"), std::string::npos) << "the library names no flags: " << message;
  }

  // A derived pool shrinks to what both weights leave, in blocks of both caches.
  EngineOptions derived = spec;
  std::string note;
  const uint64_t fit = fit_kv_pool(m, derived, 2 * w + reserve + 100 * 2 * block, {}, &note);
  EXPECT_EQ(fit, 100 * 2 * block);
  EXPECT_EQ(engine_kv_blocks(m.config(), derived), 100);
  EXPECT_NE(note.find("the draft model's cache included"), std::string::npos) << note;
  // Not one full-length sequence of both caches beside both weights: refused, naming what set the context.
  const uint64_t one_sequence = kv_cache_bytes_for_context(m.config(), usable_context(m.config(), 0), plain.kv_type);
  EngineOptions tight = spec;
  EXPECT_THROW(fit_kv_pool(m, tight, 2 * w + 2 * one_sequence - 1, {}, nullptr, "-c 512"), MemoryFitError);
  EXPECT_EQ(fit_kv_pool(m, tight, 2 * w + 2 * one_sequence, {}, nullptr, "-c 512"), 2 * one_sequence);

  // Beside a fallback: the primary's draft is set aside with all the weights before any pool is fitted.
  EngineOptions primary = spec, fallback;
  const std::vector<KvPoolFit> fits =
      fit_kv_pools({{&m, &primary, "", ""}, {&m, &fallback, "", ""}}, 3 * w + reserve + 100 * 2 * block + 50 * block);
  EXPECT_EQ(fits[0].bytes, 125 * 2 * block);  // 250 target blocks' bytes: 125 blocks of both caches
  EXPECT_EQ(fits[1].bytes, (one_sequence + block - 1) / block * block);  // the floor, from the reserve

  // One sequence (tessera run): the context's cache counts twice and both weights are set aside.
  const int64_t n_ctx = usable_context(m.config(), 0);
  EXPECT_EQ(fit_context(m, 256, KvType::F32, 2 * w + 2 * kv_cache_bytes_for_context(m.config(), 256, KvType::F32),
                        "-c 256", nullptr, &m),
            256);
  EXPECT_THROW(fit_context(m, 256, KvType::F32, 2 * w + 2 * kv_cache_bytes_for_context(m.config(), 256, KvType::F32) - 1,
                           "-c 256", nullptr, &m),
               MemoryFitError);
  const uint64_t f32_block = kv_block_bytes(m.config(), kDefaultKvBlockSize, KvType::F32);
  note.clear();
  EXPECT_EQ(fit_context(m, 0, KvType::F32, 2 * w + reserve + 10 * 2 * f32_block, "-c", &note, &m), 160);
  EXPECT_LT(160, n_ctx);
  EXPECT_NE(note.find("the draft model's included"), std::string::npos) << note;
}

TEST(OfflineEngine, GreedyTextEqualsTheServingEngines) {
  const std::vector<int32_t> prompt = model()->tokenizer().encode("Lily and Ben went to the park", true);
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  greedy.max_tokens = 24;
  OfflineEngine offline(model(), pool(), 0, 512, KvType::F16);
  const GenerationResult r = offline.generate(prompt, greedy);

  EngineOptions o;
  o.threads = 2;
  o.kv_blocks = 64;
  Engine engine(model(), o);
  std::vector<int32_t> tokens;
  std::string text;
  std::promise<void> done;
  engine.submit(request_for(prompt, 24), [&](const StreamEvent& ev) {
    if (ev.kind == StreamEvent::Kind::Token) tokens.push_back(ev.token);
    text += ev.text;
    if (ev.kind == StreamEvent::Kind::Finished) done.set_value();
  });
  done.get_future().wait();
  EXPECT_EQ(r.tokens, tokens);
  EXPECT_EQ(r.text, text);
  EXPECT_EQ(r.n_prompt_tokens, int64_t(prompt.size()));
}

TEST(OfflineEngine, PromptLogitsCoverEveryPositionAndMayFillTheContext) {
  const std::vector<int32_t> prompt = model()->tokenizer().encode("Once upon a time there was a cat", true);
  const auto n_vocab = size_t(model()->config().n_vocab);
  OfflineEngine whole(model(), pool(), int64_t(prompt.size()), 512);
  const std::vector<float> a = whole.prompt_logits(prompt);
  ASSERT_EQ(a.size(), prompt.size() * n_vocab);
  // Chunked 3 positions at a time: the same rows (chunking never changes a token's result).
  OfflineEngine chunked(model(), pool(), int64_t(prompt.size()), 3);
  EXPECT_EQ(chunked.prompt_logits(prompt), a);
  // A prompt that fills the context leaves no room to generate: it ends at once.
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  const GenerationResult r = whole.generate(prompt, greedy);
  EXPECT_TRUE(r.tokens.empty());
  EXPECT_EQ(r.finish_reason, FinishReason::Length);
  EXPECT_THROW(whole.prompt_logits(model()->tokenizer().encode("Once upon a time there was a cat and a dog", true)),
               Error);
}

}  // namespace
}  // namespace tessera
