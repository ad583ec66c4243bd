// Sampler and stop strings: each truncation rule, the penalties, seeding, and the empirical distribution.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>

#include "engine/sampler.h"
#include "engine/stop_matcher.h"

namespace tessera {
namespace {

SamplingParams plain(float temperature = 1.0f) {
  SamplingParams p;
  p.temperature = temperature;
  return p;
}

std::map<int32_t, int> histogram(const SamplingParams& params, const std::vector<float>& logits, int n) {
  Sampler s(params);
  std::map<int32_t, int> h;
  for (int i = 0; i < n; ++i) ++h[s.sample(logits, {}).id];
  return h;
}

TEST(Sampler, GreedyTakesTheFirstMaximum) {
  Sampler s(plain(0.0f));
  EXPECT_EQ(s.sample(std::vector<float>{1, 5, 5, 2}, {}).id, 1);
  EXPECT_EQ(s.sample(std::vector<float>{-3, -1, -2}, {}).id, 1);
}

TEST(Sampler, FollowsTheSoftmaxDistribution) {
  const std::vector<float> logits{0.0f, 1.0f, 2.0f, -1.0f};
  double z = 0;
  for (float l : logits) z += std::exp(l);
  const int n = 200000;
  SamplingParams p = plain(1.0f);
  p.seed = 5;
  const auto h = histogram(p, logits, n);
  for (int32_t id = 0; id < 4; ++id) {
    const double expected = std::exp(logits[size_t(id)]) / z;
    const double got = double(h.count(id) ? h.at(id) : 0) / n;
    EXPECT_NEAR(got, expected, 4 * std::sqrt(expected * (1 - expected) / n)) << id;
  }
}

TEST(Sampler, TemperatureSharpensAndFlattens) {
  const std::vector<float> logits{0.0f, 1.0f};
  SamplingParams cold = plain(0.25f), hot = plain(4.0f);
  const auto hc = histogram(cold, logits, 20000), hh = histogram(hot, logits, 20000);
  EXPECT_GT(hc.at(1), 19000);                        // e^4 : 1
  EXPECT_NEAR(double(hh.at(1)) / 20000, 0.562, 0.02);  // e^0.25 / (1 + e^0.25)
}

TEST(Sampler, TopKTopPAndMinPTruncate) {
  const std::vector<float> logits{3.0f, 2.9f, 0.0f, -5.0f, 2.8f};
  SamplingParams k = plain();
  k.top_k = 2;
  for (const auto& [id, count] : histogram(k, logits, 5000)) EXPECT_TRUE(id == 0 || id == 1) << id;

  // Probabilities ~ [0.357, 0.323, 0.018, 0.0002, 0.292]: top_p 0.6 keeps the first two (0.357 + 0.323 >= 0.6).
  SamplingParams p = plain();
  p.top_p = 0.6f;
  for (const auto& [id, count] : histogram(p, logits, 5000)) EXPECT_TRUE(id == 0 || id == 1) << id;

  // min_p 0.1: keep p >= 0.0357 → ids 0, 1, 4.
  SamplingParams m = plain();
  m.min_p = 0.1f;
  const auto hm = histogram(m, logits, 20000);
  EXPECT_EQ(hm.count(2), 0u);
  EXPECT_EQ(hm.count(3), 0u);
  EXPECT_GT(hm.at(4), 0);
}

TEST(Sampler, PenaltiesFollowTheirDefinitions) {
  const std::vector<float> logits{2.0f, 1.9f, -1.0f};
  const std::vector<int32_t> history{0, 0, 2};
  SamplingParams rep = plain(0.0f);
  rep.repetition_penalty = 1.1f;  // 2.0 / 1.1 = 1.818 < 1.9
  EXPECT_EQ(Sampler(rep).sample(logits, history).id, 1);
  SamplingParams freq = plain(0.0f);
  freq.frequency_penalty = 0.06f;  // 2.0 - 2 * 0.06 = 1.88 < 1.9
  EXPECT_EQ(Sampler(freq).sample(logits, history).id, 1);
  freq.frequency_penalty = 0.04f;  // 1.92 > 1.9
  EXPECT_EQ(Sampler(freq).sample(logits, history).id, 0);
  SamplingParams pres = plain(0.0f);
  pres.presence_penalty = 0.11f;  // once, however often the token appeared
  EXPECT_EQ(Sampler(pres).sample(logits, history).id, 1);
  pres.presence_penalty = 0.09f;
  EXPECT_EQ(Sampler(pres).sample(logits, history).id, 0);
  // The window limits what the penalty sees: token 0 is outside the last 1 token.
  rep.repetition_window = 1;
  EXPECT_EQ(Sampler(rep).sample(logits, history).id, 0);
}

TEST(Sampler, SameSeedSameDrawsDifferentSeedDifferentDraws) {
  const std::vector<float> logits(50, 0.0f);
  SamplingParams a = plain(), b = plain();
  a.seed = b.seed = 99;
  Sampler sa(a), sb(b);
  SamplingParams c = plain();
  c.seed = 100;
  Sampler sc(c);
  int differ = 0;
  for (int i = 0; i < 100; ++i) {
    const int32_t x = sa.sample(logits, {}).id;
    EXPECT_EQ(x, sb.sample(logits, {}).id);
    differ += x != sc.sample(logits, {}).id;
  }
  EXPECT_GT(differ, 50);
}

TEST(Sampler, LogprobsAreANormalizedLogSoftmax) {
  Sampler s(plain(1.0f));
  const std::vector<float> logits{1.0f, 2.0f, 3.0f};
  const SampledToken t = s.sample(logits, {});
  const auto& lp = s.last_logprobs();
  double total = 0;
  for (float l : lp) total += std::exp(double(l));
  EXPECT_NEAR(total, 1.0, 1e-6);
  EXPECT_NEAR(t.logprob, lp[size_t(t.id)], 1e-5);
}

TEST(Sampler, ValidationNamesTheBadParameter) {
  SamplingParams p;
  p.temperature = -1;
  EXPECT_NE(validate(p).find("temperature"), std::string::npos);
  p = {};
  p.top_p = 1.5f;
  EXPECT_NE(validate(p).find("top_p"), std::string::npos);
  p = {};
  p.stop = {""};
  EXPECT_NE(validate(p).find("stop"), std::string::npos);
  p.stop = {std::string(kMaxStopBytes, 'x')};
  EXPECT_TRUE(validate(p).empty());
  p.stop = {"ok", std::string(kMaxStopBytes + 1, 'x')};  // the matcher rescans this much per token
  EXPECT_NE(validate(p).find("stop strings may be at most 256 bytes"), std::string::npos);
  EXPECT_TRUE(validate(SamplingParams{}).empty());
}

// Regression: 1/T overflowed for T = 1e-40 (a JSON number the API accepts), every logit became +-inf or NaN, the
// candidate sort got an inconsistent comparator and the draw fell through to the least likely token.
TEST(Sampler, TinyTemperaturesAreGreedy) {
  const std::vector<float> logits{1.0f, 3.0f, 2.0f, -1.0f};
  for (const float t : {1e-40f, 1e-30f, 1e-6f, 9.9e-5f}) {
    EXPECT_TRUE(plain(t).is_greedy()) << t;
    for (uint64_t seed = 0; seed < 20; ++seed) {
      SamplingParams p = plain(t);
      p.seed = seed;
      Sampler s(p);
      EXPECT_EQ(s.sample(logits, {}).id, 1) << t;
    }
  }
  EXPECT_FALSE(plain(1e-4f).is_greedy());
  Sampler cold(plain(1e-4f));  // the smallest sampled temperature: 1/T finite, the maximum almost surely
  EXPECT_EQ(cold.sample(logits, {}).id, 1);
  EXPECT_TRUE(std::isfinite(cold.logprob(1)));
}

// NaN is never drawn, +inf beats every finite logit, and nothing is undefined when all are NaN (the engine ends
// such a request with an error first; the sampler itself must still be safe, as in `tessera run`).
TEST(Sampler, NonFiniteLogitsNeverMakeTheDrawUndefined) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  Sampler greedy(plain(0.0f));
  EXPECT_EQ(greedy.sample(std::vector<float>{nan, 1.0f, 3.0f}, {}).id, 2);
  EXPECT_EQ(greedy.sample(std::vector<float>{1.0f, inf, nan, inf}, {}).id, 1);
  for (const auto& [id, count] : histogram(plain(1.0f), {nan, 1.0f, inf, -inf, 2.0f}, 2000)) EXPECT_EQ(id, 2);
  const auto two = histogram(plain(0.7f), {inf, 0.0f, inf}, 4000);  // two +inf: an even draw between them
  EXPECT_EQ(two.count(1), 0u);
  EXPECT_NEAR(two.at(0), 2000, 200);
  const auto h = histogram(plain(1.0f), {nan, 0.0f, 1.0f, nan}, 4000);
  EXPECT_EQ(h.count(0) + h.count(3), 0u);
  EXPECT_NEAR(double(h.at(2)) / 4000, std::exp(1.0) / (1 + std::exp(1.0)), 0.03);
  Sampler all_nan(plain(1.0f));
  const SampledToken t = all_nan.sample(std::vector<float>{nan, nan, nan}, {});
  EXPECT_TRUE(t.id >= 0 && t.id < 3);
  for (float lp : all_nan.last_logprobs()) EXPECT_FALSE(std::isnan(lp));
  Sampler s(plain(1.0f));
  s.sample(std::vector<float>{nan, 2.0f, -inf, 1.0f}, {});
  for (float lp : s.last_logprobs()) EXPECT_FALSE(std::isnan(lp));
  EXPECT_EQ(s.top_logprobs(4).front().first, 1);
}

TEST(Sampler, TopKIndicesMatchAFullSort) {
  std::mt19937 rng(7);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> v(size_t(1 + rng() % 300));
    for (float& x : v) {
      const uint32_t r = rng() % 40;
      x = r == 0 ? nan : r == 1 ? inf : r == 2 ? -inf : float(int(rng() % 16) - 8);  // many ties
    }
    std::vector<int32_t> order(v.size());
    std::iota(order.begin(), order.end(), 0);
    auto key = [&](int32_t i) { return std::isnan(v[size_t(i)]) ? -inf : v[size_t(i)]; };
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return key(a) > key(b); });
    std::vector<int32_t> got;
    for (const size_t k : {size_t(0), size_t(1), size_t(5), size_t(20), v.size(), v.size() + 3}) {
      top_k_indices(v, k, got);
      const size_t n = std::min(k, v.size());
      EXPECT_EQ(got, std::vector<int32_t>(order.begin(), order.begin() + ptrdiff_t(n))) << trial << " k=" << k;
    }
  }
}

