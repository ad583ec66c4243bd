// An external reference for Hugging Face folders: llama-2-tiny-random.gguf written back out as the folder
// Hugging Face's converter would have produced (q/k rows un-permuted to rotate-half order, F16 safetensors, a
// SentencePiece-style tokenizer.json with merges listing every split of every piece by score), then served
// directly. It must tokenize the prompt and reproduce llama.cpp's logits and greedy ids exactly as the GGUF does,
// and its tokenizer.json must pass llama.cpp's llama-spm vectors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "core/thread_pool.h"
#include "engine/offline_engine.h"
#include "formats/gguf.h"
#include "hf_test_folder.h"
#include "model/model.h"
#include "test_paths.h"
#include "tokenizer/tokenizer_json.h"
#include "tokenizer_vectors.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::StRawTensor;
using testing::TempDir;

const char* const kSpace = "\xE2\x96\x81";

// UTF-8 character boundaries of a piece, so that splits never cut a character.
std::vector<size_t> char_starts(const std::string& s) {
  std::vector<size_t> starts;
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) starts.push_back(i);
  }
  return starts;
}

// tokenizer.json as Hugging Face's LlamaConverter writes it for a SentencePiece BPE model.
json spm_tokenizer_json(const Vocab& v) {
  json vocab = json::object();
  std::map<std::string, int32_t> ids;
  for (size_t id = 0; id < v.tokens.size(); ++id) {
    vocab[v.tokens[id]] = id;
    ids[v.tokens[id]] = int32_t(id);
  }
  // Every split of every normal piece into two pieces of the vocabulary, by the piece's score (highest first).
  std::vector<std::pair<float, std::string>> merges;
  for (size_t id = 0; id < v.tokens.size(); ++id) {
    if (v.kinds[id] != TokenKind::Normal) continue;
    const std::string& piece = v.tokens[id];
    for (size_t at : char_starts(piece)) {
      if (at == 0) continue;
      const std::string left = piece.substr(0, at), right = piece.substr(at);
      if (ids.count(left) && ids.count(right) && left.find(' ') == std::string::npos &&
          right.find(' ') == std::string::npos) {
        merges.emplace_back(v.scores[id], left + " " + right);
      }
    }
  }
  std::stable_sort(merges.begin(), merges.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  json merge_list = json::array();
  for (const auto& m : merges) merge_list.push_back(m.second);
  json added = json::array();
  for (int id : {0, 1, 2}) {
    added.push_back({{"id", id}, {"content", v.tokens[size_t(id)]}, {"special", true}, {"normalized", false},
                     {"single_word", false}, {"lstrip", false}, {"rstrip", false}});
  }
  return {{"version", "1.0"},
          {"added_tokens", added},
          {"normalizer",
           {{"type", "Sequence"},
            {"normalizers",
             {{{"type", "Prepend"}, {"prepend", kSpace}},
              {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kSpace}}}}}},
          {"pre_tokenizer", nullptr},
          {"model",
           {{"type", "BPE"}, {"vocab", vocab}, {"merges", merge_list}, {"unk_token", "<unk>"}, {"byte_fallback", true},
            {"fuse_unk", true}}}};
}

// The GGUF tensor as Hugging Face stores it: rows per head back from adjacent pairs to rotate-half order.
std::string hf_bytes(const gguf::TensorInfo& t, int64_t n_heads, int64_t head_dim) {
  std::string out(reinterpret_cast<const char*>(t.data), t.n_bytes);
  if (n_heads == 0) return out;
  const uint64_t row = t.n_bytes / t.n_rows();
  for (int64_t h = 0; h < n_heads; ++h) {
    for (int64_t j = 0; j < head_dim / 2; ++j) {
      std::memcpy(&out[(h * head_dim + j) * row], t.data + (h * head_dim + 2 * j) * row, row);
      std::memcpy(&out[(h * head_dim + head_dim / 2 + j) * row], t.data + (h * head_dim + 2 * j + 1) * row, row);
    }
  }
  return out;
}

