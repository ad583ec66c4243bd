// Whether an engine works, as a probe says: the warm-up inference (prefill, decode and a batch of several
// sequences) passes. A probe runs at start, again when a request failed inside the engine (non-finite logits,
// a failed step), and every `recheck` while the engine is marked bad; never more often than once a second (or a
// recheck, if shorter). One request's failure alone never marks
// the engine bad: a request whose own tokens produce NaN does not take a healthy replica out of the load
// balancer; only a failed probe does, and the next passing probe brings it back. The probes run on a thread of
// their own, never on the io thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "engine/engine.h"

namespace tessera::server {

class EngineHealth {
 public:
  // `on_change` runs on the probe thread after each probe that changed ok() (and after the first one).
  // `name` ("primary", "fallback") labels its log lines.
  EngineHealth(std::string name, std::shared_ptr<Engine> engine, std::chrono::milliseconds recheck,
               std::function<void()> on_change);
  ~EngineHealth();
  EngineHealth(const EngineHealth&) = delete;
  EngineHealth& operator=(const EngineHealth&) = delete;

  // False once a probe failed, until one passes. True before the first probe.
  bool ok() const { return ok_.load(); }
  // Whether a probe has finished.
  bool probed() const { return probed_.load(); }
  // Asks for a probe soon (coalesced: one runs at a time). Any thread; never blocks.
  void check_soon();
  // Runs a probe on the calling thread and records its result (start-up). Blocking.
  bool check_now();

 private:
  void loop();
  void record(bool ok);

  std::string name_;
  std::shared_ptr<Engine> engine_;
  std::chrono::milliseconds recheck_;
  std::function<void()> on_change_;
  std::atomic<bool> ok_{true};
  std::atomic<bool> probed_{false};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool wanted_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

// The warm-up inference: a short prompt through prefill and a few decode steps, alone and as a batch of four.
// True when every sequence finished without an error within two minutes.
bool probe_engine(Engine& engine);

}  // namespace tessera::server
