// A measured model of how long a forward pass over n tokens takes: a table of calibration timings at start-up
// (n = 1, 2, 4, ... tokens), interpolated piecewise-linearly, and scaled by a moving average of observed/predicted
// step times so that it follows the machine's current speed (other processes, frequency, cache state).
//
// Why measured, not a constant: whether verifying k extra tokens is "nearly free" depends on the model, its
// weight type, the ISA level, the thread count and the batch — on a CPU a batch-1 step is bound by reading the
// weights and the extra rows ride along, until the matmuls turn compute-bound; where that happens differs by
// an order of magnitude between a 260K-parameter model and TinyLlama, and between INT4 and F16 weights.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace tessera {

class StepCost {
 public:
  // Times `run(n)` (one forward pass over n tokens; returns its seconds) for n = 1, 2, 4, ... up to max_tokens
  // (and max_tokens itself), the fastest of `repeats` runs each after one warm-up pass.
  void calibrate(const std::function<double(int64_t n_tokens)>& run, int64_t max_tokens, int repeats = 2);
  bool calibrated() const { return !n_.empty(); }

  // Predicted seconds of a pass over n tokens (linear past the largest calibrated n).
  double seconds(int64_t n_tokens) const;
  // A pass over n tokens took `seconds`: nudges the scale toward what the machine does now.
  void observe(int64_t n_tokens, double seconds);

 private:
  double table_seconds(int64_t n_tokens) const;

  std::vector<int64_t> n_;      // ascending
  std::vector<double> t_;       // calibrated seconds at n_
  double scale_ = 1.0;          // observed / calibrated, moving average
};

}  // namespace tessera