void write_folder(const gguf::File& g, const std::string& dir) {
  const Vocab vocab = vocab_from_gguf(g);
  std::ofstream(fs::path(dir) / "tokenizer.json") << spm_tokenizer_json(vocab).dump();
  std::ofstream(fs::path(dir) / "tokenizer_config.json")
      << json({{"add_bos_token", true}, {"add_eos_token", false}, {"bos_token", "<s>"}, {"eos_token", "</s>"},
               {"unk_token", "<unk>"}, {"legacy", false}})
             .dump();
  std::ofstream(fs::path(dir) / "config.json")
      << json({{"architectures", {"LlamaForCausalLM"}}, {"hidden_size", 8}, {"intermediate_size", 32},
               {"num_hidden_layers", 1}, {"num_attention_heads", 2}, {"num_key_value_heads", 2},
               {"max_position_embeddings", 4096}, {"rms_norm_eps", 1e-5}, {"rope_theta", 10000.0},
               {"tie_word_embeddings", false}, {"vocab_size", 32000}, {"hidden_act", "silu"},
               {"rope_scaling", nullptr}, {"torch_dtype", "float16"}, {"bos_token_id", 1}, {"eos_token_id", 2}})
             .dump();
  const std::map<std::string, std::string> names = {
      {"token_embd.weight", "model.embed_tokens.weight"},   {"output_norm.weight", "model.norm.weight"},
      {"output.weight", "lm_head.weight"},                  {"blk.0.attn_norm.weight", "model.layers.0.input_layernorm.weight"},
      {"blk.0.attn_q.weight", "model.layers.0.self_attn.q_proj.weight"},
      {"blk.0.attn_k.weight", "model.layers.0.self_attn.k_proj.weight"},
      {"blk.0.attn_v.weight", "model.layers.0.self_attn.v_proj.weight"},
      {"blk.0.attn_output.weight", "model.layers.0.self_attn.o_proj.weight"},
      {"blk.0.ffn_norm.weight", "model.layers.0.post_attention_layernorm.weight"},
      {"blk.0.ffn_gate.weight", "model.layers.0.mlp.gate_proj.weight"},
      {"blk.0.ffn_up.weight", "model.layers.0.mlp.up_proj.weight"},
      {"blk.0.ffn_down.weight", "model.layers.0.mlp.down_proj.weight"}};
  std::vector<StRawTensor> tensors;
  for (const gguf::TensorInfo& t : g.tensors()) {
    ASSERT_TRUE(names.count(t.name)) << t.name;
    const bool qk = t.name == "blk.0.attn_q.weight" || t.name == "blk.0.attn_k.weight";
    tensors.push_back({names.at(t.name), t.type == TensorType::F16 ? "F16" : "F32",
                       std::vector<uint64_t>(t.dims.rbegin(), t.dims.rend()), hf_bytes(t, qk ? 2 : 0, 4)});
  }
  std::ofstream(fs::path(dir) / "model.safetensors", std::ios::binary) << testing::safetensors_raw(tensors);
}

TEST(HfGolden, Llama2TinyRandomFolderMatchesLlamaCpp) {
  const auto gguf_file = gguf::File::open(testing::shared_path("models/llama-2-tiny-random.gguf"));
  TempDir dir("llama2_golden");
  write_folder(*gguf_file, dir.path);
  const auto folder = Model::load(dir.path);
  const auto gguf = Model::from_gguf(gguf_file);
  EXPECT_EQ(folder->tokenizer().vocab().model, "llama");
  EXPECT_TRUE(folder->tokenizer().vocab().add_space_prefix);

  const json ref = json::parse(testing::read_file(testing::shared_path("fixtures/llama2_tiny_random_logits.json")));
  const auto prompt = folder->tokenizer().encode(ref["prompt"].get<std::string>(), true);
  ASSERT_EQ(prompt, ref["prompt_ids"].get<std::vector<int32_t>>());
  ThreadPool pool(2);
  OfflineEngine from_folder(folder, pool), from_gguf(gguf, pool);
  const std::vector<float> a = from_folder.prompt_logits(prompt), b = from_gguf.prompt_logits(prompt);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << "folder and GGUF logits differ";
  const float* last = a.data() + (prompt.size() - 1) * 32000;
  for (const auto& entry : ref["kv_f32_variant"]["last_pos_top20"]) {
    EXPECT_NEAR(last[entry[0].get<size_t>()], entry[1].get<float>(), 1e-4) << "token " << entry[0];
  }
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  greedy.max_tokens = 16;
  EXPECT_EQ(from_folder.generate(prompt, greedy).tokens, ref["greedy_ids"].get<std::vector<int32_t>>());
}

TEST(HfGolden, SentencePieceTokenizerJsonPassesLlamaSpmVectors) {
  const auto gguf_file = gguf::File::open(testing::shared_path("tokenizer-vectors/ggml-vocab-llama-spm.gguf"));
  TempDir dir("spm_json");
  const std::string path = dir.path + "/tokenizer.json";
  std::ofstream(path) << spm_tokenizer_json(vocab_from_gguf(*gguf_file)).dump();
  const auto tokenizer = make_tokenizer(vocab_from_tokenizer_json(path));
  EXPECT_EQ(tokenizer->vocab().bos, 1);
  EXPECT_EQ(tokenizer->vocab().eos, 2);
  EXPECT_EQ(tokenizer->vocab().unk, 0);
  EXPECT_EQ(tokenizer->vocab().kinds[3], TokenKind::Byte);  // <0x00>
  const auto cases = testing::read_vectors("llama-spm");
  ASSERT_EQ(cases.size(), 46u);
  for (const auto& c : cases) {
    const auto ids = tokenizer->encode(c.text, false);
    EXPECT_EQ(ids, c.ids) << "'" << c.text << "'\n got      " << testing::describe(ids) << "\n expected "
                          << testing::describe(c.ids);
    EXPECT_EQ(tokenizer->decode(ids), c.text);
  }
}

}  // namespace
}  // namespace tessera
