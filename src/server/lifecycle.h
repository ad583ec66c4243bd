// The serving process's life around its requests: the warm-up probe and readiness (/ready, the ready gauge, the
// 503 before it), which engine new requests go to (the primary while it passes its probes, else the fallback),
// the requests in flight, and the drain: new requests refused, in-flight ones finished or, at the drain
// timeout, cancelled (DrainOnSignal runs that for `tessera serve`).
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/engine.h"
#include "server/engine_health.h"
#include "server/http_server.h"
#include "server/metrics.h"

namespace tessera::server {

class Generation;

class Lifecycle {
 public:
  // `fallback` may be null. Keeps a reference to `metrics` (the ready gauge).
  Lifecycle(std::shared_ptr<Engine> primary, std::shared_ptr<Engine> fallback, std::chrono::milliseconds recheck,
            Metrics& metrics);

  // Probes each engine (a warm-up inference through prefill, decode and a batch); ready() turns true when one
  // passes. Blocking: run it off the io thread. Returns false when no engine passed.
  bool warm_up();
  // Ready without the warm-up probe, for an engine known to work whose probe could not run promptly (one that
  // batches by a long time window). Until warm_up() or this, generation requests get a 503.
  void mark_warmed_up();
  bool warmed_up() const { return warmed_up_.load(); }
  // Warmed up, and an engine passes its health check.
  bool ready() const;
  bool primary_ok() const { return primary_health_->ok(); }
  // Null without a fallback; its health otherwise.
  const EngineHealth* fallback_health() const { return fallback_health_.get(); }

  Engine& primary() { return *primary_; }
  Engine* fallback() { return fallback_.get(); }
  // The engine new requests go to: the primary while it passes its probes, else the fallback while it does;
  // null when neither does.
  Engine* engine_for_new_requests();
  // A request failed inside `engine`: probe it, so that one bad request does not condemn it but a broken engine
  // is found.
  void on_engine_error(const Engine* engine);

  // Drain (io thread): new generation requests get 503; in-flight ones go on. cancel_all() ends what is left.
  void begin_drain() { draining_ = true; }
  bool draining() const { return draining_; }
  void cancel_all();

  // Requests in flight: a Generation counts from its construction until it wrote its last bytes; live ones are
  // tracked (io thread) for cancel_all.
  void count_in() { n_in_flight_.fetch_add(1); }
  void count_out() { n_in_flight_.fetch_sub(1); }
  int64_t n_in_flight() const { return n_in_flight_.load(); }
  void track(const std::shared_ptr<Generation>& generation);

 private:
  void update_ready_gauge();

  std::shared_ptr<Engine> primary_;
  std::shared_ptr<Engine> fallback_;
  Metrics& metrics_;
  std::atomic<bool> warmed_up_{false};
  bool draining_ = false;
  std::atomic<int64_t> n_in_flight_{0};
  std::vector<std::weak_ptr<Generation>> live_;  // pruned as it grows
  // Last: their threads call back into the members above, so they stop first.
  std::unique_ptr<EngineHealth> primary_health_;
  std::unique_ptr<EngineHealth> fallback_health_;
};

// A serving process's graceful stop on SIGINT/SIGTERM: stop accepting, let in-flight requests finish, cancel
// them at `timeout`, and stop `ioc` once every request finished and every connection wrote its last bytes and
// closed (or 5 s after the cancel, for an engine that does not answer). A second signal cancels at once.
class DrainOnSignal {
 public:
  // Keeps references to all three; `ioc` runs the handlers.
  DrainOnSignal(boost::asio::io_context& ioc, Lifecycle& lifecycle, HttpServer& http,
                std::chrono::milliseconds timeout);

 private:
  void on_signal(const boost::system::error_code& ec, int sig);
  void poll();
  void stop();

  boost::asio::io_context& ioc_;
  Lifecycle& lifecycle_;
  HttpServer& http_;
  std::chrono::milliseconds timeout_;
  boost::asio::signal_set signals_;
  boost::asio::steady_timer timer_;
  bool draining_ = false;
  bool cancelled_ = false;
  Clock::time_point deadline_;
};

}  // namespace tessera::server
