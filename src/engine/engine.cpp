// The step loop, in three phases: schedule (the Scheduler's plan) → execute (the Executor's forward pass) →
// update (sample, append, fork, finish and emit through each sample's OutputProcessor).
#include "engine/engine.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <cstdio>
#include <unordered_map>

#include "core/error.h"
#include "core/thread_name.h"
#include "core/thread_pool.h"
#include "engine/constraint.h"
#include "engine/draft_model_proposer.h"
#include "engine/executor.h"
#include "engine/ngram_proposer.h"
#include "engine/output_processor.h"
#include "engine/sampler.h"
#include "engine/spec_policy.h"
#include "engine/verification.h"
#include "kv/block_manager.h"
#include "kv/kv_pool.h"
#include "sched/scheduler.h"
#include "tokenizer/tokenizer.h"

namespace tessera {

namespace {

double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// Everything the engine keeps for one live sample of a request (a request of n samples is one until its prompt
// is computed, then n); `seq` is what the scheduler sees.
struct LiveSample {
  LiveSample(Request r, EventCallback cb, const Tokenizer& tokenizer)
      : request(std::move(r)),
        on_event(std::move(cb)),
        sampler(request.sampling, end_tokens_for(request.sampling, tokenizer, int64_t(request.prompt.size()))),
        output(tokenizer, request) {}

  Request request;
  EventCallback on_event;
  Sequence seq;
  Sampler sampler;
  OutputProcessor output;  // refers to `request`
  std::unique_ptr<SequenceConstraint> constraint;  // when request.constraint is set
  Clock::time_point submitted;
  Clock::time_point first_scheduled{};
  Clock::time_point first_token{};
  uint64_t request_id = 0;    // as returned by submit(); seq.id is internal and unique per sample
  int32_t index = 0;          // sample index within the request
  int32_t forks_pending = 0;  // samples still to fork off once the prompt's logits exist
  int64_t n_prompt_logits_sent = 0;  // prompt_logits: positions already delivered (a preempted prompt is recomputed)
  // The distributions seq.draft was drawn from, one per draft token (empty: point masses); set with the draft.
  std::vector<std::vector<float>> draft_q;
};

// The draft model's sampler draws from a stream of its own: reusing the target's seed would correlate the
// guesses with the target's accept/reject draws.
constexpr uint64_t kDraftSeedSalt = 0xd1b54a32d192ed03ull;

// A request's last event, or its Started event: a callback that throws here is reported and the throw dropped
// (at the end there is nothing left to fail; at the start the step is being planned), never allowed to unwind
// the step loop.
void deliver_quietly(LiveSample& r, const StreamEvent& ev) {
  try {
    r.on_event(ev);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "engine: request %llu: its callback threw on a start or end event: %s\n",
                 static_cast<unsigned long long>(r.request_id), e.what());
  } catch (...) {
    std::fprintf(stderr, "engine: request %llu: its callback threw on a start or end event\n",
                 static_cast<unsigned long long>(r.request_id));
  }
}

bool all_finite(std::span<const float> row) {
  return std::all_of(row.begin(), row.end(), [](float v) { return std::isfinite(v); });
}

}  // namespace

struct Engine::Impl {
  Impl(std::shared_ptr<const Model> m, EngineOptions o, ThreadPool* external_pool);
  ~Impl();

