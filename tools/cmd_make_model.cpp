// `tessera make-model`: a GGUF file with random weights at a published model's shape, for benchmarks and
// load tests without downloading real weights.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "commands.h"
#include "core/error.h"
#include "core/weight_types.h"
#include "core/thread_pool.h"
#include "formats/gguf.h"
#include "tokenizer/vocab_gguf.h"
#include "model/presets.h"
#include "model/synthetic.h"
#include "tokenizer/hf_tokenizer.h"

namespace tessera {
namespace {

struct MakeModelOptions {
  std::string preset;
  std::string type;
  std::string output;
  std::string vocab_from;
  int64_t vocab_size = 0;  // 0: the preset's
  uint64_t seed = 1;
  int64_t group = 32;
  int threads = 0;
};

int make_model(const MakeModelOptions& o) {
  const ModelPreset* known = find_model_preset(o.preset);
  if (known == nullptr) fail("unknown preset '{}' (known: {})", o.preset, model_preset_names());
  // --vocab-size: the shape with another embedding size (TinyLlama's layers over Qwen3's 151,936 rows).
  ModelPreset resized = *known;
  if (o.vocab_size > 0) resized.n_vocab = o.vocab_size;
  const ModelPreset* preset = &resized;
  const std::optional<TensorType> type = weight_type_from_name(o.type);
  if (!type) fail("unknown weight type '{}' ({})", o.type, weight_type_names());
  if (*type == TensorType::INT4 && o.group != 32 && o.group != 128) {
    fail("invalid --group {}: INT4 groups are 32 or 128", o.group);
  }

  const SyntheticPlan plan = plan_synthetic_model(*preset, *type, o.seed, o.group);
  for (const std::string& note : plan.notes) std::fprintf(stderr, "make-model: %s\n", note.c_str());
  // The vocabulary: a GGUF file's tokenizer keys, or a Hugging Face tokenizer.json (or its folder) through the
  // same Vocab -> GGUF mapping as convert, padded to the preset's embedding rows as llama.cpp expects.
  std::optional<gguf::Metadata> tokenizer;
  if (std::filesystem::is_directory(o.vocab_from) || o.vocab_from.ends_with(".json")) {
    HfTokenizer hf = load_hf_tokenizer(o.vocab_from);
    if (int64_t(hf.vocab.tokens.size()) < preset->n_vocab) pad_vocab(hf.vocab, preset->n_vocab);
    tokenizer = vocab_metadata(hf.vocab);
  } else if (!o.vocab_from.empty()) {
    tokenizer = tokenizer_metadata_of(*gguf::File::open(o.vocab_from));
  }

  ThreadPool pool(o.threads);
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  double last_print = -1.0;
  write_synthetic_model(*preset, plan, o.output, tokenizer ? &*tokenizer : nullptr, pool, [&](const WriteProgress& p) {
    if (p.tensor < p.n_tensors && elapsed() - last_print < 0.25) return;  // a few updates a second
    last_print = elapsed();
    std::fprintf(stderr, "\rmake-model: %zu/%zu tensors, %.2f/%.2f GiB, %.1f s", p.tensor, p.n_tensors,
                 double(p.bytes) / double(1ULL << 30), double(p.total_bytes) / double(1ULL << 30), elapsed());
  });
  std::fprintf(stderr, "\nmake-model: wrote %s (%s %s, seed %llu, %d threads) in %.1f s\n", o.output.c_str(),
               std::string(preset->name).c_str(), o.type.c_str(), (unsigned long long)o.seed, pool.size(),
               elapsed());
  return 0;
}

}  // namespace

void add_make_model_command(CLI::App& app, CommandAction& action) {
  auto* cmd = app.add_subcommand("make-model", "Write a GGUF model with random weights at a published shape");
  auto o = std::make_shared<MakeModelOptions>();
  cmd->add_option("--preset", o->preset, "model shape: " + model_preset_names())->required();
  cmd->add_option("--type", o->type, "weight type: " + weight_type_names())->required();
  cmd->add_option("--group", o->group, "INT4 group size: 32 or 128 (round-to-nearest on the random weights)")
      ->capture_default_str();
  cmd->add_option("-o,--output", o->output, "output GGUF file")->required();
  cmd->add_option("--vocab-from", o->vocab_from, "copy the tokenizer.* metadata of this GGUF file, or take the "
                                                 "vocabulary of a Hugging Face tokenizer.json or folder (default: a "
                                                 "synthetic SentencePiece vocabulary)");
  cmd->add_option("--vocab-size", o->vocab_size, "embedding rows instead of the preset's (e.g. 151936 to pair a "
                                                 "shape with Qwen3's vocabulary)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  cmd->add_option("--seed", o->seed, "random seed")->capture_default_str();
  cmd->add_option("-t,--threads", o->threads, "threads (default: physical cores)")->check(CLI::Range(0, 1024));
  cmd->callback([&action, o] { action = [o] { return make_model(*o); }; });
}

}  // namespace tessera
