// The `tessera` binary end to end: bad input ends with one clear line on stderr and a non-zero exit, never a
// crash; good input generates.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "core/cpu_features.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "core/kv_type.h"
#include "test_paths.h"

namespace tessera {
namespace {

using tessera::testing::shared_path;
using tessera::testing::source_path;
using tessera::testing::CommandResult;
using tessera::testing::expect_clean_error;
using tessera::testing::run_tessera;

std::string write_temp(const std::string& name, const std::string& bytes) {
  const auto path = std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()));
  std::ofstream(path, std::ios::binary) << bytes;
  return path.string();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST(Cli, RunGeneratesWithTheEmbeddedModel) {
  const CommandResult r = run_tessera("run -p \"Once upon a time\" -n 16 --temp 0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("Once upon a time, there was a little girl named Lily.", 0), 0u) << r.out;
  EXPECT_NE(r.err.find("tokens/s"), std::string::npos);
}

TEST(Cli, RunTakesLogitBiasesAndMinTokens) {
  // llama.cpp's spelling: TOKEN_ID+BIAS, repeatable. The tokens of " Lily" banned, the greedy story goes elsewhere.
  std::string ban;
  for (int32_t id : Model::load_embedded()->tokenizer().encode(" Lily", false)) ban += " -l " + std::to_string(id) + "-100";
  const CommandResult plain = run_tessera("run -p \"Once upon a time\" -n 16 --temp 0");
  ASSERT_NE(plain.out.find(" Lily"), std::string::npos) << plain.out;
  const CommandResult banned = run_tessera("run -p \"Once upon a time\" -n 16 --temp 0 --min-tokens 16" + ban);
  ASSERT_EQ(banned.exit_code, 0) << banned.err;
  EXPECT_EQ(banned.out.find(" Lily"), std::string::npos) << banned.out;
  EXPECT_NE(banned.err.find("generation:    16 tokens"), std::string::npos) << banned.err;
  for (const char* bad : {"5", "x+1", "5+", "5+101", "-3+1", "5*2", "5+nan"})
    expect_usage_error(run_tessera(std::string("run -n 1 --logit-bias ") + bad), "--logit-bias");
  expect_clean_error(run_tessera("run -n 2 --min-tokens 3"), "min_tokens (3) must be at most max_tokens (2)");
  expect_clean_error(run_tessera("run -n 2 -l 99999999+1"), "logit_bias: token id 99999999 is out of range");
}

TEST(Cli, EveryKvTypeGenerates) {
  for (KvType kv : kKvTypes) {
    const std::string type = kv_type_name(kv);
    const CommandResult r = run_tessera("run -p \"Once upon a time\" -n 8 --temp 0 --kv-type " + type);
    ASSERT_EQ(r.exit_code, 0) << type << ": " << r.err;
    EXPECT_EQ(r.out.rfind("Once upon a time, there was", 0), 0u) << type << ": " << r.out;
  }
  // Every command takes --kv-type through the same parser, with the registry's names.
  for (const char* command : {"run", "bench", "serve", "perplexity"}) {
    expect_usage_error(run_tessera(std::string(command) + " --kv-type int3"),
                       "--kv-type: unknown KV cache type 'int3' (" + kv_type_names() + ")");
  }
}

TEST(Cli, Int8ThresholdIsCheckedAndNotedWhereItDoesNothing) {
  expect_clean_error(run_tessera("run -n 1 --int8-threshold -1"), "invalid INT8 outlier threshold");
  expect_clean_error(run_tessera("perplexity -f " + shared_path("corpus/stories260K-samples.txt") +
                                 " --int8-threshold inf"),
                     "invalid INT8 outlier threshold");
  const CommandResult r = run_tessera("run -p \"Once upon a time\" -n 4 --temp 0 --int8-threshold 6");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("--int8-threshold has no effect"), std::string::npos) << r.err;  // the F32 embedded model
}

// BF16 weights take bf16 products by default; --bf16-products adds F16 ones and --fp32-activations takes them
// away: asking for both is refused. On the F32 embedded model neither changes a token.
TEST(Cli, Bf16ProductOptionsExcludeEachOtherAndNoteWhereTheyDoNothing) {
  const CommandResult both = run_tessera("run -n 1 --bf16-products --fp32-activations");
  EXPECT_NE(both.exit_code, 0);
  EXPECT_NE(both.err.find("--bf16-products excludes --fp32-activations"), std::string::npos) << both.err;
  const CommandResult plain = run_tessera("run -p \"Once upon a time\" -n 8 --temp 0");
  const CommandResult all = run_tessera("run -p \"Once upon a time\" -n 8 --temp 0 --bf16-products");
  const CommandResult exact = run_tessera("run -p \"Once upon a time\" -n 8 --temp 0 --fp32-activations");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  ASSERT_EQ(all.exit_code, 0) << all.err;
  ASSERT_EQ(exact.exit_code, 0) << exact.err;
  EXPECT_NE(all.err.find("--bf16-products has no effect"), std::string::npos) << all.err;
  EXPECT_EQ(plain.err.find("has no effect"), std::string::npos) << plain.err;  // the default asks for nothing
  EXPECT_EQ(all.out, plain.out);
  EXPECT_EQ(exact.out, plain.out);
}

// On a BF16 file (stories260K converted with --type bf16): with AVX-512 BF16 the model takes bf16 products by
// default and drifts slightly from its own file computed exactly (the perplexity --ref model always is);
// --fp32-activations computes exactly, and --bf16-products adds nothing to a file without F16 matrices.
TEST(Cli, Bf16FileTakesBf16ProductsByDefaultAndFp32ActivationsOnRequest) {
  const std::string file =
      (std::filesystem::temp_directory_path() / ("bf16_" + std::to_string(::getpid()) + ".gguf")).string();
  const CommandResult c = run_tessera("convert --llama2c " + shared_path("models/stories260K.bin") +
                                      " --tokenizer " + shared_path("models/tok512.bin") + " --type bf16 -o " + file);
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_FALSE(std::filesystem::exists(file + ".f32.tmp"));
  EXPECT_NE(run_tessera("info -m " + file).out.find("BF16"), std::string::npos);
  const auto perplexity = [&](const std::string& flags) {
    const CommandResult r = run_tessera("perplexity -m " + file + " --ref " + file + " -f " +
                                        shared_path("corpus/stories260K-samples.txt") + " --chunks 2 --json " + flags);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return std::make_pair(nlohmann::json::parse(r.out), r.err);
  };
  const bool native = active_isa() >= Isa::Avx512Bf16;
  const auto [exact, exact_err] = perplexity("--fp32-activations");
  EXPECT_EQ(exact["bf16_products"], false);
  EXPECT_EQ(exact["kl_mean"].get<double>(), 0.0);
  for (const std::string flags : {"", "--bf16-products"}) {
    SCOPED_TRACE(flags);
    const auto [fast, err] = perplexity(flags);
    EXPECT_EQ(fast["bf16_products"], native);
    if (native) {
      EXPECT_GT(fast["kl_mean"].get<double>(), 0.0);
      EXPECT_LT(fast["kl_mean"].get<double>(), 1e-3);
      EXPECT_NE(fast["perplexity"], exact["perplexity"]);
    } else {
      EXPECT_EQ(fast["kl_mean"].get<double>(), 0.0);
    }
    const char* note = flags.empty() ? "has no effect"
                       : native      ? "--bf16-products adds nothing"
                                     : "--bf16-products has no effect";
    EXPECT_EQ(err.find(note) != std::string::npos, !flags.empty()) << err;
  }
  std::filesystem::remove(file);
}

TEST(Cli, SameSeedSameText) {
  const CommandResult a = run_tessera("run -n 24 --temp 1.0 --seed 42");
  const CommandResult b = run_tessera("run -n 24 --temp 1.0 --seed 42");
  ASSERT_EQ(a.exit_code, 0);
  EXPECT_EQ(a.out, b.out);
}

TEST(Cli, InfoDescribesAModel) {
  const CommandResult r = run_tessera("info -m " + shared_path("models/llama-2-tiny-random.gguf"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("GGUF v3"), std::string::npos);
  EXPECT_NE(r.out.find("token_embd.weight"), std::string::npos);
  EXPECT_NE(r.out.find("32000 tokens"), std::string::npos);
}

TEST(Cli, MissingFile) { expect_clean_error(run_tessera("info -m /nonexistent/model.gguf"), "cannot open"); }

TEST(Cli, TruncatedModel) {
  const std::string model = read_file(source_path("models/stories260K.gguf"));
  for (size_t cut : {size_t(3), size_t(20), size_t(5000), model.size() / 2, model.size() - 1}) {
    const std::string path = write_temp("truncated.gguf", model.substr(0, cut));
    expect_clean_error(run_tessera("run -n 4 -m " + path), "");
    std::filesystem::remove(path);
  }
}

TEST(Cli, WrongMagicAndVersion) {
  std::string model = read_file(source_path("models/stories260K.gguf"));
  model[0] = 'X';
  const std::string bad_magic = write_temp("badmagic.gguf", model);
  expect_clean_error(run_tessera("info -m " + bad_magic), "not a GGUF file");
  model[0] = 'G';
  model[4] = 9;
  const std::string bad_version = write_temp("badversion.gguf", model);
  expect_clean_error(run_tessera("run -m " + bad_version), "unsupported GGUF version 9");
  std::filesystem::remove(bad_magic);
  std::filesystem::remove(bad_version);
}

TEST(Cli, PromptLongerThanTheContext) {
  expect_clean_error(run_tessera("run -c 8 -p \"Once upon a time there was a little girl\""), "context holds only 8");
}

TEST(Cli, VocabOnlyFileIsNotAModel) {
  expect_clean_error(run_tessera("run -m " + shared_path("tokenizer-vectors/ggml-vocab-llama-spm.gguf")),
                     "missing");
}

TEST(Cli, BadFlagsAreRejected) {
  EXPECT_NE(run_tessera("run --temp -1").exit_code, 0);
  EXPECT_NE(run_tessera("run --top-p 2").exit_code, 0);
  EXPECT_NE(run_tessera("frobnicate").exit_code, 0);
  expect_clean_error(run_tessera("run --repeat-penalty 0"), "repetition_penalty");
}

// A KV cache far beyond this machine's memory is refused before anything is allocated, naming the option.
TEST(Cli, KvCacheLargerThanMemoryIsRefused) {
  const std::string model = source_path("models/stories260K.gguf");
  // bench prints its progress ("bench: loading ...") before the error line.
  const CommandResult bench = run_tessera("bench -m " + model + " --offline --kv-cache-mb 1000000000");
  EXPECT_EQ(bench.exit_code, 1);
  EXPECT_NE(bench.err.find("\nerror: " + model + ": its weights (0.0 GiB) and the KV cache for --kv-cache-mb 1000000000"),
            std::string::npos)
      << bench.err;
  // The library states the sizes; the command line adds its own way out, naming the flag to lower.
  EXPECT_NE(bench.err.find(". Lower --kv-cache-mb, store the cache in 8 bits (--kv-type int8), or pass "
                           "--ignore-memory-check\n"),
            std::string::npos)
      << bench.err;
  expect_clean_error(run_tessera("serve -m " + model + " --port 0 --kv-blocks 100000000000"),
                     "and the KV cache for --kv-blocks 100000000000");
}

// --decode-depth adds batch-1 decode after the contexts asked for, and refuses one the model cannot hold (512
// positions for stories260K) as soon as the model is loaded.
TEST(Cli, BenchDecodesAtTheDepthsAskedFor) {
  const std::string model = source_path("models/stories260K.gguf");
  const CommandResult r = run_tessera("bench -m " + model + " --quick --json --decode-depth 64,200");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  const auto& depths = doc.at("decode_at_depth_tokens_per_s");
  EXPECT_EQ(depths.size(), 2u);
  EXPECT_GT(depths.at("64").get<double>(), 0.0);
  EXPECT_GT(depths.at("200").get<double>(), 0.0);
  EXPECT_FALSE(nlohmann::json::parse(run_tessera("bench -m " + model + " --quick --json").out)
                   .contains("decode_at_depth_tokens_per_s"));
  // 508 + the 5 positions of --quick's decode steps = 513 > 512; 507 fits.
  // bench prints its progress ("bench: loading ...") before the error line.
  const CommandResult deep = run_tessera("bench -m " + model + " --quick --decode-depth 508");
  EXPECT_EQ(deep.exit_code, 1);
  EXPECT_NE(deep.err.find("\nerror: --decode-depth 508: with the 5 positions of the decode steps it exceeds 512 (the "
                          "model's context)\n"),
            std::string::npos)
      << deep.err;
  EXPECT_EQ(run_tessera("bench -m " + model + " --quick --json --decode-depth 507").exit_code, 0);
  expect_usage_error(run_tessera("bench -m " + model + " --decode-depth 0"), "--decode-depth");
}

// The offline comparison prints, beside what it measured, the same workload's static and continuous schedules at
// the roofline of this machine's limits, probed in the same run.
TEST(Cli, OfflineBenchReportsTheWorkloadsRoofline) {
  const std::string model = source_path("models/stories260K.gguf");
  const CommandResult r = run_tessera("bench -m " + model + " --offline --json --requests 8 --prompt-tokens 8 "
                                      "--min-output 1 --max-output 32 --max-seqs 2 --scaling-seqs 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  const auto& roof = doc.at("roofline");
  EXPECT_GT(roof.at("bandwidth_gbs").get<double>(), 0.0);
  EXPECT_GT(roof.at("peak_gops").get<double>(), 0.0);
  EXPECT_EQ(roof.at("peak_kind"), "fp32");  // stories260K's weights are f32
  // Four waves of two, each held by its longer output, against two slots kept full: with these lengths (the
  // workload's seed) static takes 66 steps and continuous 51.
  const auto static_steps = roof.at("static_steps").get<int64_t>();
  const auto continuous_steps = roof.at("continuous_steps").get<int64_t>();
  EXPECT_EQ(static_steps, 66);
  EXPECT_EQ(continuous_steps, 51);
  EXPECT_DOUBLE_EQ(roof.at("continuous_vs_static_steps").get<double>(), double(static_steps) / double(continuous_steps));
  EXPECT_GT(roof.at("static_seconds").get<double>(), roof.at("continuous_seconds").get<double>());
  // The engine ran the steps the roofline schedules: the requests arrived as one, and the pool held them all.
  for (const auto& mode : doc.at("modes")) {
    if (mode.at("mode") == "static") {
      EXPECT_EQ(mode.at("steps").get<int64_t>(), static_steps);
    }
    if (mode.at("mode") == "continuous") {
      EXPECT_EQ(mode.at("steps").get<int64_t>(), continuous_steps);
    }
  }
}

// Regression: a calibration text without --method was ignored in silence (RTN). For INT4 it now picks GPTQ and
// says so; for a type no calibrated method applies to it is refused.
TEST(Cli, QuantizeWithACalibrationTextDefaultsToGptq) {
  const std::string text = shared_path("corpus/stories260K-samples.txt");
  const std::string out = (std::filesystem::temp_directory_path() / ("q4_default_" + std::to_string(::getpid()) + ".gguf")).string();
  const CommandResult r = run_tessera("quantize -q --type int4 --calibration " + text + " -o " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("int4 (gptq, group 32)"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("--calibration without --method: quantizing with GPTQ"), std::string::npos) << r.err;
  EXPECT_NE(run_tessera("info -m " + out).out.find("\"gptq\""), std::string::npos);
  const CommandResult rtn = run_tessera("quantize -q --type int4 -o " + out);
  EXPECT_NE(rtn.out.find("int4 (rtn, group 32)"), std::string::npos) << rtn.out + rtn.err;
  std::filesystem::remove(out);
  expect_clean_error(run_tessera("quantize -q --type int8 --calibration " + text + " -o " + out),
                     "--calibration is used by --method awq or gptq, which apply to --type int4 only");
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_NE(run_tessera("quantize --help").out.find("Default: gptq when --calibration is given"), std::string::npos);
}

TEST(Cli, ConvertRejectsAGarbageCheckpoint) {
  const std::string garbage = write_temp("garbage.bin", std::string(64, '\x7f'));
  const std::string out = (std::filesystem::temp_directory_path() / "never_written.gguf").string();
  expect_clean_error(run_tessera("convert --llama2c " + garbage + " --tokenizer " + shared_path("models/tok512.bin") +
                                 " -o " + out),
                     "implausible llama2.c header");
  EXPECT_FALSE(std::filesystem::exists(out));
  std::filesystem::remove(garbage);
}

}  // namespace
}  // namespace tessera