  void loop();
  // One step: schedule → execute → update. False when there was nothing to run.
  bool step();
  // Before the plan runs: Started events and first-scheduled times of the requests it takes out of the queue.
  void begin(const StepPlan& plan, Clock::time_point now);
  // After the forward pass: marks the plan's tokens computed (registering full blocks as prefixes), then for
  // each chunk with logits delivers prompt logits, forks pending samples, samples, appends, and finishes.
  void update(const StepPlan& plan, std::span<const float> logits);
  void deliver_prompt_logits(LiveSample& r, const ScheduledChunk& chunk, std::span<const float> rows);
  // Samples one token for `r` from `row` and hands it to the output processor; a throw ends only `r`.
  void sample(LiveSample& r, std::span<const float> row);
  std::unique_ptr<SequenceConstraint> make_constraint(const Request& request);
  std::shared_ptr<const grammar::Vocabulary> vocabulary_for_grammars();
  // Hands one drawn token to r's output processor and appends it; false when r ended with it.
  bool emit(LiveSample& r, int32_t token, std::span<const float> row);
  // The constraint's part, shared by plain sampling and verification. allowed_row: what `r` may sample from,
  // `row` itself or a copy with what its constraint forbids next at -inf (forked samples share `row`); empty
  // when nothing is allowed, `r` then finished with an error. emit_allowed: steps r's constraint over `token`,
  // then emit(); false when r ended (with the token, or because the constraint refused it).
  std::span<const float> allowed_row(LiveSample& r, std::span<const float> row);
  bool emit_allowed(LiveSample& r, int32_t token, std::span<const float> row);
  // Speculation, before the plan: the proposer guesses for the decoding sequences, with the k the cost model
  // picks for this step (0: none).
  void propose();
  // A verification chunk's rows: the accept/reject rule (verification.h), the accepted prefix and one more
  // token appended, the rejected positions' blocks released.
  void verify(LiveSample& r, const ScheduledChunk& chunk, std::span<const float> rows);
  // Times one forward pass over n one-token sequences (the speculation cost model's calibration), on blocks
  // nobody holds yet.
  double time_pass(int64_t n_tokens);
  void finish(LiveSample& r, FinishReason reason, std::string error = {});
  void fork(LiveSample& parent, std::vector<LiveSample*>& children);
  void publish_stats();
  // Applies the submits and cancels made since the last step, in the order they were made.
  void apply_commands();
  // submit's two halves: the checks and the live state (no lock), then the id and the queue (under `mutex`).
  std::unique_ptr<LiveSample> prepare(Request request, EventCallback on_event);
  uint64_t enqueue_locked(std::unique_ptr<LiveSample> r);
  void admit(std::unique_ptr<LiveSample> r);
  void cancel_now(uint64_t request_id, FinishReason reason);
  void expire(Clock::time_point now);
  // Ends a request that threw (its callback, the sampler, the decoder) with FinishReason::Error; the others go on.
  void fail_request(uint64_t seq_id, const char* what);
  void fail_all(const char* what);
  void stop();

  std::shared_ptr<const Model> model;
  EngineOptions options;
  int64_t n_ctx;
  RequestLimits limits;
  std::unique_ptr<ThreadPool> own_pool;  // null when running on a caller's pool
  ThreadPool& pool;
  std::unique_ptr<KvPool> kv;
  std::unique_ptr<BlockManager> blocks;
  std::unique_ptr<Scheduler> scheduler;
  std::unique_ptr<Executor> executor;
  std::unique_ptr<Proposer> proposer;      // null: speculation off
  std::unique_ptr<SpecPolicy> spec_policy;  // with the proposer

  // Owned by the step thread.
  std::unordered_map<uint64_t, std::unique_ptr<LiveSample>> active;
  uint64_t arrival_counter = 0;
  uint64_t next_seq_id = 1;
  EngineStats counters;  // monotonic counters, step thread only

  // Shared with submit/cancel/stats callers.
  mutable std::mutex mutex;
  std::condition_variable wake;
  std::condition_variable idle;
  // Submits and cancels, in the order they were made: one queue, so a cancel never overtakes its submit (a
  // cancel set swapped after the submitted requests were admitted lost a cancel that came in between).
  struct Command {
    std::unique_ptr<LiveSample> submit;  // null: cancel `cancel_id`
    uint64_t cancel_id = 0;
  };
  std::vector<Command> commands;
  size_t n_queued_submits = 0;  // submits among `commands`
  uint64_t next_id = 1;
  size_t n_live = 0;  // samples submitted and not finished
  // True when the last published snapshot was taken with nothing live: wait_idle() waits for this, not just for
  // n_live == 0, so that stats() read after it includes the last step.
  bool idle_published = true;
  bool stopping = false;
  EngineStats snapshot;
  std::function<void(const StepStats&)> observer;
  std::mutex join_mutex;  // stop() may be called from several threads
  std::once_flag grammar_vocab_once;  // built on the first constrained request
  std::shared_ptr<const grammar::Vocabulary> grammar_vocab;
  std::thread thread;
};