TEST(Sampler, TopLogprobsAreTheLargestEntriesOfTheLogSoftmax) {
  SamplingParams p = plain(0.8f);
  p.repetition_penalty = 1.3f;
  Sampler s(p);
  std::vector<float> logits(1000);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = float((i * 7919) % 1000) / 100.0f;
  const std::vector<int32_t> history{3, 999, 999};
  s.sample(logits, history);
  const std::vector<float> lp = s.last_logprobs();
  const auto top = s.top_logprobs(20);
  ASSERT_EQ(top.size(), 20u);
  for (size_t i = 0; i < top.size(); ++i) {
    EXPECT_EQ(top[i].second, lp[size_t(top[i].first)]);
    if (i > 0) {
      EXPECT_GE(top[i - 1].second, top[i].second);
    }
  }
  const float kth = top.back().second;
  EXPECT_EQ(std::count_if(lp.begin(), lp.end(), [&](float x) { return x > kth; }), 19);
  EXPECT_EQ(s.logprob(42), lp[42]);
}

TEST(Sampler, LogitBiasIsAddedToTheLogits) {
  const std::vector<float> logits{1.0f, 0.0f, 0.0f, 0.5f};
  SamplingParams greedy = plain(0.0f);
  greedy.logit_bias = {{2, 1.5f}};
  EXPECT_EQ(Sampler(greedy).sample(logits, {}).id, 2);
  greedy.logit_bias = {{0, -100.0f}, {3, 0.25f}};
  EXPECT_EQ(Sampler(greedy).sample(logits, {}).id, 3);
  // Sampled: a bias of ln 3 makes token 1 three times as likely as token 2 (equal logits), and -100 takes
  // token 0 out in practice (e^-99 of the mass).
  SamplingParams p = plain(1.0f);
  p.seed = 11;
  p.logit_bias = {{0, -100.0f}, {1, std::log(3.0f)}};
  const int n = 40000;
  const auto h = histogram(p, {1.0f, 0.0f, 0.0f}, n);
  EXPECT_EQ(h.count(0), 0u);
  EXPECT_NEAR(double(h.at(1)) / n, 0.75, 0.015);
  // The reported log-probabilities are those of the biased distribution, and ids past the row are ignored
  // (a draft model's vocabulary may be smaller).
  p.logit_bias = {{1, std::log(3.0f)}, {7, 50.0f}};
  Sampler s(p);
  s.prepare(std::vector<float>{0.0f, 0.0f}, {});
  EXPECT_NEAR(s.probability(1), 0.75, 1e-6);
  EXPECT_NEAR(s.logprob(1), std::log(0.75), 1e-6);
}

