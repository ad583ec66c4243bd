// Engine health probes.
#include "server/engine_health.h"

#include <algorithm>
#include <cstdio>

#include "core/thread_name.h"
#include "tokenizer/tokenizer.h"

namespace tessera::server {
namespace {

bool run_probe(Engine& engine, int n_seqs) {
  const Tokenizer& tok = engine.model().tokenizer();
  const std::vector<int32_t> prompt = tok.encode("Once upon a time, there was a warm-up request.", true);
  // Shared with the callbacks, which may outlive this frame when the wait times out.
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    int done = 0;
    bool ok = true;
  };
  auto st = std::make_shared<State>();
  for (int i = 0; i < n_seqs; ++i) {
    Request r;
    r.prompt = prompt;
    r.sampling.temperature = 0.0f;
    r.sampling.max_tokens = 4;
    r.sampling.ignore_eos = true;
    r.priority = -1000000;  // ahead of queued requests: a probe measures the engine, not the queue
    engine.submit(std::move(r), [st](const StreamEvent& ev) {
      if (ev.kind != StreamEvent::Kind::Finished) return;
      std::lock_guard lock(st->mu);
      st->ok = st->ok && ev.finish_reason != FinishReason::Error && ev.finish_reason != FinishReason::Cancelled;
      ++st->done;
      st->cv.notify_all();
    });
  }
  std::unique_lock lock(st->mu);
  if (!st->cv.wait_for(lock, std::chrono::seconds(120), [&] { return st->done == n_seqs; })) return false;
  return st->ok;
}

}  // namespace

bool probe_engine(Engine& engine) {
  try {
    return run_probe(engine, 1) && run_probe(engine, 4);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "health probe failed: %s\n", e.what());
    return false;
  }
}

EngineHealth::EngineHealth(std::string name, std::shared_ptr<Engine> engine, std::chrono::milliseconds recheck,
                           std::function<void()> on_change)
    : name_(std::move(name)), engine_(std::move(engine)), recheck_(recheck), on_change_(std::move(on_change)) {
  thread_ = std::thread([this] {
    name_this_thread("engine-health");
    loop();
  });
}

EngineHealth::~EngineHealth() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void EngineHealth::check_soon() {
  {
    std::lock_guard lock(mutex_);
    wanted_ = true;
  }
  wake_.notify_all();
}

bool EngineHealth::check_now() {
  const bool ok = probe_engine(*engine_);
  record(ok);
  return ok;
}

void EngineHealth::record(bool ok) {
  if (!ok) {
    std::fprintf(stderr, "tessera serve: the %s model failed its health probe; next probe in %.1f s\n",
                 name_.c_str(), double(recheck_.count()) / 1000.0);
  } else if (!ok_.load()) {
    std::fprintf(stderr, "tessera serve: the %s model passes its health probe again\n", name_.c_str());
  }
  const bool was_ok = ok_.exchange(ok), was_probed = probed_.exchange(true);
  const bool changed = was_ok != ok || !was_probed;
  {
    std::lock_guard lock(mutex_);  // the loop sees the new state before it waits again: no lost wake-up
  }
  wake_.notify_all();
  if (changed && on_change_) on_change_();
}

void EngineHealth::loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    // While good, probe only when asked; while bad, also every `recheck_`.
    bool timed_out = false;
    if (ok_.load()) wake_.wait(lock, [&] { return stopping_ || wanted_ || !ok_.load(); });
    else timed_out = !wake_.wait_for(lock, recheck_, [&] { return stopping_ || wanted_; });
    if (stopping_) return;
    if (!wanted_ && !timed_out) continue;  // just turned bad (check_now): start the recheck timer
    wanted_ = false;
    lock.unlock();
    const bool ok = probe_engine(*engine_);
    record(ok);
    lock.lock();
    // Probes run at the front of the engine's queue: however often requests fail (a client sending a token that
    // turns its own logits to NaN, again and again), at most one per second, or per recheck if shorter. While
    // the engine is bad the recheck timer spaces them.
    wake_.wait_for(lock, std::min(recheck_, std::chrono::milliseconds(1000)), [&] { return stopping_; });
  }
}

}  // namespace tessera::server
