// Test-side writer of Hugging Face folders. Written from the formats' definitions (safetensors header, config.json
// fields, tokenizer.json layout), sharing no code with the loader under test except the fp16/bf16 rounding.
#include "hf_test_folder.h"

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numbers>
#include <random>

#include <fmt/format.h>

#include "core/fp16.h"

namespace tessera::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

float round_to(const std::string& dtype, float v) {
  if (dtype == "F16") return fp16_to_fp32(fp32_to_fp16(v));
  if (dtype == "BF16") return bf16_to_fp32(fp32_to_bf16(v));
  return v;
}

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += char(cp);
  } else if (cp < 0x800) {
    s += char(0xC0 | (cp >> 6));
    s += char(0x80 | (cp & 0x3F));
  } else {
    s += char(0xE0 | (cp >> 12));
    s += char(0x80 | ((cp >> 6) & 0x3F));
    s += char(0x80 | (cp & 0x3F));
  }
  return s;
}

// GPT-2's byte -> printable code point table: printable Latin-1 bytes stand for themselves, the rest take
// U+0100 onwards in byte order.
std::vector<std::string> byte_symbols() {
  std::vector<std::string> symbols(256);
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    symbols[b] = utf8(printable ? b : next++);
  }
  return symbols;
}

// Hugging Face's llama3 rope: new inv_freq per pair, written as the divisor old / new.
std::vector<double> llama3_divisors(const json& rs, int64_t head_dim, double theta) {
  const double factor = rs["factor"], low = rs["low_freq_factor"], high = rs["high_freq_factor"];
  const double old_ctx = rs["original_max_position_embeddings"];
  std::vector<double> divisors;
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    const double inv_freq = 1.0 / std::pow(theta, double(2 * i) / double(head_dim));
    const double wavelen = 2 * std::numbers::pi / inv_freq;
    double scaled = inv_freq;
    if (wavelen > old_ctx / low) scaled = inv_freq / factor;
    if (wavelen <= old_ctx / low && wavelen >= old_ctx / high) {
      const double smooth = (old_ctx / wavelen - low) / (high - low);
      scaled = (1 - smooth) * inv_freq / factor + smooth * inv_freq;
    }
    divisors.push_back(inv_freq / scaled);
  }
  return divisors;
}

}  // namespace

std::string safetensors_raw(const std::vector<StRawTensor>& tensors) {
  json header = json::object();
  header["__metadata__"] = {{"format", "pt"}};
  std::string data;
  for (const StRawTensor& t : tensors) {
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data += t.bytes;
  }
  std::string text = header.dump();
  while (text.size() % 8 != 0) text += ' ';
  const uint64_t n = text.size();
  return std::string(reinterpret_cast<const char*>(&n), 8) + text + data;
}

std::string safetensors_bytes(const std::vector<StTensor>& tensors, const std::string& dtype) {
  std::vector<StRawTensor> raw;
  for (const StTensor& t : tensors) {
    std::string bytes;
    for (float v : t.values) {
      if (dtype == "F32") {
        bytes.append(reinterpret_cast<const char*>(&v), 4);
      } else {
        const uint16_t h = dtype == "F16" ? fp32_to_fp16(v) : fp32_to_bf16(v);
        bytes.append(reinterpret_cast<const char*>(&h), 2);
      }
    }
    raw.push_back({t.name, dtype, t.shape, std::move(bytes)});
  }
  return safetensors_raw(raw);
}

