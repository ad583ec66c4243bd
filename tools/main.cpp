// The `tessera` command line: one binary, one subcommand per tool. Bad input ends with a one-line message on
// stderr and a non-zero exit, never a crash.
#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <map>

#include "commands.h"
#include "core/error.h"
#include "core/memory_info.h"
#include "model/memory_fit.h"
#include "model/model.h"

namespace tessera {

CLI::Option* add_kv_type_option(CLI::App* cmd, const std::string& name, KvType& target, const std::string& help) {
  static const std::map<std::string, KvType> kKvTypes{
      {"f32", KvType::F32}, {"f16", KvType::F16}, {"bf16", KvType::BF16}, {"int8", KvType::I8}, {"fp8", KvType::FP8}};
  return cmd->add_option(name, target, help)->transform(CLI::CheckedTransformer(kKvTypes, CLI::ignore_case));
}

CLI::Option* add_int8_threshold_option(CLI::App* cmd, float& target) {
  return cmd->add_option("--int8-threshold", target,
                         "INT8 weights: per token, activations with |x| above this are multiplied in fp32, the "
                         "rest in int8 (LLM.int8(); 6.0 is its usual value; 0: off)")
      ->capture_default_str();
}

void note_unused_load_options(const Model& model, const LoadOptions& options) {
  if (options.int8_threshold > 0.0f && model.n_int8_matrices() == 0) {
    std::fprintf(stderr, "note: --int8-threshold has no effect: %s has no INT8 (I8) weights\n", model.name().c_str());
  }
}

std::shared_ptr<Model> load_model_or_embedded(const std::string& path, const LoadOptions& options,
                                              bool ignore_memory_check) {
  std::shared_ptr<Model> model = path.empty() ? Model::load_embedded(options) : Model::load(path, options);
  require_weights_fit_in_memory(*model, memory_for_check(ignore_memory_check));
  note_unused_load_options(*model, options);
  return model;
}

uint64_t memory_for_check(bool ignore_memory_check) { return ignore_memory_check ? 0 : available_memory_bytes(); }

uint64_t fit_engine_kv_cache(const Model& model, EngineOptions& engine, uint64_t available_bytes,
                             const std::string& size_flag) {
  const ModelConfig& c = model.config();
  const uint64_t block_bytes = engine_kv_block_bytes(c, engine);
  const uint64_t planned = uint64_t(engine_kv_blocks(c, engine)) * block_bytes;
  if (available_bytes == 0) return planned;
  if (engine.kv_blocks > 0 || engine.kv_cache_bytes > 0) {
    require_kv_cache_fits_in_memory(model, planned, available_bytes,
                                    !size_flag.empty()    ? size_flag
                                    : engine.kv_blocks > 0 ? fmt::format("--kv-blocks {}", engine.kv_blocks)
                                                           : fmt::format("--kv-cache-mem {}", engine.kv_cache_bytes));
    return planned;
  }
  const uint64_t budget = kv_cache_budget_bytes(model, available_bytes);
  if (planned <= budget) return planned;
  // Less than one full-length sequence fits: say so now rather than reject every long request later.
  const uint64_t one_sequence = uint64_t(usable_context(c, engine.n_ctx) + engine.kv_block_size - 1) /
                                uint64_t(engine.kv_block_size) * block_bytes;
  if (budget < one_sequence) {
    require_kv_cache_fits_in_memory(model, one_sequence, available_bytes,
                                    fmt::format("-c {} (one sequence)", usable_context(c, engine.n_ctx)));
  }
  engine.kv_cache_bytes = budget;
  const uint64_t bytes = uint64_t(engine_kv_blocks(c, engine)) * block_bytes;
  std::fprintf(stderr, "note: KV cache limited to %.2f GiB (%lld positions) by the memory left after the weights; "
               "--kv-cache-mem or -c sets it\n",
               double(bytes) / double(uint64_t{1} << 30), (long long)(bytes / block_bytes * engine.kv_block_size));
  return bytes;
}

CLI::Option* add_memory_check_flag(CLI::App* cmd, bool& ignore_memory_check) {
  return cmd->add_flag("--ignore-memory-check", ignore_memory_check,
                       "load a model whose weights exceed the available memory (it will read them from disk for "
                       "every token)");
}

}  // namespace tessera

int main(int argc, char** argv) {
  CLI::App app{"Tessera: an LLM inference engine and server"};
  app.require_subcommand(1);
  tessera::CommandAction action;
  tessera::add_run_command(app, action);
  tessera::add_info_command(app, action);
  tessera::add_convert_command(app, action);
  tessera::add_serve_command(app, action);
  tessera::add_loadgen_command(app, action);
  tessera::add_make_model_command(app, action);
  tessera::add_bench_command(app, action);
  tessera::add_tokenize_command(app, action);
  tessera::add_quantize_command(app, action);
  tessera::add_perplexity_command(app, action);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return action();
  } catch (const tessera::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
