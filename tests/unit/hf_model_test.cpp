// Hugging Face folders: served directly vs converted to GGUF (identical logits), what the converted file holds
// (ecosystem tensor names and keys, the q/k permutation, rope_freqs, tokenizer and chat template), stop tokens,
// and broken folders through the CLI. The numerics against the fp64 reference are in reference_forward_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "core/error.h"
#include "core/json_file.h"
#include "core/thread_pool.h"
#include "engine/offline_engine.h"
#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "hf_test_folder.h"
#include "model/gguf_export.h"
#include "model/hf_model.h"
#include "model/model.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::CommandResult;
using testing::expect_clean_error;
using testing::HfSpec;
using testing::HfTestModel;
using testing::run_tessera;
using testing::TempDir;
using testing::write_hf_folder;

ThreadPool& pool() {
  static ThreadPool p(2);
  return p;
}

const std::vector<int32_t> kPrompt = {72, 101, 108, 108, 111, 256, 257, 258, 44, 32, 119, 261, 260, 5, 200};

std::vector<float> logits_of(const std::shared_ptr<Model>& model) {
  OfflineEngine generator(model, pool(), 32, 4);
  return generator.prompt_logits(kPrompt);
}

class HfRoundTrip : public ::testing::TestWithParam<const char*> {};

