// Warm-up, readiness, engine choice, in-flight requests and the drain.
#include "server/lifecycle.h"

#include <cstdio>

#include "server/generation.h"

namespace tessera::server {

Lifecycle::Lifecycle(std::shared_ptr<Engine> primary, std::shared_ptr<Engine> fallback,
                     std::chrono::milliseconds recheck, Metrics& metrics)
    : primary_(std::move(primary)), fallback_(std::move(fallback)), metrics_(metrics) {
  metrics_.set_ready(false);
  primary_health_ = std::make_unique<EngineHealth>("primary", primary_, recheck, [this] { update_ready_gauge(); });
  if (fallback_)
    fallback_health_ = std::make_unique<EngineHealth>("fallback", fallback_, recheck, [this] { update_ready_gauge(); });
}

bool Lifecycle::warm_up() {
  // The vocabulary constrained decoding reads, built here rather than on the first constrained request.
  try {
    primary_->grammar_vocabulary();
    if (fallback_) fallback_->grammar_vocabulary();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "warning: constrained decoding is unavailable with this vocabulary: %s\n", e.what());
  }
  const bool primary = primary_health_->check_now();
  const bool fallback = fallback_health_ && fallback_health_->check_now();
  if (!primary) {
    std::fprintf(stderr, "warning: the primary model failed warm-up%s\n",
                 fallback ? "; requests go to the fallback until it passes a probe" : "");
  }
  warmed_up_ = true;
  update_ready_gauge();
  return primary || fallback;
}

void Lifecycle::mark_warmed_up() {
  warmed_up_ = true;
  update_ready_gauge();
}

bool Lifecycle::ready() const {
  return warmed_up_.load() && (primary_health_->ok() || (fallback_health_ && fallback_health_->ok()));
}

void Lifecycle::update_ready_gauge() { metrics_.set_ready(ready()); }

Engine* Lifecycle::engine_for_new_requests() {
  if (primary_health_->ok()) return primary_.get();
  if (fallback_ && fallback_health_->ok()) return fallback_.get();
  return nullptr;
}

void Lifecycle::on_engine_error(const Engine* engine) {
  if (engine == primary_.get()) primary_health_->check_soon();
  else if (fallback_health_) fallback_health_->check_soon();
}

void Lifecycle::track(const std::shared_ptr<Generation>& generation) {
  if (live_.size() > 64 && live_.size() > 2 * size_t(n_in_flight_.load()))
    std::erase_if(live_, [](const std::weak_ptr<Generation>& w) { return w.expired(); });
  live_.push_back(generation);
}

void Lifecycle::cancel_all() {
  for (auto& w : live_)
    if (auto g = w.lock()) g->cancel();
}

DrainOnSignal::DrainOnSignal(boost::asio::io_context& ioc, Lifecycle& lifecycle, HttpServer& http,
                             std::chrono::milliseconds timeout)
    : ioc_(ioc), lifecycle_(lifecycle), http_(http), timeout_(timeout), signals_(ioc, SIGINT, SIGTERM), timer_(ioc) {
  signals_.async_wait([this](const boost::system::error_code& ec, int sig) { on_signal(ec, sig); });
}

void DrainOnSignal::on_signal(const boost::system::error_code& ec, int sig) {
  if (ec) return;
  if (draining_) {  // a second signal: stop now
    lifecycle_.cancel_all();
    deadline_ = Clock::now();
    cancelled_ = true;
  } else {
    draining_ = true;
    std::fprintf(stderr, "tessera serve: signal %d, draining %lld requests\n", sig,
                 static_cast<long long>(lifecycle_.n_in_flight()));
    deadline_ = Clock::now() + timeout_;
    http_.stop_accepting();
    lifecycle_.begin_drain();
    poll();
  }
  signals_.async_wait([this](const boost::system::error_code& e, int s) { on_signal(e, s); });
}

void DrainOnSignal::poll() {
  // Done when every request finished and every connection wrote its last bytes and closed.
  if (lifecycle_.n_in_flight() == 0 && http_.n_connections() == 0) return stop();
  const auto now = Clock::now();
  if (!cancelled_ && now >= deadline_) {
    std::fprintf(stderr, "tessera serve: drain timeout, cancelling %lld requests\n",
                 static_cast<long long>(lifecycle_.n_in_flight()));
    lifecycle_.cancel_all();
    cancelled_ = true;
  }
  if (cancelled_ && now >= deadline_ + std::chrono::seconds(5)) return stop();  // an engine that does not answer
  timer_.expires_after(std::chrono::milliseconds(20));
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) poll();
  });
}

void DrainOnSignal::stop() {
  http_.close_all();
  ioc_.stop();
}

}  // namespace tessera::server