TEST(Sampler, MinTokensHoldsBackTheEndTokensUntilReached) {
  // Prompt of 3 tokens; token 2 is the end token and the most likely.
  SamplingParams p = plain(0.0f);
  p.min_tokens = 2;
  p.max_tokens = 8;
  const EndTokens end{3, {2}};
  const std::vector<float> logits{0.0f, 1.0f, 5.0f};
  Sampler s(p, end);
  const std::vector<int32_t> prompt{7, 7, 7}, one{7, 7, 7, 1}, two{7, 7, 7, 1, 1};
  EXPECT_EQ(s.sample(logits, prompt).id, 1);
  EXPECT_EQ(s.sample(logits, one).id, 1);
  EXPECT_EQ(s.sample(logits, two).id, 2) << "min_tokens reached";
  // Sampled, the end token has no mass before min_tokens and its full share after.
  p.temperature = 1.0f;
  Sampler sampled(p, end);
  sampled.prepare(logits, one);
  EXPECT_EQ(sampled.probability(2), 0.0);
  sampled.prepare(logits, two);
  EXPECT_GT(sampled.probability(2), 0.9);
  // Where nothing but an end token is possible (a grammar that is complete), the end token wins.
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(Sampler(p, end).sample(std::vector<float>{-inf, -inf, 0.0f}, prompt).id, 2);
  p.temperature = 0.0f;
  EXPECT_EQ(Sampler(p, end).sample(std::vector<float>{-inf, -inf, 0.0f}, prompt).id, 2);
}