// HF folder -> GGUF (keeping the dtype) -> bit-identical logits: the converted file holds the bytes the folder is
// served from, q/k already permuted and norms widened the same way.
TEST_P(HfRoundTrip, ConvertedGgufGivesIdenticalLogits) {
  const bool qwen = std::string(GetParam()) == "qwen3";
  TempDir dir(std::string("roundtrip_") + GetParam());
  write_hf_folder(qwen ? testing::qwen3_test_spec() : testing::llama3_test_spec(), dir.path + "/model", 11);
  const std::string gguf_path = dir.path + "/model.gguf";
  const CommandResult r = run_tessera("convert " + dir.path + "/model -o " + gguf_path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("wrote " + gguf_path), std::string::npos) << r.out;

  const auto direct = Model::load(dir.path + "/model");
  const auto converted = Model::load(gguf_path);
  const std::vector<float> a = logits_of(direct), b = logits_of(converted);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << "logits differ";
  EXPECT_EQ(direct->tokenizer().vocab().tokens, converted->tokenizer().vocab().tokens);
  EXPECT_EQ(direct->tokenizer().eog_ids(), converted->tokenizer().eog_ids());

  // Another weight type: F32 widens exactly (only the kernel's summation order may differ; against the folder's
  // BF16 weights with fp32 activations, not the bf16 products they take by default); Q8_0 (weights and, in
  // Tessera's kernels, activations in 8 bits) stays within 10% in relative L2 on these untrained weights.
  const std::vector<float> exact =
      logits_of(Model::load(dir.path + "/model", LoadOptions{.bf16_products = Bf16Products::Off}));
  for (const char* type : {"f32", "q8_0"}) {
    const std::string typed = dir.path + "/model_" + type + ".gguf";
    ExportOptions options;
    options.matrix_type = std::string(type) == "f32" ? TensorType::F32 : TensorType::Q8_0;
    export_gguf(*open_model_file(dir.path + "/model"), typed, options, pool());
    const auto model = Model::load(typed);
    EXPECT_EQ(model->weights().layers[0].wq.type, *options.matrix_type);
    const std::vector<float> c = logits_of(model);
    double diff2 = 0, ref2 = 0;
    for (size_t i = 0; i < exact.size(); ++i) {
      diff2 += double(exact[i] - c[i]) * double(exact[i] - c[i]);
      ref2 += double(exact[i]) * double(exact[i]);
    }
    EXPECT_LT(std::sqrt(diff2 / ref2), std::string(type) == "f32" ? 1e-6 : 0.1) << type;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, HfRoundTrip, ::testing::Values("qwen3", "llama3"));

// The converted file in the ecosystem's terms: what llama.cpp's converter would have written.
TEST(HfConvert, ConvertedFileHasEcosystemNamesKeysAndPermutation) {
  TempDir dir("convert_keys");
  write_hf_folder(testing::llama3_test_spec(), dir.path + "/m", 5);
  const std::string out = dir.path + "/m.gguf";
  export_gguf(*open_model_file(dir.path + "/m"), out, {}, pool());
  const auto f = gguf::File::open(out);

  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->get_string("general.name"), "m");
  EXPECT_EQ(f->get_uint("general.file_type"), 1u);  // mostly F16
  EXPECT_EQ(f->get_uint("llama.embedding_length"), 64u);
  EXPECT_EQ(f->get_uint("llama.block_count"), 2u);
  EXPECT_EQ(f->get_uint("llama.feed_forward_length"), 96u);
  EXPECT_EQ(f->get_uint("llama.attention.head_count"), 4u);
  EXPECT_EQ(f->get_uint("llama.attention.head_count_kv"), 2u);
  EXPECT_EQ(f->get_uint("llama.attention.key_length"), 16u);
  EXPECT_EQ(f->get_uint("llama.attention.value_length"), 16u);
  EXPECT_EQ(f->get_uint("llama.rope.dimension_count"), 16u);
  EXPECT_EQ(f->get_uint("llama.context_length"), 64u);
  EXPECT_EQ(f->get_uint("llama.vocab_size"), 280u);
  EXPECT_FLOAT_EQ(float(f->get_float("llama.rope.freq_base")), 500000.0f);
  EXPECT_FLOAT_EQ(float(f->get_float("llama.attention.layer_norm_rms_epsilon")), 1e-5f);

  EXPECT_EQ(f->get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(f->get_string("tokenizer.ggml.pre"), "gpt-2");
  const auto& tokens = f->get("tokenizer.ggml.tokens").as_array();
  ASSERT_EQ(tokens.size(), 280u);  // padded to the embedding's rows, as llama.cpp expects
  EXPECT_EQ(tokens.string_at(261), "<|im_end|>");
  EXPECT_EQ(tokens.string_at(279), "[PAD279]");
  const auto& types = f->get("tokenizer.ggml.token_type").as_array();
  EXPECT_EQ(types.at(65).as_int(), 1);   // normal
  EXPECT_EQ(types.at(261).as_int(), 3);  // control
  EXPECT_EQ(types.at(279).as_int(), 5);  // unused
  EXPECT_EQ(f->get("tokenizer.ggml.merges").as_array().size(), 3u);
  EXPECT_EQ(f->find("tokenizer.ggml.scores"), nullptr);
  EXPECT_EQ(f->get_uint("tokenizer.ggml.eos_token_id"), 261u);
  EXPECT_EQ(f->get_uint("tokenizer.ggml.padding_token_id"), 259u);
  EXPECT_EQ(f->find("tokenizer.ggml.bos_token_id"), nullptr);
  EXPECT_FALSE(*f->find_bool("tokenizer.ggml.add_bos_token"));
  const json tokenizer_config = read_json_file(dir.path + "/m/tokenizer_config.json");
  EXPECT_EQ(f->get_string("tokenizer.chat_template"), tokenizer_config["chat_template"].get<std::string>());
  const auto& eog = f->get("tessera.eog_token_ids").as_array();
  ASSERT_EQ(eog.size(), 1u);
  EXPECT_EQ(eog.at(0).as_int(), 259);  // generation_config.json's second stop id; the first is the EOS
  // generation_config.json's sampling fields under llama.cpp's keys, and back through the converted file.
  EXPECT_FLOAT_EQ(float(f->get_float("general.sampling.temp")), 0.7f);
  EXPECT_EQ(f->get("general.sampling.top_k").as_int(), 20);
  EXPECT_FLOAT_EQ(float(f->get_float("general.sampling.top_p")), 0.8f);
  EXPECT_EQ(f->find("general.sampling.min_p"), nullptr);
  // A model of its own file: loading rewrites the matrices of the File it is given (the kernels' layouts).
  const SamplingDefaults d = Model::from_gguf(gguf::File::open(out))->sampling_defaults();
  EXPECT_EQ(d.temperature, 0.7f);
  EXPECT_EQ(d.top_k, 20);
  EXPECT_EQ(d.top_p, 0.8f);
  EXPECT_FALSE(d.min_p.has_value());
  EXPECT_FALSE(d.repetition_penalty.has_value());

  std::vector<std::string> names;
  for (const auto& t : f->tensors()) names.push_back(t.name);
  std::vector<std::string> expected = {"rope_freqs.weight", "token_embd.weight"};
  for (int l = 0; l < 2; ++l) {
    for (const char* n : {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up",
                          "ffn_down"}) {
      expected.push_back("blk." + std::to_string(l) + "." + n + ".weight");
    }
  }
  expected.push_back("output_norm.weight");
  expected.push_back("output.weight");
  EXPECT_EQ(names, expected);
  EXPECT_EQ(f->find_tensor("blk.0.attn_norm.weight")->type, TensorType::F32);  // 1-D tensors widened
  EXPECT_EQ(f->find_tensor("blk.0.attn_q.weight")->type, TensorType::F16);
  EXPECT_EQ(f->find_tensor("blk.0.attn_q.weight")->dims, (std::vector<uint64_t>{64, 64}));
  EXPECT_EQ(f->find_tensor("blk.1.attn_k.weight")->dims, (std::vector<uint64_t>{64, 32}));
  EXPECT_EQ(f->find_tensor("token_embd.weight")->dims, (std::vector<uint64_t>{64, 280}));

  // rope_freqs: the llama3 divisors, 1 for the fastest pair and `factor` for the slow ones.
  const auto* freqs = f->find_tensor("rope_freqs.weight");
  ASSERT_EQ(freqs->n_elements, 8u);
  const float* div = reinterpret_cast<const float*>(freqs->data);
  EXPECT_FLOAT_EQ(div[0], 1.0f);
  EXPECT_FLOAT_EQ(div[7], 8.0f);

  // q/k rows: GGUF row 2j (2j+1) of each head is Hugging Face row j (j + head_dim/2); v is untouched.
  const auto st = SafetensorsFolder::open(dir.path + "/m");
  const uint64_t row = 64 * 2;  // F16 row bytes
  for (const auto& [hf, gg, heads] : {std::tuple{"model.layers.1.self_attn.q_proj.weight", "blk.1.attn_q.weight", 4},
                                      std::tuple{"model.layers.0.self_attn.k_proj.weight", "blk.0.attn_k.weight", 2}}) {
    const uint8_t* src = st->find(hf)->data;
    const uint8_t* dst = f->find_tensor(gg)->data;
    for (int h = 0; h < heads; ++h) {
      for (int j = 0; j < 8; ++j) {
        EXPECT_EQ(0, std::memcmp(dst + (h * 16 + 2 * j) * row, src + (h * 16 + j) * row, row)) << gg << " " << h << " " << j;
        EXPECT_EQ(0, std::memcmp(dst + (h * 16 + 2 * j + 1) * row, src + (h * 16 + 8 + j) * row, row)) << gg;
      }
    }
  }
  EXPECT_EQ(0, std::memcmp(f->find_tensor("blk.0.attn_v.weight")->data,
                           st->find("model.layers.0.self_attn.v_proj.weight")->data, 32 * row));
}

TEST(HfConvert, QwenKeepsRowOrderAndTiesTheOutput) {
  TempDir dir("convert_qwen");
  write_hf_folder(testing::qwen3_test_spec(), dir.path + "/q", 6);
  const auto f = open_model_file(dir.path + "/q");
  EXPECT_EQ(f->get_string("general.architecture"), "qwen3");
  EXPECT_EQ(f->find_tensor("output.weight"), nullptr);
  EXPECT_EQ(f->find_tensor("rope_freqs.weight"), nullptr);
  EXPECT_NE(f->find_tensor("blk.1.attn_q_norm.weight"), nullptr);
  EXPECT_EQ(f->get_uint("qwen3.attention.key_length"), 12u);
  const auto st = SafetensorsFolder::open(dir.path + "/q");
  const auto* q = st->find("model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(0, std::memcmp(f->find_tensor("blk.0.attn_q.weight")->data, q->data, q->n_bytes));
  const auto model = Model::from_gguf(f);
  EXPECT_TRUE(model->config().tied_output);
  EXPECT_EQ(model->config().rope_layout, RopeLayout::NeoX);
  EXPECT_EQ(model->weights().layers[0].wq.type, TensorType::BF16);
}

TEST(HfFolder, TokenizerChatTemplateAndStopTokens) {
  TempDir dir("tokenizer");
  write_hf_folder(testing::qwen3_test_spec(), dir.path, 3);
  const auto model = Model::load(dir.path);
  const Tokenizer& tok = model->tokenizer();
  EXPECT_EQ(tok.vocab().eos, testing::kTinyImEnd);
  EXPECT_EQ(tok.eog_ids(), (std::vector<int32_t>{testing::kTinyEndOfText, testing::kTinyImEnd}));
  EXPECT_EQ(tok.encode("hello", false), (std::vector<int32_t>{256, 257, 'o'}));
  EXPECT_NE(model->file()->get_string("tokenizer.chat_template").find("<|im_start|>"), std::string::npos);

  // A template in chat_template.jinja, and none at all.
  fs::remove(fs::path(dir.path) / "tokenizer_config.json");
  std::ofstream(fs::path(dir.path) / "chat_template.jinja") << "{{ messages }}";
  EXPECT_EQ(Model::load(dir.path)->file()->get_string("tokenizer.chat_template"), "{{ messages }}");
  fs::remove(fs::path(dir.path) / "chat_template.jinja");
  EXPECT_EQ(Model::load(dir.path)->file()->find("tokenizer.chat_template"), nullptr);
}

TEST(HfFolder, SlidingWindowLimitsTheContext) {
  TempDir dir("mistral");
  HfSpec s;
  s.architecture = "MistralForCausalLM";
  s.sliding_window = 16;
  write_hf_folder(s, dir.path, 1);
  const auto model = Model::load(dir.path);
  EXPECT_EQ(model->config().n_ctx_train, 16);
  EXPECT_EQ(model->config().sliding_window, 16);
  EXPECT_EQ(model->file()->get_uint("llama.attention.sliding_window"), 16u);
  EXPECT_NO_THROW(OfflineEngine(model, pool(), 16));
  EXPECT_THROW(OfflineEngine(model, pool(), 17), Error);
  expect_clean_error(run_tessera("run -m " + dir.path + " -c 32 -n 2"), "16-token sliding attention window");
}

// ---- The CLI on folders ----

TEST(HfCli, RunAndInfoOnAFolder) {
  TempDir dir("cli_ok");
  write_hf_folder(testing::llama3_test_spec(), dir.path, 2);
  const CommandResult run = run_tessera("run -m " + dir.path + " -p hello -n 4 --temp 0 --ignore-eos");
  EXPECT_EQ(run.exit_code, 0) << run.err;
  // The folder's generation_config.json fills the sampling fields the command line left unset.
  EXPECT_NE(run.err.find("sampling defaults from the model: top_k 20, top_p 0.8\n"), std::string::npos) << run.err;
  const CommandResult sampled = run_tessera("run -m " + dir.path + " -p hello -n 2 --top-p 0.5 -s 1");
  EXPECT_EQ(sampled.exit_code, 0) << sampled.err;
  EXPECT_NE(sampled.err.find("sampling defaults from the model: temperature 0.7, top_k 20\n"), std::string::npos)
      << sampled.err;
  const CommandResult info = run_tessera("info -m " + dir.path);
  ASSERT_EQ(info.exit_code, 0) << info.err;
  for (const char* needle : {"Hugging Face model folder", "sampling defaults (generation_config.json): temperature 0.7, top_k 20, top_p 0.8", "LlamaForCausalLM -> GGUF architecture llama",
                             "2 safetensors files", "q/k rows permuted", "rope scaling: llama3",
                             "chat template: ", "stop tokens", "padded from 262 to vocab_size 280",
                             "blk.1.ffn_down.weight", "per-dimension rope_freqs"}) {
    EXPECT_NE(info.out.find(needle), std::string::npos) << needle << "\n" << info.out;
  }
}

// serve reads the folder's generation_config.json sampling fields and starts requests from them; stopped by
// SIGINT after two seconds (it drains and exits).
TEST(HfCli, ServeStartsRequestsFromTheFoldersSamplingDefaults) {
  TempDir dir("cli_serve_defaults");
  write_hf_folder(testing::qwen3_test_spec(), dir.path, 4);
  auto serve_log = [&](const std::string& extra) {
    const std::string cmd = "timeout -s INT 2 " + testing::tessera_binary() + " serve -m " + dir.path +
                            " --host 127.0.0.1 --port 0 " + extra + " 2>&1 </dev/null";
    return testing::run_shell(cmd).out;
  };
  const std::string with = serve_log("");
  EXPECT_NE(with.find("requests start from the model's sampling defaults (temperature 0.7, top_k 20, top_p 0.8;"),
            std::string::npos)
      << with;
  EXPECT_NE(with.find("tessera serve: stopped"), std::string::npos) << with;
  const std::string without = serve_log("--generation-config none");
  EXPECT_EQ(without.find("sampling defaults"), std::string::npos) << without;
  EXPECT_NE(without.find("tessera serve: stopped"), std::string::npos) << without;
  const CommandResult bad = run_tessera("serve -m " + dir.path + " --generation-config vllm");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--generation-config: vllm not in {model,none}"), std::string::npos) << bad.err;
}

TEST(HfCli, BrokenFoldersAreOneLineErrors) {
  TempDir t("cli_bad");
  const fs::path dir = t.path;
  auto fresh = [&](const HfSpec& s) {
    fs::remove_all(dir);
    write_hf_folder(s, dir.string(), 9);
  };
  HfSpec sharded = testing::llama3_test_spec();

  fs::create_directories(dir);
  expect_clean_error(run_tessera("run -m " + dir.string()), "not a Hugging Face model folder (no config.json)");

  fresh(sharded);
  fs::remove(dir / "model-00002-of-00002.safetensors");
  expect_clean_error(run_tessera("run -m " + dir.string()), "missing shard 'model-00002-of-00002.safetensors'");

  fresh(sharded);
  json config = read_json_file((dir / "config.json").string());
  config["architectures"] = {"GPT2LMHeadModel"};
  std::ofstream(dir / "config.json") << config.dump();
  expect_clean_error(run_tessera("info -m " + dir.string()),
                     "unsupported architecture 'GPT2LMHeadModel' (supported: LlamaForCausalLM, MistralForCausalLM, "
                     "Qwen2ForCausalLM, Qwen3ForCausalLM)");

  config["architectures"] = {"LlamaForCausalLM"};
  config["hidden_size"] = 48;
  std::ofstream(dir / "config.json") << config.dump();
  expect_clean_error(run_tessera("run -m " + dir.string()),
                     "tensor 'model.embed_tokens.weight' has shape [280, 64] but config.json implies [280, 48]");

  config["hidden_size"] = 64;
  config["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  std::ofstream(dir / "config.json") << config.dump();
  expect_clean_error(run_tessera("run -m " + dir.string()), "rope_scaling type 'yarn' is not supported");

  config["rope_scaling"] = nullptr;
  config["num_hidden_layers"] = 3;
  std::ofstream(dir / "config.json") << config.dump();
  expect_clean_error(run_tessera("run -m " + dir.string()), "missing tensor 'model.layers.2.input_layernorm.weight'");

  HfSpec single;
  fresh(single);
  {
    std::ofstream(dir / "model.safetensors", std::ios::binary)
        << testing::safetensors_bytes({{"model.embed_tokens.weight", {280, 32}, std::vector<float>(280 * 32)}}, "F32");
    // Rewrite the dtype in place: an F64 tensor of the same byte size.
    std::ifstream in(dir / "model.safetensors", std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    const size_t at = bytes.find("\"F32\"");
    bytes.replace(at, 5, "\"F64\"");
    const size_t shape = bytes.find("[280,32]");
    bytes.replace(shape, 8, "[140,32]");
    std::ofstream(dir / "model.safetensors", std::ios::binary) << bytes;
  }
  expect_clean_error(run_tessera("convert " + dir.string() + " -o " + (dir / "out.gguf").string()),
                     "tensor 'model.embed_tokens.weight' has dtype F64, which is not supported (F32, F16, BF16)");
  EXPECT_FALSE(fs::exists(dir / "out.gguf"));

  fresh(single);
  std::ofstream(dir / "model.safetensors", std::ios::binary)
      << testing::safetensors_bytes({{"model.embed_tokens.weight", {280, 32}, std::vector<float>(280 * 32)},
                                     {"model.layers.0.mlp.experts.0.weight", {2}, {1, 2}}},
                                    "F32");
  expect_clean_error(run_tessera("run -m " + dir.string()), "unexpected tensor 'model.layers.0.mlp.experts.0.weight'");

  fresh(single);
  std::ofstream(dir / "model.safetensors", std::ios::binary) << std::string("\x06\0\0\0\0\0\0\0{\"x\": ", 14);
  expect_clean_error(run_tessera("run -m " + dir.string()), "not valid JSON");

  expect_clean_error(run_tessera("convert -o " + (dir / "x.gguf").string()), "convert needs a model folder");
  expect_clean_error(run_tessera("convert " + dir.string() + " --type q3_k -o " + (dir / "x.gguf").string()),
                     "unknown --type 'q3_k'");
}

}  // namespace
}  // namespace tessera
