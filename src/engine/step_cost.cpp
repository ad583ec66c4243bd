// Calibration table, interpolation, drift correction.
#include "engine/step_cost.h"

#include <algorithm>
#include <cmath>

namespace tessera {

void StepCost::calibrate(const std::function<double(int64_t)>& run, int64_t max_tokens, int repeats) {
  n_.clear();
  t_.clear();
  max_tokens = std::max<int64_t>(1, max_tokens);
  run(1);  // warm-up: first-touch page faults of the weights and workspaces are no step's cost
  for (int64_t n = 1;; n = std::min(n * 2, max_tokens)) {
    double best = run(n);
    for (int r = 1; r < repeats; ++r) best = std::min(best, run(n));
    // Timing noise must not make a larger pass look cheaper than a smaller one.
    if (!t_.empty()) best = std::max(best, t_.back());
    n_.push_back(n);
    t_.push_back(best);
    if (n == max_tokens) break;
  }
  scale_ = 1.0;
}

double StepCost::table_seconds(int64_t n) const {
  if (n_.empty()) return double(n);  // uncalibrated: proportional to the tokens (never speculates for free)
  if (n <= n_.front()) return t_.front();
  for (size_t i = 1; i < n_.size(); ++i) {
    if (n <= n_[i]) {
      const double f = double(n - n_[i - 1]) / double(n_[i] - n_[i - 1]);
      return t_[i - 1] + f * (t_[i] - t_[i - 1]);
    }
  }
  if (n_.size() == 1) return t_.back() * double(n) / double(n_.back());
  // Past the table: the slope of its last segment (compute-bound by then).
  const size_t i = n_.size() - 1;
  const double slope = (t_[i] - t_[i - 1]) / double(n_[i] - n_[i - 1]);
  return t_[i] + slope * double(n - n_[i]);
}

double StepCost::seconds(int64_t n_tokens) const { return scale_ * table_seconds(n_tokens); }

void StepCost::observe(int64_t n_tokens, double seconds) {
  if (n_.empty() || !(seconds > 0.0)) return;
  const double ratio = seconds / table_seconds(n_tokens);
  // Slow enough that one step disturbed by another process moves little; a lasting change wins in ~50 steps.
  if (std::isfinite(ratio)) scale_ = 0.95 * scale_ + 0.05 * std::clamp(ratio, 0.25, 4.0);
}

}  // namespace tessera