Engine::Impl::Impl(std::shared_ptr<const Model> m, EngineOptions o, ThreadPool* external_pool)
    : model(std::move(m)),
      options(o),
      n_ctx(usable_context(model->config(), o.n_ctx)),
      own_pool(external_pool ? nullptr : std::make_unique<ThreadPool>(o.threads)),
      pool(external_pool ? *external_pool : *own_pool) {
  const ModelConfig& c = model->config();
  // Named as the options are: the CLI checks its flags' ranges itself, before they get here.
  if (options.kv_block_size <= 0 || options.kv_block_size > 1024) fail("kv_block_size must be in 1..1024");
  if (options.scheduling.max_batched_tokens <= 0) fail("max_batched_tokens must be positive");
  if (options.scheduling.max_seqs <= 0) fail("max_seqs must be positive");
  const int64_t n_blocks = engine_kv_blocks(c, options);
  if (n_blocks <= 0) fail("the KV cache is smaller than one block ({} bytes)", engine_kv_block_bytes(c, options));
  kv = std::make_unique<KvPool>(c.n_layer, c.n_head_kv, c.head_dim, n_blocks, options.kv_block_size, options.kv_type);
  blocks = std::make_unique<BlockManager>(n_blocks, options.kv_block_size, options.prefix_caching);
  scheduler = std::make_unique<Scheduler>(*blocks, options.scheduling);
  executor = std::make_unique<Executor>(model, *kv, pool);
  limits = {c.n_vocab, n_ctx, options.kv_block_size, n_blocks};
  if (const SpeculativeOptions& spec = options.speculative; spec.enabled()) {
    if (std::string problem = speculative_problem(spec, *model); !problem.empty()) fail("{}", problem);
    // The step shapes speculation produces: up to max_seqs sequences of k + 1 tokens, within the token budget.
    const int64_t max_tokens = std::min(options.scheduling.max_batched_tokens,
                                        options.scheduling.max_seqs * (spec.spec_tokens + 1));
    if (spec.method == SpecMethod::Draft) {
      auto draft = std::make_unique<DraftModelProposer>(spec.draft_model, pool, n_blocks, options.kv_block_size,
                                                        options.kv_type);
      if (spec.switch_policy == SpecSwitch::CostModel) draft->calibrate(options.scheduling.max_seqs);
      proposer = std::move(draft);
    } else {
      proposer = std::make_unique<NgramProposer>();
    }
    spec_policy = std::make_unique<SpecPolicy>(spec, *proposer);
    if (spec.switch_policy == SpecSwitch::CostModel)
      spec_policy->step_cost().calibrate([this](int64_t n) { return time_pass(n); }, max_tokens);
    counters.n_spec_accepted_per_pos.assign(size_t(spec.spec_tokens), 0);
  }
  snapshot.kv_blocks_total = n_blocks;
  snapshot.kv_bytes_per_token = kv->bytes_per_token();
  thread = std::thread([this] {
    name_this_thread("engine");
    loop();
  });
}

Engine::Impl::~Impl() { stop(); }

void Engine::Impl::finish(LiveSample& r, FinishReason reason, std::string error) {
  scheduler->remove(&r.seq);
  if (proposer) proposer->forget(r.seq.id);
  const auto now = Clock::now();
  RequestStats s;
  s.n_prompt_tokens = r.seq.n_prompt;
  s.n_cached_prompt_tokens = r.seq.n_cached_prompt_tokens;
  s.n_generated_tokens = r.output.n_generated();
  s.n_preemptions = r.seq.n_preemptions;
  s.queue_seconds = r.seq.ever_scheduled ? seconds_between(r.submitted, r.first_scheduled) : seconds_between(r.submitted, now);
  s.time_to_first_token_seconds = r.output.n_generated() > 0 ? seconds_between(r.submitted, r.first_token) : 0.0;
  s.e2e_seconds = seconds_between(r.submitted, now);
  StreamEvent ev = finished_event(r.request_id, r.index, reason, error, s);
  r.output.finish(reason, ev);
  deliver_quietly(r, ev);
  // Samples that were never forked (the request ended before its prompt was computed) end the same way.
  RequestStats unforked;
  unforked.n_prompt_tokens = r.seq.n_prompt;
  unforked.e2e_seconds = s.e2e_seconds;
  for (int32_t i = 1; i <= r.forks_pending; ++i)
    deliver_quietly(r, finished_event(r.request_id, r.index + i, reason, error, unforked));
  const int64_t n_ended = 1 + r.forks_pending;
  active.erase(r.seq.id);  // destroys r
  std::lock_guard lock(mutex);
  n_live -= size_t(n_ended);
}

void Engine::Impl::fork(LiveSample& parent, std::vector<LiveSample*>& children) {
  for (int32_t i = 1; i <= parent.forks_pending; ++i) {
    Request request = parent.request;
    request.sampling.seed += uint64_t(i);
    auto child = std::make_unique<LiveSample>(std::move(request), parent.on_event, model->tokenizer());
    child->constraint = make_constraint(child->request);
    child->request_id = parent.request_id;
    child->index = parent.index + i;
    child->submitted = parent.submitted;
    child->first_scheduled = parent.first_scheduled;
    child->n_prompt_logits_sent = parent.n_prompt_logits_sent;
    Sequence& s = child->seq;
    s.id = next_seq_id++;
    s.priority = parent.seq.priority;
    s.arrival = parent.seq.arrival;
    s.tokens = parent.seq.tokens;
    s.n_prompt = parent.seq.n_prompt;
    s.max_len = parent.seq.max_len;
    s.n_computed = parent.seq.n_computed;
    s.block_table = parent.seq.block_table;
    s.block_hashes = parent.seq.block_hashes;
    s.prefix_seed = parent.seq.prefix_seed;
    s.n_cached_prompt_tokens = parent.seq.n_cached_prompt_tokens;
    s.all_logits = parent.seq.all_logits;
    s.ever_scheduled = true;
    for (int32_t block : s.block_table) blocks->share(block);
    scheduler->add_running(&s);
    children.push_back(child.get());
    active.emplace(s.id, std::move(child));
  }
  parent.forks_pending = 0;
}

