// Warm-up, readiness, engine choice, in-flight requests.
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

}  // namespace tessera::server