TEST(Sampler, EndTokensAreTheEogIdsUnlessIgnoredAndTheStopTokenIds) {
  SamplingParams p;
  p.stop_token_ids = {9, 4};
  const std::vector<int32_t> eog{2, 4};
  EXPECT_TRUE(end_tokens_for(p, eog, 5).ids.empty()) << "nothing to hold back without min_tokens";
  p.min_tokens = 3;
  const EndTokens end = end_tokens_for(p, eog, 5);
  EXPECT_EQ(end.n_prompt, 5);
  EXPECT_EQ(end.ids, (std::vector<int32_t>{2, 4, 9}));
  p.ignore_eos = true;
  EXPECT_EQ(end_tokens_for(p, eog, 5).ids, (std::vector<int32_t>{4, 9}));
}

TEST(Sampler, ValidationCoversTheTokenControls) {
  auto problem = [](auto change) {
    SamplingParams p;
    change(p);
    return validate(p);
  };
  EXPECT_EQ(problem([](SamplingParams& p) { p.logit_bias = {{1, 100.0f}, {5, -100.0f}}; }), "");
  EXPECT_NE(problem([](SamplingParams& p) { p.logit_bias = {{1, 100.5f}}; }), "");
  EXPECT_NE(problem([](SamplingParams& p) { p.logit_bias = {{1, std::nanf("")}}; }), "");
  EXPECT_NE(problem([](SamplingParams& p) { p.logit_bias = {{5, 1.0f}, {1, 1.0f}}; }), "") << "unsorted";
  EXPECT_NE(problem([](SamplingParams& p) { p.logit_bias = {{1, 1.0f}, {1, 2.0f}}; }), "") << "twice";
  EXPECT_NE(problem([](SamplingParams& p) { p.logit_bias = {{-1, 1.0f}}; }), "");
  EXPECT_NE(problem([](SamplingParams& p) { p.logit_bias.resize(kMaxLogitBiases + 1); }), "");
  EXPECT_NE(problem([](SamplingParams& p) { p.stop_token_ids = {-3}; }), "");
  EXPECT_NE(problem([](SamplingParams& p) { p.stop_token_ids.resize(kMaxStopTokenIds + 1); }), "");
  EXPECT_NE(problem([](SamplingParams& p) { p.min_tokens = -1; }), "");
  EXPECT_NE(problem([](SamplingParams& p) { p.min_tokens = p.max_tokens + 1; }).find("min_tokens"),
            std::string::npos);
  EXPECT_EQ(problem([](SamplingParams& p) { p.min_tokens = p.max_tokens; }), "");
}

