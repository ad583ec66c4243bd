// The continuous-batching engine: many requests share one model; each step runs one forward pass over the
// tokens the scheduler picked (decodes and prefill chunks of many sequences), and sequences join and leave
// between steps. A dedicated thread runs the step loop; submit/cancel/stats are thread-safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/kv_sizing.h"
#include "engine/request.h"
#include "engine/speculative_options.h"
#include "core/kv_type.h"
#include "model/model.h"
#include "sched/scheduler.h"

namespace tessera {
namespace grammar {
class Vocabulary;
}

struct EngineOptions {
  int threads = 0;                 // 0: physical cores
  int64_t kv_block_size = kDefaultKvBlockSize;
  KvType kv_type = KvType::F16;    // storage of cached keys/values
  int64_t kv_blocks = 0;           // 0: derived from kv_cache_bytes
  uint64_t kv_cache_bytes = 0;     // 0 and kv_blocks 0: room for max_seqs sequences of n_ctx tokens (capped)
  int64_t n_ctx = 0;               // longest sequence (prompt + generation); 0: the model's training context
  bool prefix_caching = true;
  SchedulerOptions scheduling;     // policy, token budget, sequence limit: passed to the scheduler as they are
  SpeculativeOptions speculative;  // off by default; requests may opt out (Request::speculative)
};

struct EngineStats {
  int64_t n_waiting = 0;
  int64_t n_running = 0;
  int64_t kv_blocks_total = 0;
  int64_t kv_blocks_used = 0;      // referenced by a live sequence
  int64_t kv_blocks_cached = 0;    // unreferenced but holding a reusable prefix
  int64_t kv_tokens_held = 0;      // token positions written by live sequences
  uint64_t kv_bytes_per_token = 0;
  uint64_t n_steps = 0;
  uint64_t n_preemptions = 0;
  uint64_t n_prefix_cache_hit_tokens = 0;
  uint64_t n_prefix_cache_query_tokens = 0;
  uint64_t n_computed_tokens = 0;  // tokens that went through the forward pass
  // Speculative decoding (vLLM's spec_decode counters): verifications run (one per sequence and step with a
  // draft), draft tokens verified, draft tokens accepted, and accepted tokens by draft position.
  uint64_t n_spec_drafts = 0;
  uint64_t n_spec_draft_tokens = 0;
  uint64_t n_spec_accepted_tokens = 0;
  std::vector<uint64_t> n_spec_accepted_per_pos;  // [spec_tokens]
  uint64_t n_spec_steps_off = 0;   // steps with sequences that could speculate where the cost model said no
  int64_t spec_kv_blocks_used = 0; // the draft model's own KV blocks held now
  double spec_acceptance() const {
    return n_spec_draft_tokens ? double(n_spec_accepted_tokens) / double(n_spec_draft_tokens) : 0.0;
  }
  // Tokens each verification generated: the accepted ones plus the target's own.
  double spec_tokens_per_verification() const {
    return n_spec_drafts ? 1.0 + double(n_spec_accepted_tokens) / double(n_spec_drafts) : 0.0;
  }
  double kv_usage() const { return kv_blocks_total ? double(kv_blocks_used) / double(kv_blocks_total) : 0.0; }
};

// Per-step facts for metrics: how many sequences and tokens the step ran.
struct StepStats {
  int64_t n_seqs = 0;
  int64_t n_tokens = 0;
  int64_t n_prefill_tokens = 0;
  int64_t n_decode_tokens = 0;
  int64_t n_draft_tokens = 0;      // of n_tokens: draft tokens verified
  int64_t n_accepted_tokens = 0;   // of those: accepted
  double seconds = 0.0;
};

// Thrown by Engine::submit when the engine no longer takes requests (it is stopping): not the request's fault.
class EngineUnavailable : public Error {
 public:
  using Error::Error;
};

class Engine {
 public:
  // The pool is sized by engine_kv_blocks() (engine/kv_sizing.h), which callers check against the memory
  // available first (fit_kv_pool).
  Engine(std::shared_ptr<const Model> model, EngineOptions options);
  // Runs its forward passes on `pool` (which must outlive it) instead of a pool of its own.
  Engine(std::shared_ptr<const Model> model, EngineOptions options, ThreadPool& pool);
  ~Engine();  // cancels what is left and joins the step thread
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request. Returns its id; `on_event` later receives its tokens and exactly one Finished event per
  // sample. Throws InvalidRequest (nothing queued) when the request can never run (check_request against
  // limits(): invalid parameters, empty prompt, token id out of range, a prompt the context cannot hold, more
  // KV blocks than the whole pool); EngineUnavailable once stop() was called. A callback that throws ends its
  // own request with FinishReason::Error (a throw on the Finished event is reported and dropped); the engine
  // goes on.
  uint64_t submit(Request request, EventCallback on_event);
  // Queues several requests as one arrival: the step loop takes all of them in the same step, as an offline
  // batch job hands them over (submitted one by one, a static batch could form from the first few while the
  // rest were still coming). Every request is checked first: if one throws InvalidRequest, none is queued.
  // Returns their ids, in order.
  std::vector<uint64_t> submit_all(std::vector<std::pair<Request, EventCallback>> requests);
  // Ends a request at the next step with FinishReason::Cancelled; its KV blocks are freed then. Unknown or
  // finished ids are ignored. Submits and cancels take effect in the order they were made.
  void cancel(uint64_t request_id);
  // Stops the step loop and waits for it: what is queued or running ends Cancelled ("the engine is shutting
  // down"), and later submits throw EngineUnavailable. Idempotent; the destructor calls it.
  void stop();

  EngineStats stats() const;
  void set_step_observer(std::function<void(const StepStats&)> observer);

  // Blocks until nothing is waiting or running (or the timeout passes); returns true when idle.
  bool wait_idle(std::chrono::milliseconds timeout);

  const Model& model() const;
  // What requests must fit: the vocabulary, the usable context (the one the options ask for, else the
  // model's), the cache.
  const RequestLimits& limits() const;
  const EngineOptions& options() const;
  // The model's vocabulary as constrained decoding reads it, built on first use (about 45 ms for 151,936
  // tokens: a server asks for it at start-up). Masks of a grammar are cached per vocabulary instance.
  std::shared_ptr<const grammar::Vocabulary> grammar_vocabulary() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera
