// Registration of the `tessera` subcommands; each lives in its own cmd_*.cpp.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "core/kv_type.h"
#include "model/memory_fit.h"
#include "model/model.h"

namespace tessera {


// Each registers its options on `app` and returns the action to run when the subcommand is chosen; the action
// returns the process exit code.
using CommandAction = std::function<int()>;
void add_run_command(CLI::App& app, CommandAction& action);
void add_info_command(CLI::App& app, CommandAction& action);
void add_convert_command(CLI::App& app, CommandAction& action);
void add_serve_command(CLI::App& app, CommandAction& action);
void add_loadgen_command(CLI::App& app, CommandAction& action);
void add_make_model_command(CLI::App& app, CommandAction& action);
void add_bench_command(CLI::App& app, CommandAction& action);
// `bench serve`, a subcommand of `bench` (tools/cmd_bench_serve.cpp).
void add_bench_serve_subcommand(CLI::App* bench, CommandAction& action);
void add_tokenize_command(CLI::App& app, CommandAction& action);
void add_quantize_command(CLI::App& app, CommandAction& action);
void add_perplexity_command(CLI::App& app, CommandAction& action);

// A KV-cache storage option ("f32", "f16", "bf16", "int8", "fp8", case-insensitive) stored into `target`.
CLI::Option* add_kv_type_option(CLI::App* cmd, const std::string& name, KvType& target, const std::string& help);

// --int8-threshold: LLM.int8()-style outliers for INT8 (I8) weights (model/model.h LoadOptions); run, serve,
// bench and perplexity share it. Invalid values fail when the model is loaded.
CLI::Option* add_int8_threshold_option(CLI::App* cmd, float& target);
// --bf16-products (F16 weights rounded to BF16 and multiplied in bf16 as well) and --fp32-activations (BF16
// weights multiplied exactly), exclusive; neither: BF16 weights in bf16 (model/model.h Bf16Products). `scope`,
// when given, ends both help texts in parentheses.
void add_bf16_products_options(CLI::App* cmd, Bf16Products& target, const std::string& scope = "");

// Loads `path`, or the embedded default model when empty, with `options`; notes on stderr when an option has
// nothing to act on. Unless `ignore_memory_check`, fails when the weights do not fit in the memory available
// (model/memory_fit.h).
std::shared_ptr<Model> load_model_or_embedded(const std::string& path, const LoadOptions& options = {},
                                              bool ignore_memory_check = false);
// The note for a model loaded another way.
void note_unused_load_options(const Model& model, const LoadOptions& options);

// The memory the checks in model/memory_fit.h compare against: what is available, or 0 (no check) with
// --ignore-memory-check.
uint64_t memory_for_check(bool ignore_memory_check);

// Sizes the engine's KV cache to the memory left after the weights when no option set its size (with a note on
// stderr when that is less than the default), or checks an explicit size against it; `available_bytes` 0: no
// check. `size_flag` names the option that set an explicit size in the error ("--kv-cache-mb 512"; empty: serve's
// "--kv-cache-mem BYTES" or "--kv-blocks N"). Returns the bytes the cache will take.
uint64_t fit_engine_kv_cache(const Model& model, EngineOptions& engine, uint64_t available_bytes,
                             const std::string& size_flag = {});
// The same for engines that share the memory (a served model and its fallback; engine/kv_sizing.h's
// fit_kv_pools): every model's weights first, then each pool in order. Returns the bytes of each.
std::vector<uint64_t> fit_engine_kv_caches(const std::vector<std::pair<const Model*, EngineOptions*>>& engines,
                                           uint64_t available_bytes, const std::string& size_flag = {});

// A memory check's refusal, in this command line's terms: the flags that lower what it asked for or skip it.
std::string memory_fit_way_out(const MemoryFitError& e);

// --ignore-memory-check, for the commands that run a model.
CLI::Option* add_memory_check_flag(CLI::App* cmd, bool& ignore_memory_check);

}  // namespace tessera