TEST(StopMatcher, StopsCountOnlyOnceAllowedButStartsAreHeldBack) {
  StopMatcher m({"END"});
  EXPECT_EQ(m.push("a END b", false), "a END b");
  EXPECT_FALSE(m.stopped());
  EXPECT_EQ(m.push(" E", false), " ") << "a possible start is held back";
  EXPECT_EQ(m.push("ND tail", true), "");
  EXPECT_TRUE(m.stopped()) << "a stop string that ends once stops count is found";
  // One held back inside a possible start of a longer one never counts: it ended before stops did.
  StopMatcher nested({"b", "abc"});
  EXPECT_EQ(nested.push("a", false), "");
  EXPECT_EQ(nested.push("b", false), "") << "\"ab\" may start \"abc\"";
  EXPECT_EQ(nested.push("x", true), "abx");
  EXPECT_FALSE(nested.stopped());
  EXPECT_EQ(nested.push("b", true), "");
  EXPECT_TRUE(nested.stopped());
}

TEST(Sampler, PositionLogprobsRankAsVllmDoes) {
  // Ties share the worse rank (the tokens at least as likely, itself included); NaN ranks after every number.
  const float nan = std::nanf("");
  const std::vector<float> row{1.0f, 3.0f, 3.0f, nan, 0.0f};
  std::vector<int32_t> scratch;
  const PositionLogprobs two = position_logprobs(row, 2, 2, scratch);
  EXPECT_EQ(two.rank, 2);
  double z = 0;
  for (float x : row) z += x == x ? std::exp(double(x)) : 0.0;
  EXPECT_NEAR(two.logprob, 3.0 - std::log(z), 1e-6);
  ASSERT_EQ(two.top.size(), 2u);
  EXPECT_EQ(two.top[0].first, 1);
  EXPECT_EQ(two.top[1].first, 2);
  EXPECT_EQ(position_logprobs(row, 0, 0, scratch).rank, 3);
  EXPECT_EQ(position_logprobs(row, 4, 0, scratch).rank, 4);
  EXPECT_EQ(position_logprobs(row, 3, 0, scratch).rank, 5);
}

TEST(StopMatcher, HoldsBackPossibleStartsAndCutsAtTheStop) {
  StopMatcher m({"\n\n", "The end"});
  EXPECT_EQ(m.push("Hello\n"), "Hello");  // "\n" may start "\n\n"
  EXPECT_EQ(m.push("world"), "\nworld");
  EXPECT_EQ(m.push(" The e"), " ");
  EXPECT_EQ(m.push("nd of it"), "");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.push("more"), "");
}

TEST(StopMatcher, FlushReleasesTheTail) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(m.push("abcST"), "abc");
  EXPECT_EQ(m.flush(), "ST");
  EXPECT_FALSE(m.stopped());
}

}  // namespace
}  // namespace tessera