void write_tiny_tokenizer(const std::string& dir) {
  const std::vector<std::string> bytes = byte_symbols();
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[bytes[size_t(b)]] = b;
  vocab["he"] = 256;
  vocab["ll"] = 257;
  vocab[bytes[' '] + "t"] = 258;
  json added = json::array();
  const char* specials[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  for (int i = 0; i < 3; ++i) {
    added.push_back({{"id", kTinyEndOfText + i}, {"content", specials[i]}, {"special", true}, {"single_word", false},
                     {"lstrip", false}, {"rstrip", false}, {"normalized", false}});
  }
  const json tokenizer = {
      {"version", "1.0"},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model",
       {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"h e", "l l", bytes[' '] + " t"}}, {"byte_fallback", false}}}};
  write_text(fs::path(dir) / "tokenizer.json", tokenizer.dump());
  const json config = {
      {"eos_token", "<|im_end|>"},
      {"bos_token", nullptr},
      {"pad_token", "<|endoftext|>"},
      {"chat_template",
       "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
       "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"}};
  write_text(fs::path(dir) / "tokenizer_config.json", config.dump());
  write_text(fs::path(dir) / "generation_config.json",
             json({{"eos_token_id", {kTinyImEnd, kTinyEndOfText}},
                   {"do_sample", true},
                   {"temperature", 0.7},
                   {"top_k", 20},
                   {"top_p", 0.8}})
                 .dump());
}

HfSpec hf_spec(const char* architecture, int64_t n_embd, int64_t n_head, int64_t n_head_kv, int64_t head_dim, bool tied,
               const char* dtype) {
  HfSpec s;
  s.architecture = architecture;
  s.n_embd = n_embd;
  s.n_head = n_head;
  s.n_head_kv = n_head_kv;
  s.head_dim = head_dim;
  s.tied = tied;
  s.dtype = dtype;
  return s;
}

HfSpec qwen3_test_spec() {
  HfSpec s = hf_spec("Qwen3ForCausalLM", 32, 4, 2, 12, true, "BF16");
  s.rope_theta = 1e6;
  s.rms_eps = 1e-6;
  return s;
}

HfSpec llama3_test_spec() {
  HfSpec s = hf_spec("LlamaForCausalLM", 64, 4, 2, 0, false, "F16");
  s.n_ff = 96;
  s.shards = 2;
  s.rope_theta = 500000.0;
  s.rope_scaling = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                    {"original_max_position_embeddings", 32}};
  return s;
}