void Engine::Impl::publish_stats() {
  EngineStats s = counters;
  s.n_waiting = int64_t(scheduler->n_waiting());
  s.n_running = int64_t(scheduler->n_running());
  s.kv_blocks_total = blocks->n_blocks();
  s.kv_blocks_used = blocks->n_used();
  s.kv_blocks_cached = blocks->n_cached_free();
  s.kv_bytes_per_token = kv->bytes_per_token();
  int64_t held = 0;
  for (const Sequence* seq : scheduler->running()) held += seq->n_computed;
  s.kv_tokens_held = held;
  if (proposer) s.spec_kv_blocks_used = proposer->n_blocks_used();
  std::lock_guard lock(mutex);
  s.n_waiting += int64_t(n_queued_submits);
  snapshot = s;
  idle_published = n_live == 0;
  if (idle_published) idle.notify_all();
}

void Engine::Impl::admit(std::unique_ptr<LiveSample> r) {
  r->seq.arrival = ++arrival_counter;
  r->seq.id = next_seq_id++;
  scheduler->add(&r->seq, r->submitted);
  const uint64_t id = r->seq.id;
  active.emplace(id, std::move(r));
}

void Engine::Impl::cancel_now(uint64_t request_id, FinishReason reason) {
  std::vector<LiveSample*> samples;
  for (auto& [id, r] : active)
    if (r->request_id == request_id) samples.push_back(r.get());
  for (LiveSample* r : samples) finish(*r, reason);
}

void Engine::Impl::apply_commands() {
  std::vector<Command> todo;
  {
    std::lock_guard lock(mutex);
    todo.swap(commands);
    n_queued_submits = 0;
  }
  for (Command& c : todo) {
    if (c.submit) admit(std::move(c.submit));
    else cancel_now(c.cancel_id, FinishReason::Cancelled);
  }
}

void Engine::Impl::expire(Clock::time_point now) {
  std::vector<LiveSample*> expired;
  for (auto& [id, r] : active)
    if (r->request.deadline && *r->request.deadline <= now) expired.push_back(r.get());
  for (LiveSample* r : expired) finish(*r, FinishReason::Timeout);
}

void Engine::Impl::fail_request(uint64_t seq_id, const char* what) {
  if (auto it = active.find(seq_id); it != active.end()) finish(*it->second, FinishReason::Error, what);
}

bool Engine::Impl::step() {
  const auto now = Clock::now();
  apply_commands();
  expire(now);

  // 1. Schedule: which sequences run which tokens, and which rows want logits (all fixed in the plan). With
  // speculation, the proposer's guesses are in place first: a decoding sequence's chunk then verifies them.
  propose();
  const StepPlan plan = scheduler->schedule(now);
  counters.n_preemptions += plan.preempted.size();
  // A preempted sequence gives back the draft's blocks with the target's: it may wait long, and the draft's
  // pool (as many blocks as the target's) would otherwise fill with sequences that are not running. It is
  // recomputed from its tokens when it runs again, on both caches.
  if (proposer)
    for (const Sequence* seq : plan.preempted) proposer->forget(seq->id);
  if (plan.empty()) {
    publish_stats();
    return false;
  }
  begin(plan, now);
  // Counted now: the update may finish (and free) the plan's sequences.
  StepStats st;
  st.n_seqs = int64_t(plan.chunks.size());
  st.n_tokens = plan.n_tokens;
  for (const ScheduledChunk& chunk : plan.chunks)
    (chunk.first >= chunk.seq->n_prompt ? st.n_decode_tokens : st.n_prefill_tokens) += chunk.n_tokens;

  // 2. Execute: one forward pass over the plan.
  const auto step_start = Clock::now();
  std::span<const float> logits;
  try {
    logits = executor->execute(plan);
  } catch (const std::exception& e) {
    // Nothing of this step is usable: its requests fail, everyone else goes on.
    for (const ScheduledChunk& chunk : plan.chunks) fail_request(chunk.seq->id, e.what());
    publish_stats();
    return true;
  }
  counters.n_computed_tokens += uint64_t(plan.n_tokens);
  ++counters.n_steps;
  if (spec_policy) spec_policy->step_cost().observe(plan.n_tokens, seconds_between(step_start, Clock::now()));
  st.n_draft_tokens = plan.n_draft;
  const uint64_t accepted_before = counters.n_spec_accepted_tokens;

  // 3. Update: sample, append, register prefixes, fork, finish, emit.
  update(plan, logits);

  st.n_accepted_tokens = int64_t(counters.n_spec_accepted_tokens - accepted_before);
  st.seconds = seconds_between(step_start, Clock::now());
  publish_stats();
  std::function<void(const StepStats&)> obs;
  {
    std::lock_guard lock(mutex);
    obs = observer;
  }
  if (obs) obs(st);
  return true;
}

