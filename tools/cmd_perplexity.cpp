// `tessera perplexity`: perplexity of a model on a text, and KL divergence / top-1 agreement vs a reference.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/json_file.h"
#include "core/error.h"
#include "eval/perplexity.h"
#include "model/model.h"

namespace tessera {
namespace {

struct PerplexityCliOptions {
  std::string model, text_path, reference;
  int64_t ctx = 128, chunks = 0;
  int threads = 0;
  bool json = false;
  bool ignore_memory_check = false;
  KvType kv_type = KvType::F32, ref_kv_type = KvType::F32;
  LoadOptions load;  // the model under test only
};

int run_perplexity(const PerplexityCliOptions& c) {
  const std::string text = read_text_file(c.text_path);
  auto model = load_model_or_embedded(c.model, c.load, c.ignore_memory_check);
  // The reference computes exactly: its BF16 weights, if any, take fp32 activations.
  std::shared_ptr<Model> ref = c.reference.empty() ? nullptr
                               : load_model_or_embedded(c.reference == "embedded" ? "" : c.reference,
                                                        LoadOptions{.bf16_products = Bf16Products::Off},
                                                        c.ignore_memory_check);
  ThreadPool pool(c.threads);
  PerplexityOptions o;
  o.ctx = c.ctx;
  o.max_windows = c.chunks;
  o.kv_type = c.kv_type;
  o.ref_kv_type = c.ref_kv_type;
  const PerplexityResult r = evaluate_perplexity(model, ref, text, o, pool);
  if (c.json) {
    nlohmann::json j = {{"model", model->name()},       {"ctx", c.ctx},           {"windows", r.n_windows},
                        {"tokens_scored", r.n_scored},  {"nll", r.nll},           {"perplexity", r.perplexity},
                        {"weight_bytes", model->weight_bytes()}, {"int8_threshold", c.load.int8_threshold}};
    // Whether the model under test took bf16 products (BF16 weights by default, on CPUs with AVX-512 BF16).
    j["bf16_products"] = model->takes_bf16_products();
    if (r.has_reference) {
      j["reference"] = ref->name();
      j["ref_perplexity"] = r.ref_perplexity;
      j["ppl_ratio"] = r.ppl_ratio;
      j["kl_mean"] = r.kl_mean;
      j["kl_p99"] = r.kl_p99;
      j["top1_agreement"] = r.top1_agreement;
    }
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("model:       %s\n", model->name().c_str());
  std::printf("windows:     %lld of %lld tokens, %lld predictions scored\n", (long long)r.n_windows,
              (long long)c.ctx, (long long)r.n_scored);
  std::printf("perplexity:  %.4f\n", r.perplexity);
  if (r.has_reference) {
    std::printf("reference:   %s, perplexity %.4f (ratio %.4f)\n", ref->name().c_str(), r.ref_perplexity, r.ppl_ratio);
    std::printf("KL(ref||m):  mean %.6f, p99 %.6f nats\n", r.kl_mean, r.kl_p99);
    std::printf("top-1 agree: %.2f%%\n", 100.0 * r.top1_agreement);
  }
  return 0;
}

}  // namespace

void add_perplexity_command(CLI::App& app, CommandAction& action) {
  auto* cmd = app.add_subcommand("perplexity", "Perplexity on a text, optionally against a reference model");
  auto o = std::make_shared<PerplexityCliOptions>();
  cmd->add_option("-m,--model", o->model, "GGUF model or Hugging Face folder (default: the embedded model)");
  add_memory_check_flag(cmd, o->ignore_memory_check);
  cmd->add_option("-f,--file", o->text_path, "text file")->required()->check(CLI::ExistingFile);
  cmd->add_option("--ref", o->reference, "reference model for KL divergence and top-1 agreement ('embedded' for the built-in one)");
  cmd->add_option("--ctx", o->ctx, "tokens per window, BOS included")->default_val(128);
  cmd->add_option("--chunks", o->chunks, "at most this many windows (0: all)")->default_val(0);
  cmd->add_option("-t,--threads", o->threads, "threads (0: all cores)")->default_val(0);
  cmd->add_flag("--json", o->json, "print JSON");
  add_bf16_products_options(cmd, o->load.bf16_products,
                            "the model under test; the --ref model always multiplies fp32 activations");
  add_int8_threshold_option(cmd, o->load.int8_threshold)->description(
      "INT8 weights of the model under test (not the reference): per token, activations with |x| above this are "
      "multiplied in fp32, the rest in int8 (LLM.int8(); 0: off)");
  add_kv_type_option(cmd, "--kv-type", o->kv_type, "KV cache storage of the model: " + kv_type_names() + " (default f32)");
  add_kv_type_option(cmd, "--ref-kv-type", o->ref_kv_type, "KV cache storage of the reference (default f32)");
  cmd->callback([&action, o] {
    action = [o] { return run_perplexity(*o); };
  });
}

}  // namespace tessera
