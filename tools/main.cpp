// The `tessera` command line: one binary, one subcommand per tool. Bad input ends with a one-line message on
// stderr and a non-zero exit, never a crash.
#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <algorithm>
#include <cctype>
#include <optional>

#include "commands.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/memory_info.h"
#include "engine/kv_sizing.h"
#include "model/memory_fit.h"
#include "model/model.h"

namespace tessera {

CLI::Option* add_kv_type_option(CLI::App* cmd, const std::string& name, KvType& target, const std::string& help) {
  // The names are kv_type_from_name's, in any case.
  return cmd->add_option_function<std::string>(
      name,
      [&target, name](const std::string& value) {
        std::string lower = value;
        std::transform(lower.begin(), lower.end(), lower.begin(),
                       [](unsigned char ch) { return char(std::tolower(ch)); });
        const std::optional<KvType> type = kv_type_from_name(lower);
        if (!type) {
          throw CLI::ValidationError(name, "unknown KV cache type '" + value + "' (" + kv_type_names() + ")");
        }
        target = *type;
      },
      help);
}

CLI::Option* add_int8_threshold_option(CLI::App* cmd, float& target) {
  return cmd->add_option("--int8-threshold", target,
                         "INT8 weights: per token, activations with |x| above this are multiplied in fp32, the "
                         "rest in int8 (LLM.int8(); 6.0 is its usual value; 0: off)")
      ->capture_default_str();
}

void add_bf16_products_options(CLI::App* cmd, Bf16Products& target, const std::string& scope) {
  const std::string whose = scope.empty() ? "" : " (" + scope + ")";
  CLI::Option* all = cmd->add_flag_callback(
      "--bf16-products", [&target] { target = Bf16Products::Bf16AndF16Weights; },
      "F16 weights too: round them to bf16 at load and multiply them as BF16 weights are by default (activations "
      "rounded to bf16, AVX-512 BF16's vdpbf16ps, twice the fp32 rate). No effect without AVX-512 BF16" + whose);
  CLI::Option* exact = cmd->add_flag_callback(
      "--fp32-activations", [&target] { target = Bf16Products::Off; },
      "BF16 weights: multiply fp32 activations exactly, at the fp32 rate, instead of rounding them to bf16 "
      "(the default on CPUs with AVX-512 BF16, as llama.cpp computes BF16 weights)" + whose);
  all->excludes(exact);
}

void note_unused_load_options(const Model& model, const LoadOptions& options) {
  if (options.int8_threshold > 0.0f && model.n_int8_matrices() == 0) {
    std::fprintf(stderr, "note: --int8-threshold has no effect: %s has no INT8 (I8) weights\n", model.name().c_str());
  }
  // The default (BF16 weights only) says nothing: it is no request.
  if (options.bf16_products != Bf16Products::Bf16AndF16Weights) return;
  if (active_isa() < Isa::Avx512Bf16) {
    std::fprintf(stderr, "note: --bf16-products has no effect: this CPU (or TESSERA_ISA) stops at %s, below "
                 "AVX-512 BF16\n", std::string(isa_name(active_isa())).c_str());
  } else if (model.n_bf16_product_matrices() == 0) {
    std::fprintf(stderr, "note: --bf16-products has no effect: %s has no BF16 or F16 weights in panels (float "
                 "weights stay in rows when the model does not fit in half the memory available)\n",
                 model.name().c_str());
  } else if (model.file() != nullptr &&
             std::none_of(model.file()->tensors().begin(), model.file()->tensors().end(),
                          [](const gguf::TensorInfo& t) { return t.type == TensorType::F16 && t.dims.size() == 2; })) {
    std::fprintf(stderr, "note: --bf16-products adds nothing: %s has no F16 matrices (its BF16 ones take bf16 "
                 "products by default)\n", model.name().c_str());
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

std::vector<uint64_t> fit_engine_kv_caches(const std::vector<std::pair<const Model*, EngineOptions*>>& engines,
                                           uint64_t available_bytes, const std::string& size_flag) {
  std::vector<KvPoolRequest> requests;
  for (const auto& [model, engine] : engines) {
    // The flag that set an explicit size, for the error to name (serve's, unless the caller says otherwise).
    requests.push_back({.model = model,
                        .options = engine,
                        .size_source = !size_flag.empty()     ? size_flag
                                       : engine->kv_blocks > 0 ? fmt::format("--kv-blocks {}", engine->kv_blocks)
                                                               : fmt::format("--kv-cache-mem {}", engine->kv_cache_bytes),
                        .context_source = fmt::format("-c {}", usable_context(model->config(), engine->n_ctx))});
  }
  std::vector<uint64_t> bytes;
  const std::vector<KvPoolFit> fits = fit_kv_pools(requests, available_bytes);
  for (size_t i = 0; i < fits.size(); ++i) {
    if (!fits[i].note.empty()) {
      std::fprintf(stderr, "note: %s: %s; --kv-cache-mem or -c sets it\n", engines[i].first->name().c_str(),
                   fits[i].note.c_str());
    }
    bytes.push_back(fits[i].bytes);
  }
  return bytes;
}

uint64_t fit_engine_kv_cache(const Model& model, EngineOptions& engine, uint64_t available_bytes,
                             const std::string& size_flag) {
  return fit_engine_kv_caches({{&model, &engine}}, available_bytes, size_flag).front();
}

std::string memory_fit_way_out(const MemoryFitError& e) {
  if (e.part == MemoryFitError::Part::Weights) {
    return "Use a smaller quantization (tessera quantize --type int4) or pass --ignore-memory-check to load it anyway";
  }
  // kv_source is the flag and its value ("-c 40960", "--kv-blocks 4096 (one sequence)"): name the flag alone.
  const std::string flag = e.kv_source.substr(0, e.kv_source.find(' '));
  return fmt::format("Lower {}, store the cache in 8 bits (--kv-type int8), {}or pass --ignore-memory-check", flag,
                     e.with_draft ? "use a smaller --draft-model (or --spec ngram, which needs no cache), " : "");
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
  } catch (const tessera::MemoryFitError& e) {
    std::fprintf(stderr, "error: %s. %s\n", e.what(), tessera::memory_fit_way_out(e).c_str());
    return 1;
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