void Engine::Impl::begin(const StepPlan& plan, Clock::time_point now) {
  for (const ScheduledChunk& chunk : plan.chunks) {
    LiveSample& r = *active.at(chunk.seq->id);
    if (r.first_scheduled == Clock::time_point{} && r.request.report_start) {
      StreamEvent started;
      started.kind = StreamEvent::Kind::Started;
      started.request_id = r.request_id;
      started.index = r.index;
      deliver_quietly(r, started);
    }
    if (!chunk.seq->ever_scheduled || r.first_scheduled == Clock::time_point{}) r.first_scheduled = now;
  }
}

void Engine::Impl::update(const StepPlan& plan, std::span<const float> logits) {
  const auto n_vocab = size_t(model->config().n_vocab);
  // A verification chunk's computed count depends on what is accepted: verify() marks it.
  for (const ScheduledChunk& chunk : plan.chunks)
    if (chunk.n_draft == 0) scheduler->on_computed(chunk.seq, chunk.n_tokens);
  for (const ScheduledChunk& chunk : plan.chunks) {
    if (chunk.n_logits == 0) continue;
    LiveSample& r = *active.at(chunk.seq->id);
    if (chunk.n_draft > 0) {
      verify(r, chunk, logits.subspan(size_t(chunk.logits_row) * n_vocab, size_t(chunk.n_logits) * n_vocab));
      continue;
    }
    const auto rows = logits.subspan(size_t(chunk.logits_row) * n_vocab, size_t(chunk.n_logits) * n_vocab);
    if (r.request.wants_prompt_rows()) {
      const uint64_t seq_id = r.seq.id;
      deliver_prompt_logits(r, chunk, rows);
      if (!active.contains(seq_id)) continue;  // its callback threw
      if (chunk.completes && r.request.sampling.max_tokens == 0) {
        finish(r, FinishReason::Length);
        continue;
      }
    }
    if (!chunk.completes) continue;
    const auto row = rows.last(n_vocab);
    if (!all_finite(row)) {
      finish(r, FinishReason::Error, "non-finite logits");
      continue;
    }
    if (r.forks_pending == 0) {
      sample(r, row);
      continue;
    }
    // The prompt is computed: the other samples fork off here, sharing its blocks (copy-on-write).
    std::vector<LiveSample*> samples{&r};
    try {
      fork(r, samples);
    } catch (const std::exception& e) {
      fail_request(chunk.seq->id, e.what());
      continue;
    }
    for (LiveSample* s : samples) sample(*s, row);
  }
}

void Engine::Impl::deliver_prompt_logits(LiveSample& r, const ScheduledChunk& chunk, std::span<const float> rows) {
  const auto n_vocab = size_t(model->config().n_vocab);
  const int64_t rows_first = chunk.first + chunk.n_tokens - chunk.n_logits;  // position of rows[0]
  const int64_t from = std::max(rows_first, r.n_prompt_logits_sent);
  const int64_t to = std::min(chunk.first + chunk.n_tokens, r.seq.n_prompt);
  if (from >= to) return;
  StreamEvent ev;
  ev.request_id = r.request_id;
  ev.index = r.index;
  const auto part = rows.subspan(size_t(from - rows_first) * n_vocab, size_t(to - from) * n_vocab);
  if (r.request.prompt_logits) {
    ev.kind = StreamEvent::Kind::PromptLogits;
    ev.logits.assign(part.begin(), part.end());
  } else {
    // Row p is the distribution of prompt token p + 1; the last prompt position's is the first generated token's.
    ev.kind = StreamEvent::Kind::PromptLogprobs;
    std::vector<int32_t> scratch;
    for (int64_t p = from; p < to && p + 1 < r.seq.n_prompt; ++p) {
      ev.prompt_logprobs.push_back(position_logprobs(part.subspan(size_t(p - from) * n_vocab, n_vocab),
                                                     r.request.prompt[size_t(p + 1)],
                                                     size_t(r.request.prompt_logprobs), scratch));
      ev.prompt_logprobs.back().position = p + 1;
    }
  }
  r.n_prompt_logits_sent = to;
  if (ev.kind == StreamEvent::Kind::PromptLogprobs && ev.prompt_logprobs.empty()) return;
  const uint64_t seq_id = r.seq.id;
  try {
    r.on_event(ev);
  } catch (const std::exception& e) {
    fail_request(seq_id, e.what());
  }
}