HfTestModel write_hf_folder(const HfSpec& s, const std::string& dir, uint32_t seed) {
  fs::create_directories(dir);
  const bool qwen2 = s.architecture == "Qwen2ForCausalLM", qwen3 = s.architecture == "Qwen3ForCausalLM";
  const bool bias = qwen2 || s.attention_bias;
  const int64_t head_dim = s.head_dim > 0 ? s.head_dim : s.n_embd / s.n_head;
  const int64_t q_dim = s.n_head * head_dim, kv_dim = s.n_head_kv * head_dim;

  HfTestModel out;
  out.dir = dir;
  RefModel& m = out.ref;
  m.n_vocab = s.n_vocab;
  m.n_embd = s.n_embd;
  m.n_head = s.n_head;
  m.n_head_kv = s.n_head_kv;
  m.head_dim = head_dim;
  m.n_ff = s.n_ff;
  m.rms_eps = s.rms_eps;
  m.rope_theta = s.rope_theta;
  m.rope_neox = true;  // Hugging Face's rotate_half, on the rows as stored
  if (s.rope_scaling.is_object()) {
    const std::string type = s.rope_scaling.value("rope_type", s.rope_scaling.value("type", ""));
    if (type == "llama3") m.rope_divisors = llama3_divisors(s.rope_scaling, head_dim, s.rope_theta);
    if (type == "linear") m.rope_divisors.assign(size_t(head_dim / 2), double(s.rope_scaling["factor"]));
  }

  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<StTensor> tensors;
  // Adds a tensor to the file and returns its stored (rounded) values for the reference.
  auto tensor = [&](const std::string& name, std::vector<uint64_t> shape, float scale, float offset = 0.0f) {
    uint64_t n = 1;
    for (uint64_t d : shape) n *= d;
    std::vector<float> values(n);
    for (float& v : values) v = round_to(s.dtype, offset + scale * dist(rng));
    tensors.push_back({name, std::move(shape), values});
    return values;
  };
  const auto E = uint64_t(s.n_embd), Q = uint64_t(q_dim), KV = uint64_t(kv_dim), FF = uint64_t(s.n_ff);
  const float w = 0.3f;
  m.token_embd = tensor("model.embed_tokens.weight", {uint64_t(s.n_vocab), E}, 1.0f);
  for (int64_t l = 0; l < s.n_layer; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    RefLayer L;
    L.attn_norm = tensor(p + "input_layernorm.weight", {E}, 0.1f, 1.0f);
    L.wq = tensor(p + "self_attn.q_proj.weight", {Q, E}, w);
    L.wk = tensor(p + "self_attn.k_proj.weight", {KV, E}, w);
    L.wv = tensor(p + "self_attn.v_proj.weight", {KV, E}, w);
    if (bias) {
      L.bq = tensor(p + "self_attn.q_proj.bias", {Q}, w);
      L.bk = tensor(p + "self_attn.k_proj.bias", {KV}, w);
      L.bv = tensor(p + "self_attn.v_proj.bias", {KV}, w);
    }
    L.wo = tensor(p + "self_attn.o_proj.weight", {E, Q}, w);
    if (qwen3) {
      L.q_norm = tensor(p + "self_attn.q_norm.weight", {uint64_t(head_dim)}, 0.1f, 1.0f);
      L.k_norm = tensor(p + "self_attn.k_norm.weight", {uint64_t(head_dim)}, 0.1f, 1.0f);
    }
    L.ffn_norm = tensor(p + "post_attention_layernorm.weight", {E}, 0.1f, 1.0f);
    L.w_gate = tensor(p + "mlp.gate_proj.weight", {FF, E}, w);
    L.w_up = tensor(p + "mlp.up_proj.weight", {FF, E}, w);
    L.w_down = tensor(p + "mlp.down_proj.weight", {E, FF}, w);
    m.layers.push_back(std::move(L));
  }
  m.output_norm = tensor("model.norm.weight", {E}, 0.1f, 1.0f);
  if (!s.tied) m.output = tensor("lm_head.weight", {uint64_t(s.n_vocab), E}, w);

  if (s.shards <= 1) {
    write_text(fs::path(dir) / "model.safetensors", safetensors_bytes(tensors, s.dtype));
  } else {
    json weight_map = json::object();
    const size_t per_shard = (tensors.size() + size_t(s.shards) - 1) / size_t(s.shards);
    for (int i = 0; i < s.shards; ++i) {
      const std::string file = fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, s.shards);
      std::vector<StTensor> part;
      for (size_t t = size_t(i) * per_shard; t < std::min(tensors.size(), size_t(i + 1) * per_shard); ++t) {
        weight_map[tensors[t].name] = file;
        part.push_back(tensors[t]);
      }
      write_text(fs::path(dir) / file, safetensors_bytes(part, s.dtype));
    }
    write_text(fs::path(dir) / "model.safetensors.index.json",
               json({{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}).dump(2));
  }

  json config = {{"architectures", {s.architecture}},
                 {"hidden_size", s.n_embd},
                 {"intermediate_size", s.n_ff},
                 {"num_hidden_layers", s.n_layer},
                 {"num_attention_heads", s.n_head},
                 {"num_key_value_heads", s.n_head_kv},
                 {"max_position_embeddings", s.max_positions},
                 {"rms_norm_eps", s.rms_eps},
                 {"rope_theta", s.rope_theta},
                 {"tie_word_embeddings", s.tied},
                 {"vocab_size", s.n_vocab},
                 {"hidden_act", "silu"},
                 {"attention_bias", s.attention_bias},
                 {"rope_scaling", s.rope_scaling},
                 {"torch_dtype", s.dtype == "F32" ? "float32" : s.dtype == "F16" ? "float16" : "bfloat16"},
                 {"eos_token_id", kTinyImEnd}};
  if (s.head_dim > 0) config["head_dim"] = s.head_dim;
  if (s.sliding_window > 0) config["sliding_window"] = s.sliding_window;
  write_text(fs::path(dir) / "config.json", config.dump(2));
  write_tiny_tokenizer(dir);
  return out;
}

TempDir::TempDir(const std::string& stem)
    : path((fs::temp_directory_path() / ("tessera_hf_" + std::to_string(::getpid()) + "_" + stem)).string()) {
  fs::remove_all(path);
  fs::create_directories(path);
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path, ec);
}

}  // namespace tessera::testing
