// `tessera quantize`: a float GGUF model → INT8 / FP8 / INT4 (RTN, AWQ, GPTQ) or Q8_0 / Q4_0 / Q4_K / Q6_K.
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "commands.h"
#include "core/json_file.h"
#include "core/error.h"
#include "core/weight_types.h"
#include "model/model.h"
#include "quantizer/quantizer.h"

namespace tessera {
namespace {

std::string quantizer_type_names() {
  return weight_type_names([](const WeightTypeInfo& w) { return w.quantizer_output; });
}

struct QuantizeCliOptions {
  std::string input, output, type, calibration, method;  // method empty: chosen from the type and calibration
  int64_t group = 32, samples = 8, sample_tokens = 256;
  bool quantize_output = false, quiet = false, no_clip = false;
};

// One status line redrawn in place on a terminal; on a pipe, a line per stage change only.
class ProgressBar {
 public:
  explicit ProgressBar(bool quiet) : quiet_(quiet), tty_(isatty(fileno(stderr))) {}
  void update(std::string_view stage, size_t done, size_t total) {
    if (quiet_) return;
    if (!tty_) {
      if (stage != last_stage_) std::fprintf(stderr, "%.*s...\n", int(stage.size()), stage.data());
      last_stage_ = std::string(stage);
      return;
    }
    const int width = 30, filled = total ? int(width * done / total) : width;
    std::fprintf(stderr, "\r%-10.*s [%s%s] %zu/%zu", int(stage.size()), stage.data(), std::string(size_t(filled), '#').c_str(),
                 std::string(size_t(width - filled), ' ').c_str(), done, total);
    if (done == total) std::fputc('\n', stderr);
    std::fflush(stderr);
  }

 private:
  bool quiet_, tty_;
  std::string last_stage_;
};

// Without --method: GPTQ when a calibration text is given for INT4 (the text would otherwise be ignored in
// silence), RTN without one. A calibration text for a type no calibrated method applies to is refused.
std::string default_method(const QuantizeCliOptions& c, quant::WeightFormat format) {
  if (c.calibration.empty()) return "rtn";
  if (format != quant::WeightFormat::Int4) {
    fail("--calibration is used by --method awq or gptq, which apply to --type int4 only; drop it for --type {}",
         c.type);
  }
  std::fprintf(stderr, "note: --calibration without --method: quantizing with GPTQ (--method awq or rtn to choose)\n");
  return "gptq";
}

int run_quantize(QuantizeCliOptions c) {
  quant::QuantizeOptions o;
  const auto format = quant::weight_format_from_name(c.type);
  if (!format) fail("unknown --type '{}' ({})", c.type, quantizer_type_names());
  o.format = *format;
  if (c.method.empty()) c.method = default_method(c, o.format);
  const auto method = quant::method_from_name(c.method);
  if (!method) fail("unknown --method '{}' (rtn, awq, gptq)", c.method);
  o.method = *method;
  o.group_size = c.group;
  if (o.format == quant::WeightFormat::Int4 && c.group != 32 && c.group != 128) {
    fail("invalid --group {}: INT4 groups are 32 or 128", c.group);
  }
  if (!c.calibration.empty()) {
    o.calibration_text = read_text_file(c.calibration);
    if (o.calibration_text.find_first_not_of(" \t\r\n") == std::string::npos) {
      fail("calibration text '{}' is empty", c.calibration);
    }
    if (o.method == quant::Method::Rtn) std::fprintf(stderr, "note: --calibration is unused with --method rtn\n");
  }
  o.samples = c.samples;
  o.sample_tokens = c.sample_tokens;
  o.quantize_output = c.quantize_output;
  o.awq_clip = !c.no_clip;
  if (c.no_clip && o.method != quant::Method::Awq) fail("--no-clip applies to --method awq only");
  ProgressBar bar(c.quiet);
  o.progress = [&bar](std::string_view stage, size_t done, size_t total) { bar.update(stage, done, total); };

  // The tensors not quantized are copied from the file's bytes, so they must keep the file's layout.
  auto model = load_model_or_embedded(c.input, LoadOptions{.interleave_rows = false});
  const auto start = std::chrono::steady_clock::now();
  const quant::QuantizeReport r = quant::quantize_model(*model, c.output, o);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  size_t n_quantized = 0;
  for (const auto& t : r.tensors) n_quantized += t.from != t.to;
  std::printf("wrote %s: %s (%s%s), %zu of %zu tensors converted, %.2f MB -> %.2f MB in %.1f s\n", c.output.c_str(),
              c.type.c_str(), c.method.c_str(),
              o.format == quant::WeightFormat::Int4 ? (", group " + std::to_string(c.group)).c_str() : "",
              n_quantized, r.tensors.size(), double(r.bytes_in) / 1e6, double(r.bytes_out) / 1e6, seconds);
  if (r.calibration_tokens) std::printf("calibration: %lld tokens\n", (long long)r.calibration_tokens);
  if (!r.fallbacks.empty()) {
    std::printf("%zu tensor(s) fell back to another type:\n", r.fallbacks.size());
    for (const auto& f : r.fallbacks) std::printf("  %s\n", f.c_str());
  }
  size_t short_groups = 0;
  for (const auto& t : r.tensors)
    if (t.to == "INT4" && !t.note.empty()) ++short_groups;
  if (short_groups) {
    std::printf("%zu INT4 tensor(s) have rows the group size does not divide (shorter last group):\n", short_groups);
    for (const auto& t : r.tensors)
      if (t.to == "INT4" && !t.note.empty()) std::printf("  %s: %s\n", t.name.c_str(), t.note.c_str());
  }
  for (const auto& n : r.notes) std::printf("%s\n", n.c_str());
  return 0;
}

}  // namespace

void add_quantize_command(CLI::App& app, CommandAction& action) {
  auto* cmd = app.add_subcommand("quantize", "Quantize a float GGUF model's linear layers");
  auto o = std::make_shared<QuantizeCliOptions>();
  cmd->add_option("-m,--model", o->input, "input GGUF (F32/F16/BF16; default: the embedded model)");
  cmd->add_option("-o,--output", o->output, "output GGUF path")->required();
  cmd->add_option("--type", o->type, quantizer_type_names())->required();
  cmd->add_option("--group", o->group, "INT4 group size: 32 or 128")->default_val(32);
  cmd->add_option("--calibration", o->calibration, "calibration text file (AWQ, GPTQ)");
  cmd->add_option("--samples", o->samples, "calibration windows")->default_val(8);
  cmd->add_option("--sample-tokens", o->sample_tokens, "tokens per calibration window")->default_val(256);
  cmd->add_option("--method", o->method,
                  "rtn, awq or gptq (INT4). Default: gptq when --calibration is given (INT4 only), else rtn");
  cmd->add_flag("--no-clip", o->no_clip, "AWQ: scale search only, no per-group clipping search");
  cmd->add_flag("--quantize-output", o->quantize_output, "also quantize the output projection");
  cmd->add_flag("-q,--quiet", o->quiet, "no progress output");
  cmd->callback([&action, o] {
    action = [o] { return run_quantize(*o); };
  });
}

}  // namespace tessera