std::shared_ptr<const grammar::Vocabulary> Engine::Impl::vocabulary_for_grammars() {
  std::call_once(grammar_vocab_once, [&] {
    grammar_vocab = make_grammar_vocabulary(model->tokenizer(), int32_t(model->config().n_vocab));
  });
  return grammar_vocab;
}

std::unique_ptr<SequenceConstraint> Engine::Impl::make_constraint(const Request& request) {
  if (!request.constraint) return nullptr;
  return std::make_unique<SequenceConstraint>(request.constraint, vocabulary_for_grammars(),
                                              request.sampling.ignore_eos);
}

void Engine::Impl::sample(LiveSample& r, std::span<const float> row) {
  const uint64_t seq_id = r.seq.id;
  try {
    const std::span<const float> allowed = allowed_row(r, row);
    if (allowed.empty()) return;
    emit_allowed(r, r.sampler.sample(allowed, r.seq.tokens).id, row);
  } catch (const std::exception& e) {
    fail_request(seq_id, e.what());
  }
}

std::span<const float> Engine::Impl::allowed_row(LiveSample& r, std::span<const float> row) {
  if (!r.constraint) return row;
  const std::span<const float> allowed = r.constraint->apply(row);
  if (allowed.empty()) {
    finish(r, FinishReason::Error,
           "the constrained output cannot go on (a nesting or ambiguity limit of the grammar engine was reached)");
  }
  return allowed;
}

bool Engine::Impl::emit_allowed(LiveSample& r, int32_t token, std::span<const float> row) {
  if (r.constraint && !r.constraint->accept(token)) {
    finish(r, FinishReason::Error, "the sampled token is outside the request's constraint");
    return false;
  }
  return emit(r, token, row);
}

bool Engine::Impl::emit(LiveSample& r, int32_t token, std::span<const float> row) {
  if (r.output.n_generated() == 0) r.first_token = Clock::now();
  StreamEvent ev;
  ev.kind = StreamEvent::Kind::Token;
  ev.request_id = r.request_id;
  ev.index = r.index;
  TokenOutcome out = r.output.accept(token, r.sampler, row, int64_t(r.seq.tokens.size()) + 1, r.seq.max_len, ev);
  if (out.keep) {
    r.seq.tokens.push_back(token);
    r.on_event(ev);
    // Complete, and nothing may follow: the output ends here (a stop string's Stop, or a Length on this very
    // token, says the same or less).
    if (r.constraint && r.constraint->finished() && out.finish != FinishReason::Stop) out.finish = FinishReason::Stop;
  }
  if (out.finish) {
    finish(r, *out.finish);
    return false;
  }
  return true;
}

void Engine::Impl::verify(LiveSample& r, const ScheduledChunk& chunk, std::span<const float> rows) {
  const auto n_vocab = size_t(model->config().n_vocab);
  const uint64_t seq_id = r.seq.id;
  const std::vector<int32_t> draft = std::move(r.seq.draft);
  const std::vector<std::vector<float>> q = std::move(r.draft_q);
  r.seq.draft.clear();
  r.draft_q.clear();
  VerifyOutcome out;
  out.alive = false;
  // A constrained sequence verifies against its mask at each guessed position: the matcher follows the tokens
  // as they are emitted, so row i is masked after the guesses before it were accepted. Both end r when the
  // constraint stops it, and verify_draft then returns at once.
  RowFilter allowed;
  if (r.constraint) allowed = [&](std::span<const float> row) { return allowed_row(r, row); };
  if (!all_finite(rows)) {
    finish(r, FinishReason::Error, "non-finite logits");
  } else {
    try {
      out = verify_draft(
          r.sampler, r.seq.tokens, rows, n_vocab, draft, q,
          [&](int32_t token, std::span<const float> row) { return emit_allowed(r, token, row); }, allowed);
    } catch (const std::exception& e) {
      fail_request(seq_id, e.what());
      out.alive = false;
    }
  }
  ++counters.n_spec_drafts;
  counters.n_spec_draft_tokens += uint64_t(chunk.n_draft);  // the draft as scheduled: draft.size()
  counters.n_spec_accepted_tokens += uint64_t(out.n_accepted);
  for (int64_t i = 0; i < out.n_accepted && size_t(i) < counters.n_spec_accepted_per_pos.size(); ++i)
    ++counters.n_spec_accepted_per_pos[size_t(i)];
  spec_policy->observe(int64_t(draft.size()), out.n_accepted);
  if (!out.alive) return;  // finished: its blocks are gone already
  // K/V is valid for the chunk's first token and the accepted guesses; the token appended last is uncomputed.
  scheduler->on_computed(&r.seq, 1 + out.n_accepted);
  scheduler->trim_blocks(&r.seq);
}

