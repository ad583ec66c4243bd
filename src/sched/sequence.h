// One request's scheduling state: its tokens, how many of them have K/V in the cache, and its blocks.
// There is no prefill phase and decode phase: a sequence has tokens computed and tokens total, and each
// step closes part of that gap (a prompt chunk, or the one token sampled last step).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "kv/block_manager.h"

namespace tessera {

enum class SeqStatus { Waiting, Running, Finished };

struct Sequence {
  uint64_t id = 0;
  int32_t priority = 0;        // lower first
  uint64_t arrival = 0;        // FCFS order within a priority class; kept across preemption
  uint64_t admitted = 0;       // when last admitted to running: the most recent is preempted first
  std::vector<int32_t> tokens; // prompt, then generated tokens
  int64_t n_prompt = 0;
  int64_t max_len = 0;         // the sequence never grows past this many tokens (prompt + max_tokens, <= n_ctx)
  int64_t n_computed = 0;      // tokens [0, n_computed) have K/V in the cache
  std::vector<int32_t> block_table;
  std::vector<BlockHash> block_hashes;  // hashes of the leading full blocks registered in the prefix cache
  BlockHash prefix_seed = 0;            // the hash chain of its blocks starts here (Request::cache_namespace)
  SeqStatus status = SeqStatus::Waiting;
  int32_t n_preemptions = 0;
  int64_t n_cached_prompt_tokens = 0;   // from the prefix cache at first admission
  bool ever_scheduled = false;
  // Every position's logits are wanted, not only the last one's (perplexity): such a sequence never reuses
  // cached prefix blocks, whose positions were never computed for it and so have no logits.
  bool all_logits = false;
  std::chrono::steady_clock::time_point enqueued_at{};  // when it (re)entered the waiting queue
  // Speculative decoding: tokens a proposer guessed to follow `tokens`, not yet part of the sequence. The
  // scheduler runs them after the last token as one verification chunk (ScheduledChunk::n_draft); the update
  // keeps the accepted prefix, and clears them every step.
  std::vector<int32_t> draft;

  int64_t n_uncomputed() const { return int64_t(tokens.size()) - n_computed; }
  // Decoding: only the token sampled last has no K/V yet (a proposer may guess what follows it).
  bool decoding() const { return n_computed >= n_prompt && n_uncomputed() == 1; }
  // The token at position i of a chunk: the sequence's own, then its draft.
  int32_t token_at(int64_t i) const {
    return i < int64_t(tokens.size()) ? tokens[size_t(i)] : draft[size_t(i - int64_t(tokens.size()))];
  }
};

}  // namespace tessera
