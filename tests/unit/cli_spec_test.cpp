// The speculative-decoding flags of the `tessera` binary: good values generate the plain greedy text; bad ones
// (k out of range, an unknown method, a missing or incompatible draft model) end with one clear line and exit 1.
#include <gtest/gtest.h>

#include "cli_runner.h"
#include "test_paths.h"

namespace tessera {
namespace {

using tessera::testing::CommandResult;
using tessera::testing::expect_clean_error;
using tessera::testing::run_tessera;
using tessera::testing::shared_path;

constexpr const char* kRun = "run -p \"Once upon a time\" -n 24 --temp 0 ";

TEST(CliSpec, NgramAndDraftGiveThePlainGreedyText) {
  const CommandResult plain = run_tessera(kRun);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const CommandResult ngram = run_tessera(std::string(kRun) + "--spec ngram --spec-tokens 3");
  ASSERT_EQ(ngram.exit_code, 0) << ngram.err;
  EXPECT_EQ(ngram.out, plain.out);
  EXPECT_NE(ngram.err.find("speculative (ngram, k=3)"), std::string::npos) << ngram.err;
  // The embedded model drafting for itself (the same vocabulary, trivially), on every step: whether the cost
  // model would draft with a model as costly as the target is not what this checks.
  const CommandResult self = run_tessera(std::string(kRun) + "--spec-switch always --draft-model " +
                                         tessera::testing::source_path("models/stories260K.gguf"));
  ASSERT_EQ(self.exit_code, 0) << self.err;
  EXPECT_EQ(self.out, plain.out);
  EXPECT_NE(self.err.find("acceptance 1.000"), std::string::npos) << self.err;
}

TEST(CliSpec, BadValuesEndWithOneClearLine) {
  expect_clean_error(run_tessera(std::string(kRun) + "--spec ngram --spec-tokens 0"), "--spec-tokens 0 is out of range: 1..16");
  expect_clean_error(run_tessera(std::string(kRun) + "--spec ngram --spec-tokens 17"), "--spec-tokens 17 is out of range");
  expect_clean_error(run_tessera(std::string(kRun) + "--spec sometimes"), "unknown --spec 'sometimes'");
  expect_clean_error(run_tessera(std::string(kRun) + "--spec draft"), "--spec draft needs --draft-model FILE");
  expect_clean_error(run_tessera(std::string(kRun) + "--draft-model /nonexistent/draft.gguf"),
                     "--draft-model /nonexistent/draft.gguf: no such file");
  expect_clean_error(run_tessera(std::string(kRun) + "--draft-model " + shared_path("models/llama-2-tiny-random.gguf")),
                     "their vocabularies differ (512 tokens vs 32000)");
}

// The draft model's own KV cache (as many blocks as the target's) is part of serve's memory check: a pool
// that cannot fit names both models' sizes, and the flag to lower.
TEST(CliSpec, TheDraftsCacheCountsInServesMemoryCheck) {
  const CommandResult r = run_tessera("serve --port 0 --kv-blocks 100000000 --draft-model " +
                                      tessera::testing::source_path("models/stories260K.gguf"));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("the KV cache for --kv-blocks 100000000"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("with the draft model "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("Lower --kv-blocks"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("use a smaller --draft-model"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tessera