void Engine::Impl::propose() {
  if (!proposer) return;
  std::vector<DraftSlot> slots;
  int64_t n_decode = 0, n_tokens = 0;
  for (Sequence* seq : scheduler->running()) {
    seq->draft.clear();
    n_tokens += seq->n_uncomputed();
    if (!seq->decoding()) continue;
    ++n_decode;
    LiveSample& r = *active.at(seq->id);
    r.draft_q.clear();
    const int64_t room = seq->max_len - int64_t(seq->tokens.size()) - 1;
    if (!r.request.speculative || seq->all_logits || r.forks_pending > 0 || room <= 0) continue;
    slots.push_back({seq, &r.request.sampling, r.request.sampling.seed ^ kDraftSeedSalt, room, &r.draft_q});
  }
  if (slots.empty()) return;
  for (const Sequence* seq : scheduler->waiting()) {
    if (n_tokens >= options.scheduling.max_batched_tokens) break;
    n_tokens += seq->n_uncomputed();
  }
  n_tokens = std::min(n_tokens, options.scheduling.max_batched_tokens);
  const int64_t k = spec_policy->choose_k(int64_t(slots.size()), n_decode, n_tokens);
  if (k == 0) {
    ++counters.n_spec_steps_off;
    return;
  }
  for (DraftSlot& slot : slots) slot.k = std::min(slot.k, k);
  proposer->propose(slots);
}

double Engine::Impl::time_pass(int64_t n_tokens) {
  const int64_t bs = options.kv_block_size;
  std::vector<Sequence> seqs(static_cast<size_t>(n_tokens));
  StepPlan plan;
  for (int64_t i = 0; i < n_tokens; ++i) {
    Sequence& s = seqs[size_t(i)];
    s.tokens.assign(size_t(i % bs) + 1, 0);
    s.block_table.push_back(int32_t((i / bs) % blocks->n_blocks()));
    s.n_computed = i % bs;
    plan.chunks.push_back({&s, s.n_computed, 1, true, 1, i, 0});
    ++plan.n_tokens;
    ++plan.n_logits;
  }
  const auto start = Clock::now();
  executor->execute(plan);
  return seconds_between(start, Clock::now());
}

void Engine::Impl::loop() {
  for (;;) {
    {
      std::lock_guard lock(mutex);
      if (stopping) break;
    }
    try {
      if (step()) continue;
    } catch (const std::exception& e) {
      // A failure no single request owns (the scheduler, the cache): the requests in flight end with an error
      // and the engine goes on empty, rather than taking the process down.
      std::fprintf(stderr, "engine: step failed: %s\n", e.what());
      fail_all(e.what());
      continue;
    }
    // Nothing ran: sleep until new work, a cancel, a batching window closing or the nearest deadline.
    auto until = scheduler->wake_deadline();
    for (const auto& [id, r] : active) {
      if (r->request.deadline) until = std::min(until, *r->request.deadline);
    }
    std::unique_lock lock(mutex);
    auto ready = [&] { return stopping || !commands.empty(); };
    if (until == Clock::time_point::max()) {
      wake.wait(lock, ready);
    } else {
      wake.wait_until(lock, until, ready);
    }
  }
  // Shutdown: whatever is left ends as cancelled, so every caller gets its Finished event.
  apply_commands();
  std::vector<LiveSample*> left;
  for (auto& [id, r] : active) left.push_back(r.get());
  for (LiveSample* r : left) finish(*r, FinishReason::Cancelled, "the engine is shutting down");
  publish_stats();
}

void Engine::Impl::fail_all(const char* what) {
  std::vector<uint64_t> ids;
  for (auto& [id, r] : active) ids.push_back(id);
  for (uint64_t id : ids) fail_request(id, what);
}

void Engine::Impl::stop() {
  {
    std::lock_guard lock(mutex);
    stopping = true;
  }
  wake.notify_all();
  std::lock_guard lock(join_mutex);
  if (thread.joinable()) thread.join();
}

