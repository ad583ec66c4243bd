// Shared by the engine tests: one request's collected events, the embedded model, small engine options, the
// leak check and the prompts the batch-invariance tests mix.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "model/model.h"

namespace tessera::testing {

struct Outcome {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;
  std::vector<PositionLogprobs> prompt_logprobs;  // with Request::prompt_logprobs
  std::string text;
  FinishReason reason = FinishReason::Error;
  RequestStats stats;
};

// Collects one request's events; wait() blocks until its Finished event.
class Collector {
 public:
  EventCallback callback() {
    return [this](const StreamEvent& ev) {
      std::lock_guard lock(mutex_);
      if (ev.kind == StreamEvent::Kind::Token) {
        outcome_.tokens.push_back(ev.token);
        outcome_.logits.push_back(ev.logits);
        outcome_.text += ev.text;
      } else if (ev.kind == StreamEvent::Kind::PromptLogprobs) {
        outcome_.prompt_logprobs.insert(outcome_.prompt_logprobs.end(), ev.prompt_logprobs.begin(),
                                        ev.prompt_logprobs.end());
      } else {
        outcome_.text += ev.text;
        outcome_.reason = ev.finish_reason;
        outcome_.stats = ev.stats;
        done_.set_value();
      }
    };
  }
  Outcome wait() {
    finished_.wait();
    std::lock_guard lock(mutex_);
    return outcome_;
  }
  size_t n_tokens() {
    std::lock_guard lock(mutex_);
    return outcome_.tokens.size();
  }

 private:
  std::mutex mutex_;
  Outcome outcome_;
  std::promise<void> done_;
  std::shared_future<void> finished_ = done_.get_future().share();
};

inline std::shared_ptr<const Model> model() {
  static std::shared_ptr<const Model> m = Model::load_embedded();
  return m;
}

inline Request greedy_request(const std::string& prompt, int max_tokens) {
  Request r;
  r.prompt = model()->tokenizer().encode(prompt, true);
  r.sampling.temperature = 0.0f;
  r.sampling.max_tokens = max_tokens;
  r.capture_logits = true;
  return r;
}

inline EngineOptions small_options() {
  EngineOptions o;
  o.threads = 2;
  o.kv_blocks = 256;
  o.scheduling.max_batched_tokens = 256;
  o.scheduling.max_seqs = 16;
  return o;
}

inline void expect_no_leaks(Engine& engine) {
  ASSERT_TRUE(engine.wait_idle(std::chrono::seconds(60)));
  // Stats are published after each step; the last step may still be publishing.
  for (int i = 0; i < 100 && engine.stats().kv_blocks_used != 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const EngineStats s = engine.stats();
  EXPECT_EQ(s.kv_blocks_used, 0) << "blocks still referenced after every request finished";
  EXPECT_EQ(s.n_running, 0);
  EXPECT_EQ(s.n_waiting, 0);
}

inline Outcome run_alone(const Request& request, EngineOptions options = small_options()) {
  Engine engine(model(), options);
  Collector c;
  engine.submit(request, c.callback());
  Outcome o = c.wait();
  expect_no_leaks(engine);
  return o;
}

// Same tokens and bit-identical logits rows (batch invariance: a sequence's logits do not depend on what else
// ran in its steps, nor on how its tokens were grouped into them).
inline void expect_same_outcome(const Outcome& got, const Outcome& want, const std::string& where) {
  ASSERT_EQ(got.tokens, want.tokens) << where;
  ASSERT_EQ(got.logits.size(), want.logits.size()) << where;
  for (size_t t = 0; t < got.logits.size(); ++t) {
    ASSERT_EQ(got.logits[t].size(), want.logits[t].size()) << where;
    ASSERT_EQ(0, std::memcmp(got.logits[t].data(), want.logits[t].data(), got.logits[t].size() * sizeof(float)))
        << "logits differ bitwise: " << where << ", token " << t;
  }
}

inline const std::vector<std::string> kPrompts = {
    "Once upon a time",
    "Lily and Ben went to the park. They saw a big dog",
    "Tom had a red ball",
    "The sun was shining and the birds were singing. A little girl named Sue wanted to play with her friends",
    "One day",
    "Max was a happy cat. He liked to jump and run. One day, Max saw a bird in the tree and",
};

}  // namespace tessera::testing
