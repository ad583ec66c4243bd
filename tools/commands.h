// Registration of the `tessera` subcommands; each lives in its own cmd_*.cpp.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <memory>
#include <string>

#include "kernels/attention.h"

namespace tessera {

class Model;

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
void add_tokenize_command(CLI::App& app, CommandAction& action);
void add_quantize_command(CLI::App& app, CommandAction& action);
void add_perplexity_command(CLI::App& app, CommandAction& action);

// A KV-cache storage option ("f32", "f16", "bf16", "int8", "fp8", case-insensitive) stored into `target`.
CLI::Option* add_kv_type_option(CLI::App* cmd, const std::string& name, KvType& target, const std::string& help);

// Loads `path`, or the embedded default model when empty. Unless `ignore_memory_check`, fails when the weights
// do not fit in the memory available (model/memory_fit.h).
std::shared_ptr<Model> load_model_or_embedded(const std::string& path, bool ignore_memory_check = false);

// --ignore-memory-check, for the commands that run a model.
CLI::Option* add_memory_check_flag(CLI::App* cmd, bool& ignore_memory_check);

}  // namespace tessera
