// `tessera info`: what a GGUF file or Hugging Face folder holds — metadata, hyper-parameters, tokenizer, tensors.
#include <cstdio>
#include <filesystem>
#include <map>

#include "commands.h"
#include "core/error.h"
#include "formats/gguf.h"
#include "model/embedded_model.h"
#include "model/hf_model.h"
#include "model/model.h"

namespace tessera {
namespace {

std::string describe(const gguf::Value& v) {
  using gguf::ValueType;
  switch (v.type) {
    case ValueType::String: {
      const std::string& s = v.as_string();
      std::string shown = s.size() > 60 ? s.substr(0, 57) + "..." : s;
      for (char& c : shown) if (c == '\n') c = ' ';
      return "\"" + shown + "\"";
    }
    case ValueType::Array: {
      const auto& a = v.as_array();
      std::string s = fmt::format("[{} x {}]", a.size(), gguf::value_type_name(a.element_type()));
      if (a.element_type() != ValueType::Array && !a.empty()) {
        s += " ";
        for (size_t i = 0; i < std::min<size_t>(3, a.size()); ++i) s += (i ? ", " : "") + describe(a.at(i));
        if (a.size() > 3) s += ", ...";
      }
      return s;
    }
    case ValueType::Bool: return v.as_bool() ? "true" : "false";
    case ValueType::Float32:
    case ValueType::Float64: return fmt::format("{:g}", v.as_float());
    default: return v.is_integer() && v.type != ValueType::Int8 && v.type != ValueType::Int16 && v.type != ValueType::Int32 &&
                            v.type != ValueType::Int64
                        ? std::to_string(v.as_uint())
                        : std::to_string(v.as_int());
  }
}

std::string shape(const std::vector<uint64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

int info(const std::string& path) {
  std::shared_ptr<gguf::File> file;
  if (!path.empty() && std::filesystem::is_directory(path)) {
    HfFolder folder = open_hf_folder(path);
    file = folder.file;
    std::printf("folder:      %s\n", path.c_str());
    std::printf("format:      Hugging Face model folder, read as GGUF names and keys (%zu metadata keys, %zu tensors)\n",
                file->metadata().size(), file->tensors().size());
    for (const std::string& note : folder.notes) std::printf("  %s\n", note.c_str());
  } else {
    file = path.empty() ? gguf::File::from_memory(embedded_model_bytes(), kEmbeddedModelName) : gguf::File::open(path);
    std::printf("file:        %s\n", file->name().c_str());
    std::printf("format:      GGUF v%u, %llu bytes, alignment %llu, %zu metadata keys, %zu tensors\n", file->version(),
                (unsigned long long)file->file_size(), (unsigned long long)file->alignment(), file->metadata().size(),
                file->tensors().size());
  }
  std::printf("\nmetadata:\n");
  for (const auto& [key, value] : file->metadata()) std::printf("  %-44s %s\n", key.c_str(), describe(value).c_str());

  if (!file->tensors().empty()) {
    std::printf("\n%-36s %-6s %-22s %12s\n", "tensor", "type", "shape", "bytes");
    uint64_t total = 0;
    std::map<std::string, uint64_t> by_type;
    for (const auto& t : file->tensors()) {
      std::printf("%-36s %-6s %-22s %12llu\n", t.name.c_str(), std::string(tensor_type_name(t.type)).c_str(),
                  shape(t.dims).c_str(), (unsigned long long)t.n_bytes);
      total += t.n_bytes;
      by_type[std::string(tensor_type_name(t.type))] += t.n_bytes;
    }
    std::printf("total tensor bytes: %llu (", (unsigned long long)total);
    bool first = true;
    for (const auto& [type, bytes] : by_type) {
      std::printf("%s%s %llu", first ? "" : ", ", type.c_str(), (unsigned long long)bytes);
      first = false;
    }
    std::printf(")\n");
  }

  std::printf("\nmodel:\n");
  try {
    auto model = Model::from_gguf(file);
    const ModelConfig& c = model->config();
    std::printf("  architecture  %s\n", c.architecture.c_str());
    std::printf("  vocab %lld, embd %lld, layers %lld, heads %lld (kv %lld), head_dim %lld, ffn %lld, ctx %lld\n",
                (long long)c.n_vocab, (long long)c.n_embd, (long long)c.n_layer, (long long)c.n_head,
                (long long)c.n_head_kv, (long long)c.head_dim, (long long)c.n_ff, (long long)c.n_ctx_train);
    std::printf("  rms_eps %g, rope theta %g (%s%s), output head %s\n", c.rms_eps, c.rope_theta,
                c.rope_layout == RopeLayout::NeoX ? "neox" : "interleaved",
                model->weights().rope_freqs ? ", per-dimension rope_freqs" : "", c.tied_output ? "tied" : "separate");
    if (c.rope_freq_scale != 1.0f) std::printf("  linear rope scaling: positions x %g\n", c.rope_freq_scale);
    if (c.sliding_window > 0) std::printf("  sliding window %lld: context limited to it\n", (long long)c.sliding_window);
    const Vocab& v = model->tokenizer().vocab();
    std::printf("  tokenizer     %s, %zu tokens, bos %d, eos %d, add_bos %s, end of generation:", v.model.c_str(),
                v.tokens.size(), v.bos, v.eos, v.add_bos ? "yes" : "no");
    for (int32_t id : model->tokenizer().eog_ids()) std::printf(" %d", id);
    std::printf("\n");
  } catch (const Error& e) {
    std::printf("  not loadable as a model: %s\n", e.what());
  }
  return 0;
}

}  // namespace

void add_info_command(CLI::App& app, CommandAction& action) {
  auto* cmd = app.add_subcommand("info", "Describe a GGUF file or a Hugging Face model folder");
  auto path = std::make_shared<std::string>();
  cmd->add_option("-m,--model", *path, "GGUF file or Hugging Face folder (default: the embedded model)");
  cmd->callback([&action, path] { action = [path] { return info(*path); }; });
}

}  // namespace tessera
