// Batch-1 decode against the read-bandwidth probe, taken in alternation a fraction of a second apart, so that
// each decode figure has a bandwidth figure of the same moment. On hosts whose bandwidth swings minute by
// minute (the Zen 4 guests of docs/performance.md read 31-37 GB/s in some minutes and 56-66 in others),
// `tessera bench`'s probes before and after its run may not describe the minute its decode steps ran in.
//
// Each round: one probe pass, then `steps` decode steps (their median), then another probe pass; a round whose
// two probes differ by more than 10 % is dropped (the host changed pace inside it). Printed per round: the
// bandwidth (mean of its two probes), the step's weight GB/s and their ratio. Then a least-squares fit of step
// time against 1 / bandwidth over the kept rounds, t = weight_bytes · k / bandwidth + c: c is the part of a step
// that does not shrink when memory gets faster (thread hand-offs, attention, element-wise work, and whatever
// waits on something other than the stream; no sampling runs here); k = 1 would be a stream as fast as the probe.
//
// Run: decode_pairs_bench MODEL.gguf [rounds=40] [steps=8] [threads=0] [context=32]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "bench/model_bench.h"
#include "bench/roofline.h"
#include "core/thread_pool.h"
#include "model/model.h"

namespace tessera {
namespace {

struct Round {
  double bandwidth_gbs, step_s;
};

int run(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.gguf [rounds=40] [steps=8] [threads=0] [context=32]\n", argv[0]);
    return 2;
  }
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 40;
  const int steps = argc > 3 ? std::atoi(argv[3]) : 8;
  const int threads = argc > 4 ? std::atoi(argv[4]) : 0;
  const int64_t context = argc > 5 ? std::atoll(argv[5]) : 32;
  if (rounds < 3 || steps < 1 || threads < 0 || threads > 1024 || context < 1 || context > (int64_t{1} << 20)) {
    std::fprintf(stderr, "rounds >= 3, steps >= 1, threads 0-1024, context 1-1048576\n");
    return 2;
  }
  const std::shared_ptr<const Model> model = Model::load(argv[1]);
  ThreadPool pool(threads);
  ReadBandwidthProbe probe(pool, size_t(256) << 20);
  const double weight_bytes = double(model->weight_bytes());

  // Every step writes position `context` again: each attends over the same context (one that grew would make
  // the later rounds' steps longer, whatever the bandwidth).
  PrefilledSequences sequence(model, pool, 1, context, 1);
  auto step = [&] { return sequence.step(context); };
  step();  // untimed: the workspace's first use
  probe.measure_gbs(1);

  std::vector<Round> kept;
  int dropped = 0;
  std::printf("round  bandwidth GB/s  step ms  weights GB/s  of bandwidth\n");
  for (int r = 0; r < rounds; ++r) {
    const double before = probe.measure_gbs(1);
    std::vector<double> times;
    for (int s = 0; s < steps; ++s) times.push_back(step());
    const double after = probe.measure_gbs(1);
    std::sort(times.begin(), times.end());
    const double t = times[times.size() / 2];
    const double bw = (before + after) / 2;
    const bool steady = std::abs(before - after) <= 0.1 * bw;
    const double gbs = weight_bytes / t * 1e-9;
    std::printf("%5d  %14.1f  %7.2f  %12.1f  %11.0f%%%s\n", r, bw, t * 1e3, gbs, 100 * gbs / bw,
                steady ? "" : "  (dropped: probes differ)");
    if (steady) {
      kept.push_back({bw, t});
    } else {
      ++dropped;
    }
  }
  if (kept.size() < 3) {
    std::printf("fewer than 3 steady rounds: no fit\n");
    return 1;
  }
  // t = a · (1 / bw) + c, least squares.
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const Round& k : kept) {
    const double x = 1.0 / (k.bandwidth_gbs * 1e9);
    sx += x, sy += k.step_s, sxx += x * x, sxy += x * k.step_s;
  }
  const double n = double(kept.size());
  const double denom = n * sxx - sx * sx;
  std::printf("%zu rounds kept, %d dropped; bandwidth %.1f-%.1f GB/s\n", kept.size(), dropped,
              std::min_element(kept.begin(), kept.end(), [](auto& a, auto& b) { return a.bandwidth_gbs < b.bandwidth_gbs; })->bandwidth_gbs,
              std::max_element(kept.begin(), kept.end(), [](auto& a, auto& b) { return a.bandwidth_gbs < b.bandwidth_gbs; })->bandwidth_gbs);
  if (std::abs(denom) < 1e-30) {
    std::printf("the bandwidth did not vary: no fit\n");
    return 0;
  }
  const double a = (n * sxy - sx * sy) / denom, c = (sy - a * sx) / n;
  std::printf("fit: step = %.3f x weights / bandwidth + %.2f ms (weights %.3f GB)\n", a / weight_bytes, c * 1e3,
              weight_bytes * 1e-9);
  for (double bw : {35.0, 60.0}) {
    const double t = a / (bw * 1e9) + c;
    std::printf("  at %.0f GB/s: %.2f ms a step, %.0f%% of bandwidth\n", bw, t * 1e3,
                100 * weight_bytes / t * 1e-9 / bw);
  }
  return 0;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  try {
    return tessera::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
