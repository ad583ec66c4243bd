// `tessera convert`: a Hugging Face model folder (or a GGUF file) → GGUF, optionally in another weight type; or a
// llama2.c checkpoint (+ tokenizer) → GGUF.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>

#include "commands.h"
#include "core/error.h"
#include "core/weight_types.h"
#include "model/llama2c.h"
#include "model/gguf_export.h"
#include "model/hf_model.h"
#include "model/synthetic.h"

namespace tessera {
namespace {

// The on-disk types an export writes from any source. I8 is on disk too, but its per-row scales come from the
// quantizer (`tessera quantize --type int8`).
std::string convertible_type_names() {
  return weight_type_names([](const WeightTypeInfo& w) { return w.on_disk && w.traits.type != TensorType::I8; });
}

struct ConvertOptions {
  std::string input;  // Hugging Face folder or GGUF file
  std::string llama2c, tokenizer;
  std::string output;
  std::string name;
  std::string type = "auto";
  int threads = 0;
};

// --type: empty for auto (keep the source's types).
std::optional<TensorType> matrix_type_option(const std::string& type) {
  if (type == "auto") return std::nullopt;
  const std::optional<TensorType> t = weight_type_from_name(type);
  if (!t || *t == TensorType::I8) fail("unknown --type '{}' (auto, {})", type, convertible_type_names());
  return t;
}

// A folder or GGUF file at `input` into o.output.
int convert_model(const std::string& input, const ConvertOptions& o) {
  ExportOptions options;
  options.matrix_type = matrix_type_option(o.type);
  std::shared_ptr<gguf::File> source;
  if (std::filesystem::is_directory(input)) {
    HfFolder folder = open_hf_folder(input);
    for (const std::string& note : folder.notes) std::fprintf(stderr, "convert: %s\n", note.c_str());
    source = folder.file;
  } else {
    source = gguf::File::open(input);
  }
  ThreadPool pool(o.threads);
  const auto start = std::chrono::steady_clock::now();
  options.progress = [](size_t done, size_t total) {
    std::fprintf(stderr, "\rconvert: %zu/%zu tensors", done, total);
    if (done == total) std::fprintf(stderr, "\n");
  };
  const ExportReport report = export_gguf(*source, o.output, options, pool);
  for (const std::string& note : report.notes) std::fprintf(stderr, "convert: %s\n", note.c_str());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("wrote %s: %zu tensors, %.2f MB -> %.2f MB in %.1f s\n", o.output.c_str(), report.n_tensors,
              double(report.bytes_in) / 1e6, double(report.bytes_out) / 1e6, seconds);
  return 0;
}

}  // namespace

void add_convert_command(CLI::App& app, CommandAction& action) {
  auto* cmd = app.add_subcommand("convert", "Convert a Hugging Face model folder (or a llama2.c checkpoint) to GGUF");
  auto o = std::make_shared<ConvertOptions>();
  cmd->add_option("input", o->input, "Hugging Face model folder (config.json, *.safetensors, tokenizer.json), or a "
                                     "GGUF file to store in another --type");
  auto* llama2c = cmd->add_option("--llama2c", o->llama2c, "llama2.c checkpoint (.bin)")->check(CLI::ExistingFile);
  cmd->add_option("--tokenizer", o->tokenizer, "llama2.c tokenizer (.bin), e.g. tok512.bin (with --llama2c)")
      ->check(CLI::ExistingFile)
      ->needs(llama2c);
  cmd->add_option("-o,--output", o->output, "output GGUF path")->required();
  cmd->add_option("--type", o->type,
                  "matrix weight type (of --llama2c's too): auto (keep), " + convertible_type_names())
      ->capture_default_str();
  cmd->add_option("--name", o->name, "general.name to record (--llama2c; default stories260K)");
  cmd->add_option("-t,--threads", o->threads, "threads (default: physical cores)")->check(CLI::Range(0, 1024));
  cmd->callback([&action, o] {
    action = [o] {
      if (!o->llama2c.empty()) {
        if (!o->input.empty()) fail("give either a model folder or --llama2c, not both");
        if (o->tokenizer.empty()) fail("--llama2c needs --tokenizer");
        const std::string name = o->name.empty() ? "stories260K" : o->name;
        if (!matrix_type_option(o->type)) {  // checked before anything is written
          convert_llama2c_to_gguf(o->llama2c, o->tokenizer, o->output, name);
          std::printf("wrote %s\n", o->output.c_str());
          return 0;
        }
        // A llama2.c checkpoint is F32: written as such first, then stored in the asked type.
        struct RemovedAtEnd {
          std::string path;
          ~RemovedAtEnd() {
            std::error_code ignored;
            std::filesystem::remove(path, ignored);
          }
        } f32{o->output + ".f32.tmp"};
        convert_llama2c_to_gguf(o->llama2c, o->tokenizer, f32.path, name);
        return convert_model(f32.path, *o);
      }
      if (o->input.empty()) fail("convert needs a model folder (or --llama2c CHECKPOINT --tokenizer TOKENIZER)");
      return convert_model(o->input, *o);
    };
  });
}

}  // namespace tessera