Engine::Engine(std::shared_ptr<const Model> model, EngineOptions options)
    : impl_(std::make_unique<Impl>(std::move(model), options, nullptr)) {}

Engine::Engine(std::shared_ptr<const Model> model, EngineOptions options, ThreadPool& pool)
    : impl_(std::make_unique<Impl>(std::move(model), options, &pool)) {}

Engine::~Engine() = default;

// Checks a request and builds its live state, on the caller's thread.
std::unique_ptr<LiveSample> Engine::Impl::prepare(Request request, EventCallback on_event) {
  check_request(request, limits);
  const auto n_prompt = int64_t(request.prompt.size());
  const int64_t max_len = std::min<int64_t>(n_prompt + request.sampling.max_tokens, n_ctx);
  if (!request.sampling.has_seed) {
    request.sampling.seed = (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
    request.sampling.has_seed = true;
  }
  auto r = std::make_unique<LiveSample>(std::move(request), std::move(on_event), model->tokenizer());
  r->constraint = make_constraint(r->request);  // on the caller's thread: the vocabulary is built once here
  r->submitted = Clock::now();
  r->seq.priority = r->request.priority;
  r->seq.tokens = r->request.prompt;
  r->seq.prefix_seed = r->request.cache_namespace;
  r->seq.n_prompt = n_prompt;
  r->seq.max_len = max_len;
  r->seq.all_logits = r->request.wants_prompt_rows();
  r->forks_pending = r->request.n - 1;
  return r;
}

// Gives a prepared request its id and queues it for the step loop; the caller holds `mutex`.
uint64_t Engine::Impl::enqueue_locked(std::unique_ptr<LiveSample> r) {
  if (stopping) throw EngineUnavailable("the engine is shutting down");
  const uint64_t id = next_id++;
  r->request_id = id;
  if (r->request.sampling.max_tokens == 0 && !r->request.wants_prompt_rows()) {
    // Nothing to generate: every sample finishes at once, without touching the cache.
    RequestStats stats;
    stats.n_prompt_tokens = int64_t(r->request.prompt.size());
    for (int32_t i = 0; i < r->request.n; ++i) r->on_event(finished_event(id, i, FinishReason::Length, {}, stats));
    return id;
  }
  n_live += size_t(r->request.n);
  idle_published = false;
  commands.push_back({std::move(r), 0});
  ++n_queued_submits;
  return id;
}

uint64_t Engine::submit(Request request, EventCallback on_event) {
  Impl& m = *impl_;
  auto r = m.prepare(std::move(request), std::move(on_event));
  uint64_t id;
  {
    std::lock_guard lock(m.mutex);
    id = m.enqueue_locked(std::move(r));
  }
  m.wake.notify_one();
  return id;
}

std::vector<uint64_t> Engine::submit_all(std::vector<std::pair<Request, EventCallback>> requests) {
  Impl& m = *impl_;
  std::vector<std::unique_ptr<LiveSample>> prepared;
  prepared.reserve(requests.size());
  for (auto& [request, on_event] : requests) prepared.push_back(m.prepare(std::move(request), std::move(on_event)));
  std::vector<uint64_t> ids;
  ids.reserve(prepared.size());
  {
    std::lock_guard lock(m.mutex);  // `stopping` cannot change under it: the first enqueue throws, or none does
    for (auto& r : prepared) ids.push_back(m.enqueue_locked(std::move(r)));
  }
  m.wake.notify_one();
  return ids;
}

void Engine::cancel(uint64_t request_id) {
  {
    std::lock_guard lock(impl_->mutex);
    impl_->commands.push_back({nullptr, request_id});
  }
  impl_->wake.notify_one();
}

void Engine::stop() { impl_->stop(); }

EngineStats Engine::stats() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->snapshot;
}

void Engine::set_step_observer(std::function<void(const StepStats&)> observer) {
  std::lock_guard lock(impl_->mutex);
  impl_->observer = std::move(observer);
}

bool Engine::wait_idle(std::chrono::milliseconds timeout) {
  std::unique_lock lock(impl_->mutex);
  return impl_->idle.wait_for(lock, timeout, [&] { return impl_->idle_published; });
}

const Model& Engine::model() const { return *impl_->model; }
const RequestLimits& Engine::limits() const { return impl_->limits; }
const EngineOptions& Engine::options() const { return impl_->options; }
std::shared_ptr<const grammar::Vocabulary> Engine::grammar_vocabulary() const { return impl_->vocabulary_for_grammars(); }

}  // namespace tessera
