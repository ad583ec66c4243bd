// `tessera run`: generate from a prompt, streaming text to stdout and speed figures to stderr.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "commands.h"
#include "spec_flags.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/kv_sizing.h"
#include "engine/offline_engine.h"
#include "model/memory_fit.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace tessera {
namespace {

struct RunOptions {
  std::string model_path;
  std::string prompt = "Once upon a time";
  int n_predict = 128;
  int threads = 0;
  int ctx_size = 0;
  bool no_bos = false;
  bool ignore_memory_check = false;
  int64_t seed = -1;
  KvType kv_type = KvType::F16;
  LoadOptions load;
  SpecFlags spec;
  SamplingParams sampling;
  std::vector<std::string> logit_bias;  // --logit-bias, as given
  // The model's recommended values (general.sampling.*) replace the CLI defaults of the fields whose options
  // were not given, as llama.cpp's CLI does; given options always win.
  struct {
    bool temperature = false, top_k = false, top_p = false, min_p = false, repetition_penalty = false;
  } given;
};

// llama.cpp's --logit-bias spelling, TOKEN_ID+BIAS or TOKEN_ID-BIAS ("15043+1", "2-100"), into the sorted list the
// sampler takes; a token given twice keeps its last bias. CLI::ValidationError names what is wrong.
std::vector<LogitBias> parse_logit_biases(const std::vector<std::string>& specs) {
  std::vector<LogitBias> biases;
  for (const std::string& spec : specs) {
    const size_t sign = spec.find_first_of("+-", 1);
    size_t id_end = 0, bias_end = 0;
    long id = -1;
    float bias = 0.0f;
    try {
      if (sign == std::string::npos) throw std::invalid_argument(spec);
      id = std::stol(spec.substr(0, sign), &id_end);
      bias = std::stof(spec.substr(sign), &bias_end);
    } catch (const std::exception&) {
      id_end = 0;
    }
    if (sign == std::string::npos || id_end != sign || bias_end != spec.size() - sign || id < 0 || id > INT32_MAX ||
        !(std::fabs(bias) <= kMaxLogitBias))
      throw CLI::ValidationError("--logit-bias", "'" + spec + "' is not TOKEN_ID+BIAS or TOKEN_ID-BIAS with a bias in "
                                                              "[-100, 100] (e.g. 15043+1, 2-100)");
    std::erase_if(biases, [&](const LogitBias& b) { return b.token == int32_t(id); });
    biases.push_back({int32_t(id), bias});
  }
  std::sort(biases.begin(), biases.end(), [](const LogitBias& a, const LogitBias& b) { return a.token < b.token; });
  return biases;
}

// The model's defaults for the fields the command line did not set.
SamplingDefaults model_defaults_not_overridden(const SamplingDefaults& model, const RunOptions& o) {
  SamplingDefaults d;
  if (!o.given.temperature) d.temperature = model.temperature;
  if (!o.given.top_k) d.top_k = model.top_k;
  if (!o.given.top_p) d.top_p = model.top_p;
  if (!o.given.min_p) d.min_p = model.min_p;
  if (!o.given.repetition_penalty) d.repetition_penalty = model.repetition_penalty;
  return d;
}

// The context to allocate: -c when given (checked against the memory available), else the model's training
// context or, when its KV cache would not fit beside the weights, the longest that does (with a note). A draft
// model's weights and cache (as long as the target's) count too.
int64_t context_for(const Model& model, const RunOptions& o, KvType kv_type, const SpeculativeOptions& spec) {
  std::string note;
  const Model* draft = spec.method == SpecMethod::Draft ? spec.draft_model.get() : nullptr;
  const int64_t n_ctx = fit_context(model, o.ctx_size, kv_type, memory_for_check(o.ignore_memory_check),
                                    fmt::format("-c {}", usable_context(model.config(), o.ctx_size)), &note, draft);
  if (!note.empty()) std::fprintf(stderr, "note: %s; -c sets it\n", note.c_str());
  return n_ctx;
}

int run(const RunOptions& o) {
  auto model = load_model_or_embedded(o.model_path, o.load, o.ignore_memory_check);
  ThreadPool pool(o.threads);
  const SpeculativeOptions spec = speculative_from_flags(o.spec, *model, o.load, o.ignore_memory_check);
  OfflineEngine engine(model, pool, context_for(*model, o, o.kv_type, spec), 512, o.kv_type, spec);

  const SamplingDefaults from_model = model_defaults_not_overridden(model->sampling_defaults(), o);
  if (!from_model.empty()) std::fprintf(stderr, "sampling defaults from the model: %s\n", from_model.describe().c_str());
  SamplingParams params = with_defaults(o.sampling, from_model);
  params.max_tokens = o.n_predict;
  params.seed = o.seed >= 0 ? uint64_t(o.seed) : std::random_device{}();
  params.has_seed = true;
  const std::vector<int32_t> prompt = model->tokenizer().encode(o.prompt, !o.no_bos);
  // Before the prompt goes to stdout, so that the error is the only output (the engine checks again).
  if (const std::string problem = validate(params); !problem.empty()) fail("invalid sampling parameters: {}", problem);

  std::fputs(o.prompt.c_str(), stdout);
  std::fflush(stdout);
  const GenerationResult r = engine.generate(prompt, params, [](std::string_view text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return true;
  });
  std::fputs("\n", stdout);
  std::fflush(stdout);
  const double n_gen = double(r.tokens.size());
  std::fprintf(stderr, "\nmodel: %s, %d threads\n", model->name().c_str(), pool.size());
  std::fprintf(stderr, "prompt:     %5lld tokens in %8.2f ms (%8.1f tokens/s)\n", (long long)r.n_prompt_tokens,
               r.prompt_seconds * 1e3, r.prompt_seconds > 0 ? double(r.n_prompt_tokens) / r.prompt_seconds : 0.0);
  std::fprintf(stderr, "generation: %5lld tokens in %8.2f ms (%8.1f tokens/s), finish: %s\n", (long long)n_gen,
               r.generation_seconds * 1e3, r.generation_seconds > 0 ? n_gen / r.generation_seconds : 0.0,
               finish_reason_name(r.finish_reason));
  if (spec.enabled()) {
    const EngineStats s = engine.stats();
    std::fprintf(stderr, "speculative (%s, k=%lld): %llu drafts, acceptance %.3f, %.2f tokens per verification, "
                 "%llu steps switched off\n",
                 spec_method_name(spec.method), (long long)spec.spec_tokens, (unsigned long long)s.n_spec_drafts,
                 s.spec_acceptance(), s.spec_tokens_per_verification(), (unsigned long long)s.n_spec_steps_off);
  }
  return 0;
}

}  // namespace

void add_run_command(CLI::App& app, CommandAction& action) {
  auto* cmd = app.add_subcommand("run", "Generate text from a prompt");
  auto o = std::make_shared<RunOptions>();
  // Sampling defaults as llama.cpp's CLI users expect.
  o->sampling.temperature = 0.8f;
  o->sampling.top_k = 40;
  o->sampling.top_p = 0.95f;
  o->sampling.min_p = 0.05f;
  cmd->add_option("-m,--model", o->model_path, "GGUF model or Hugging Face folder (default: the embedded stories260K)");
  add_memory_check_flag(cmd, o->ignore_memory_check);
  cmd->add_option("-p,--prompt", o->prompt, "prompt text")->capture_default_str();
  add_bf16_products_options(cmd, o->load.bf16_products);
  add_int8_threshold_option(cmd, o->load.int8_threshold);
  cmd->add_option("-n,--n-predict", o->n_predict, "tokens to generate")->capture_default_str()->check(CLI::Range(0, 1 << 24));
  cmd->add_option("-t,--threads", o->threads, "threads (default: physical cores)")->check(CLI::Range(0, 1024));
  cmd->add_option("-c,--ctx-size", o->ctx_size, "context length (default: the model's)")->check(CLI::Range(0, 1 << 24));
  const char* model_note = " (default: the model's recommended value, else this)";
  auto* temp = cmd->add_option("--temp", o->sampling.temperature, std::string("temperature; 0 is greedy") + model_note)
                   ->capture_default_str()->check(CLI::Range(0.0f, 100.0f));
  auto* top_k = cmd->add_option("--top-k", o->sampling.top_k, std::string("top-k (0: off)") + model_note)
                    ->capture_default_str()->check(CLI::NonNegativeNumber);
  auto* top_p = cmd->add_option("--top-p", o->sampling.top_p, std::string("top-p (1: off)") + model_note)
                    ->capture_default_str()->check(CLI::Range(0.0f, 1.0f));
  auto* min_p = cmd->add_option("--min-p", o->sampling.min_p, std::string("min-p (0: off)") + model_note)
                    ->capture_default_str()->check(CLI::Range(0.0f, 1.0f));
  auto* repeat = cmd->add_option("--repeat-penalty", o->sampling.repetition_penalty,
                                 std::string("repetition penalty (1: off)") + model_note)
                     ->capture_default_str();
  cmd->add_option("--repeat-last-n", o->sampling.repetition_window, "tokens the penalties look back (-1: all)")
      ->capture_default_str();
  cmd->add_option("--frequency-penalty", o->sampling.frequency_penalty, "frequency penalty")->capture_default_str();
  cmd->add_option("--presence-penalty", o->sampling.presence_penalty, "presence penalty")->capture_default_str();
  cmd->add_option("-s,--seed", o->seed, "random seed (default: random)");
  cmd->add_option("--stop", o->sampling.stop, "stop string (repeatable)");
  add_kv_type_option(cmd, "--kv-type", o->kv_type, "KV cache storage: " + kv_type_names() + " (default f16)");
  cmd->add_flag("--ignore-eos", o->sampling.ignore_eos, "keep generating after end-of-sequence");
  cmd->add_option("--min-tokens", o->sampling.min_tokens,
                  "generate at least this many tokens before an end token or stop string ends the text")
      ->check(CLI::Range(0, 1 << 24));
  cmd->add_option("-l,--logit-bias", o->logit_bias, "TOKEN_ID+BIAS or TOKEN_ID-BIAS, added to the token's logit "
                                                    "(repeatable; -100 bans a token)");
  cmd->add_flag("--no-bos", o->no_bos, "do not add the BOS token");
  add_spec_options(cmd, o->spec);
  cmd->callback([&action, o, temp, top_k, top_p, min_p, repeat] {
    o->given = {temp->count() > 0, top_k->count() > 0, top_p->count() > 0, min_p->count() > 0, repeat->count() > 0};
    o->sampling.logit_bias = parse_logit_biases(o->logit_bias);
    action = [o] { return run(*o); };
  });
}

}  // namespace tessera
