// quantize_model: plans each tensor (target type, fallbacks), runs calibration and the AWQ search up front, then
// streams the output through gguf::Writer, encoding one tensor at a time so only one matrix is held in fp32.
#include "quantizer/quantizer.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>

#include "core/error.h"
#include "core/fp16.h"
#include "core/thread_pool.h"
#include "core/weight_types.h"
#include "formats/gguf_writer.h"
#include "kernels/lowbit.h"
#include "kernels/quant.h"
#include "quantizer/calibration.h"
#include "quantizer/int4_search.h"

namespace tessera::quant {
namespace {

// WeightFormat lists exactly the registry's quantizer outputs.
constexpr bool formats_match_registry() {
  constexpr WeightFormat kAll[] = {WeightFormat::Int8, WeightFormat::Fp8,  WeightFormat::Int4, WeightFormat::Q8_0,
                                   WeightFormat::Q4_0, WeightFormat::Q4_K, WeightFormat::Q6_K};
  size_t outputs = 0;
  for (const WeightTypeInfo& w : kWeightTypes) outputs += w.quantizer_output;
  // By value, not through find_weight_type's pointer: under -fsanitize=address GCC 12 does not take a pointer
  // into the registry compared with null as a constant expression, and the sanitizer build failed here.
  for (WeightFormat f : kAll) {
    bool listed = false;
    for (const WeightTypeInfo& w : kWeightTypes) listed |= w.traits.type == tensor_type(f) && w.quantizer_output;
    if (!listed) return false;
  }
  return outputs == std::size(kAll);
}
static_assert(formats_match_registry(), "quant::WeightFormat and the registry's quantizer outputs differ");

enum class Kind { Q, K, V, O, Gate, Up, Down, Output };

struct Linear {
  Kind kind;
  int64_t layer = -1;  // -1 for the output projection
  const WeightMatrix* w = nullptr;
};

LinearInput input_of(Kind k) {
  switch (k) {
    case Kind::Q: case Kind::K: case Kind::V: return LinearInput::AttnIn;
    case Kind::O: return LinearInput::AttnOut;
    case Kind::Gate: case Kind::Up: return LinearInput::FfnIn;
    default: return LinearInput::FfnMid;
  }
}

// AWQ scales of one layer (empty vectors: no scaling).
struct LayerScales {
  std::vector<float> attn_in, attn_out, attn_out_kv, ffn_in, ffn_mid;
};

bool is_float(TensorType t) { return t == TensorType::F32 || t == TensorType::F16 || t == TensorType::BF16; }

// The type a [*, n_in] matrix is stored in, and why it differs from what was asked (empty when it does not).
TensorType plan_type(WeightFormat f, int64_t n_in, TensorType source, std::string* fallback) {
  const TensorType high = source == TensorType::BF16 ? TensorType::BF16 : TensorType::F16;
  auto blocks = [&](TensorType want, int64_t block) {
    if (n_in % block == 0) return want;
    const TensorType alt = block == 256 && n_in % 32 == 0 ? TensorType::Q8_0 : high;
    *fallback = fmt::format("row length {} is not a multiple of {}'s block of {}: stored as {}", n_in,
                            tensor_type_name(want), block, tensor_type_name(alt));
    return alt;
  };
  // Tessera's own formats take any row length (INT4 pads its rows); the GGUF block types need whole blocks.
  const TensorType want = tensor_type(f);
  if (f == WeightFormat::Int8 || f == WeightFormat::Fp8 || f == WeightFormat::Int4) return want;
  return blocks(want, traits(want).block_elements);
}

std::vector<float> load_f32(const WeightMatrix& w) {
  std::vector<float> m(static_cast<size_t>(w.n_out * w.n_in));
  for (int64_t r = 0; r < w.n_out; ++r) dequantize_weight_row(w, r, &m[size_t(r * w.n_in)]);
  return m;
}

template <typename T>
std::vector<uint8_t> to_bytes(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// Fails early (before any long calibration) when the output cannot be created.
void check_writable(const std::string& path) {
  namespace fs = std::filesystem;
  if (fs::is_directory(path)) fail("cannot write '{}': it is a directory", path);
  const std::string probe = path + ".probe." + std::to_string(::getpid());
  {
    std::ofstream f(probe, std::ios::binary);
    if (!f) fail("cannot write '{}': {}", path, std::strerror(errno));
  }
  std::remove(probe.c_str());
}

struct Encoded {
  std::vector<uint8_t> main;
  std::vector<std::vector<uint8_t>> companions;
};

}  // namespace

std::optional<WeightFormat> weight_format_from_name(std::string_view name) {
  const std::optional<TensorType> type = weight_type_from_name(name);
  if (!type || !weight_type_info(*type).quantizer_output) return std::nullopt;
  return static_cast<WeightFormat>(static_cast<uint32_t>(*type));
}

std::string_view weight_format_name(WeightFormat f) { return weight_type_info(tensor_type(f)).cli_name; }

std::optional<Method> method_from_name(std::string_view name) {
  if (name == "rtn") return Method::Rtn;
  if (name == "awq") return Method::Awq;
  if (name == "gptq") return Method::Gptq;
  return std::nullopt;
}

std::string_view method_name(Method m) { return m == Method::Rtn ? "rtn" : m == Method::Awq ? "awq" : "gptq"; }

QuantizeReport quantize_model(const Model& model, const std::string& out_path, const QuantizeOptions& o) {
  const gguf::File* file = model.file();
  if (file == nullptr) fail("quantize: the model has no GGUF file to copy from");
  if (o.format == WeightFormat::Int4 && !is_valid_int4_group(o.group_size)) {
    fail("invalid INT4 group size {}: use 32 or 128 (a positive multiple of 32)", o.group_size);
  }
  if (o.method != Method::Rtn) {
    if (o.format != WeightFormat::Int4) fail("the {} method applies to INT4 only", method_name(o.method));
    if (o.calibration_text.empty()) fail("the {} method needs a calibration text", method_name(o.method));
  }
  if (o.samples < 1) fail("calibration samples must be at least 1, not {}", o.samples);
  const ModelConfig& c = model.config();
  const ModelWeights& mw = model.weights();

  // Every linear layer, by tensor name; each must be stored as a float type to be quantized.
  std::map<std::string, Linear> linears;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const LayerWeights& L = mw.layers[size_t(l)];
    linears[p + "attn_q.weight"] = {Kind::Q, l, &L.wq};
    linears[p + "attn_k.weight"] = {Kind::K, l, &L.wk};
    linears[p + "attn_v.weight"] = {Kind::V, l, &L.wv};
    linears[p + "attn_output.weight"] = {Kind::O, l, &L.wo};
    linears[p + "ffn_gate.weight"] = {Kind::Gate, l, &L.w_gate};
    linears[p + "ffn_up.weight"] = {Kind::Up, l, &L.w_up};
    linears[p + "ffn_down.weight"] = {Kind::Down, l, &L.w_down};
  }
  if (o.quantize_output) linears["output.weight"] = {Kind::Output, -1, &mw.output};
  for (const auto& [name, lin] : linears) {
    if (!is_float(lin.w->type)) {
      fail("{}: tensor '{}' is {}; quantize from an F32, F16 or BF16 model (re-quantizing compounds errors)",
           file->name(), name, tensor_type_name(lin.w->type));
    }
  }
  if (mw.output.layout != WeightLayout::Rows || mw.token_embd.layout != WeightLayout::Rows) {
    fail("quantize: the model's matrices were rewritten for the kernels; load it with interleave_rows = false");
  }
  check_writable(out_path);

  QuantizeReport report;
  ThreadPool pool(0);

  // Calibration and the AWQ scale search.
  std::shared_ptr<CalibrationStats> stats;
  std::vector<LayerScales> scales(static_cast<size_t>(c.n_layer));
  if (o.method != Method::Rtn) {
    if (o.progress) o.progress("calibrate", 0, 1);
    CalibrationOptions co;
    co.n_samples = o.samples;
    co.sample_tokens = o.sample_tokens;
    stats = std::make_shared<CalibrationStats>(calibrate(model, o.calibration_text, co, pool));
    report.calibration_tokens = stats->n_tokens;
    if (o.progress) o.progress("calibrate", 1, 1);
  }
  if (o.method == Method::Awq) {
    const int64_t group = c.n_head / c.n_head_kv;
    std::vector<int64_t> tie(size_t(c.q_dim()));
    for (int64_t j = 0; j < c.q_dim(); ++j) tie[size_t(j)] = (j / c.head_dim) / group * c.head_dim + j % c.head_dim;
    for (int64_t l = 0; l < c.n_layer; ++l) {
      if (o.progress) o.progress("search", size_t(l), size_t(c.n_layer));
      const LayerWeights& L = mw.layers[size_t(l)];
      const auto& st = stats->layers[size_t(l)];
      auto search = [&](LinearInput in, std::vector<const WeightMatrix*> ws, const std::vector<int64_t>& t,
                        const char* what) {
        std::vector<std::vector<float>> f;
        for (const WeightMatrix* w : ws) f.push_back(load_f32(*w));
        std::vector<const std::vector<float>*> ptrs;
        for (const auto& v : f) ptrs.push_back(&v);
        const InputStats& s = st[int(in)];
        AwqResult r = awq_search(ptrs, s.n, s.mean_abs(), s.hessian_f32(), o.group_size, t, o.awq_clip);
        report.notes.push_back(fmt::format("awq blk.{} {}: alpha {:.2f}, calibration output error {:.3g} (rtn {:.3g})",
                                           l, what, r.alpha, r.error, r.rtn_error));
        return r.scale;
      };
      LayerScales& ls = scales[size_t(l)];
      ls.attn_in = search(LinearInput::AttnIn, {&L.wq, &L.wk, &L.wv}, {}, "attn_q/k/v");
      ls.attn_out = search(LinearInput::AttnOut, {&L.wo}, tie, "attn_output");
      ls.attn_out_kv.assign(size_t(c.kv_dim()), 1.0f);
      for (int64_t j = 0; j < c.q_dim(); ++j) ls.attn_out_kv[size_t(tie[size_t(j)])] = ls.attn_out[size_t(j)];
      ls.ffn_in = search(LinearInput::FfnIn, {&L.w_gate, &L.w_up}, {}, "ffn_gate/up");
      ls.ffn_mid = search(LinearInput::FfnMid, {&L.w_down}, {}, "ffn_down");
    }
    if (o.progress) o.progress("search", size_t(c.n_layer), size_t(c.n_layer));
  }

  gguf::Writer writer(file->alignment());
  for (const auto& [key, value] : file->metadata()) {
    if (key.rfind("tessera.quant.", 0) == 0 || key == "general.file_type") continue;
    writer.set(key, value);
  }
  writer.set_string("tessera.quant.type", std::string(weight_format_name(o.format)));
  writer.set_string("tessera.quant.method", std::string(method_name(o.method)));
  if (o.format == WeightFormat::Int4) writer.set_u32("tessera.quant.group_size", uint32_t(o.group_size));
  if (const uint32_t file_type = weight_type_info(tensor_type(o.format)).gguf_file_type) {
    writer.set_u32("general.file_type", file_type);
  }

  auto add_linear = [&](const std::string& name, const Linear& lin) {
    const WeightMatrix& w = *lin.w;
    std::string fallback;
    const TensorType target = plan_type(o.format, w.n_in, w.type, &fallback);
    TensorReport tr{name, std::string(tensor_type_name(w.type)), std::string(tensor_type_name(target)), fallback};
    if (!fallback.empty()) report.fallbacks.push_back(name + ": " + fallback);
    if (target == TensorType::INT4 && w.n_in % o.group_size != 0) {
      tr.note = fmt::format("last group of each row has {} of {} values", w.n_in % o.group_size, o.group_size);
    }
    report.tensors.push_back(tr);

    const int64_t n_out = w.n_out, n_in = w.n_in, ng = int4_n_groups(n_in, o.group_size);
    const std::vector<float>* col = nullptr;  // AWQ: W[:, j] *= s[j]
    const std::vector<float>* row = nullptr;  // AWQ: W[i, :] /= s[i] (the inverse of the next layer's scale)
    if (lin.layer >= 0 && o.method == Method::Awq) {
      const LayerScales& ls = scales[size_t(lin.layer)];
      switch (lin.kind) {
        case Kind::Q: case Kind::K: col = &ls.attn_in; break;
        case Kind::V: col = &ls.attn_in; row = &ls.attn_out_kv; break;
        case Kind::O: col = &ls.attn_out; break;
        case Kind::Gate: col = &ls.ffn_in; break;
        case Kind::Up: col = &ls.ffn_in; row = &ls.ffn_mid; break;
        case Kind::Down: col = &ls.ffn_mid; break;
        default: break;
      }
    }
    auto state = std::make_shared<Encoded>();
    auto encode = [&o, state, target, n_out, n_in, col, row, stats, lin](uint8_t* dst, uint64_t n_bytes) {
      std::vector<float> m = load_f32(*lin.w);
      if (col)
        for (int64_t r = 0; r < n_out; ++r)
          for (int64_t j = 0; j < n_in; ++j) m[size_t(r * n_in + j)] *= (*col)[size_t(j)];
      if (row)
        for (int64_t r = 0; r < n_out; ++r)
          for (int64_t j = 0; j < n_in; ++j) m[size_t(r * n_in + j)] /= (*row)[size_t(r)];
      std::vector<uint8_t> bytes;
      if (target == TensorType::INT4) {
        Int4Matrix q;
        if (o.method == Method::Gptq && lin.layer >= 0) {
          q = int4_gptq(std::move(m), n_out, n_in, o.group_size,
                        stats->layers[size_t(lin.layer)][int(input_of(lin.kind))].hessian_f32());
        } else if (o.method == Method::Awq && o.awq_clip && lin.layer >= 0) {
          // The clipping search sees this matrix's own input, x / s: E[x xᵀ] scaled by 1 / (s_i s_j).
          std::vector<float> h = stats->layers[size_t(lin.layer)][int(input_of(lin.kind))].hessian_f32();
          if (col)
            for (int64_t i = 0; i < n_in; ++i)
              for (int64_t j = 0; j < n_in; ++j) h[size_t(i * n_in + j)] /= (*col)[size_t(i)] * (*col)[size_t(j)];
          q = int4_clip_search(m.data(), n_out, n_in, o.group_size, h);
        } else {
          q = int4_rtn(m.data(), n_out, n_in, o.group_size);
        }
        bytes = std::move(q.data);
        state->companions = {to_bytes(q.scales), to_bytes(q.zeros)};
      } else if (target == TensorType::I8 || target == TensorType::FP8_E4M3) {
        bytes.resize(size_t(n_out * n_in));
        std::vector<float> s(static_cast<size_t>(n_out));
        for (int64_t r = 0; r < n_out; ++r)
          quantize_row(target, &m[size_t(r * n_in)], &bytes[size_t(r * n_in)], n_in, &s[size_t(r)]);
        state->companions = {to_bytes(s)};
      } else {
        const size_t rb = tensor_row_bytes(target, uint64_t(n_in));
        bytes.resize(rb * size_t(n_out));
        for (int64_t r = 0; r < n_out; ++r) quantize_row(target, &m[size_t(r * n_in)], &bytes[size_t(r) * rb], n_in);
      }
      if (bytes.size() != n_bytes) fail("quantize: {} bytes encoded, {} expected", bytes.size(), n_bytes);
      std::memcpy(dst, bytes.data(), n_bytes);
    };
    auto companion = [state](size_t i) {
      return [state, i](uint8_t* dst, uint64_t n_bytes) {
        if (state->companions.size() <= i || state->companions[i].size() != n_bytes) {
          fail("quantize: companion tensor out of order");
        }
        std::memcpy(dst, state->companions[i].data(), n_bytes);
        state->companions[i] = {};
      };
    };
    const uint64_t uo = uint64_t(n_out), ui = uint64_t(n_in);
    switch (target) {
      case TensorType::INT4:
        writer.add_tensor(name, TensorType::I8, {int4_row_bytes(n_in), uo}, encode);
        writer.add_tensor(name + ".scale", TensorType::F16, {uint64_t(ng), uo}, companion(0));
        writer.add_tensor(name + ".zero", TensorType::F16, {uint64_t(ng), uo}, companion(1));
        writer.set_string("tessera.quant." + name + ".format", "int4");
        writer.set_u32("tessera.quant." + name + ".group_size", uint32_t(o.group_size));
        break;
      case TensorType::FP8_E4M3:
        writer.add_tensor(name, TensorType::I8, {ui, uo}, encode);
        writer.add_tensor(name + ".scale", TensorType::F32, {uo}, companion(0));
        writer.set_string("tessera.quant." + name + ".format", "fp8_e4m3");
        break;
      case TensorType::I8:
        writer.add_tensor(name, TensorType::I8, {ui, uo}, encode);
        writer.add_tensor(name + ".scale", TensorType::F32, {uo}, companion(0));
        break;
      default:
        writer.add_tensor(name, target, {ui, uo}, encode);
    }
  };

  auto add_vector = [&](const std::string& name, const float* v, int64_t n, const std::vector<float>& inv_scale) {
    std::vector<float> out(v, v + n);
    for (int64_t i = 0; i < n; ++i) out[size_t(i)] /= inv_scale[size_t(i)];
    writer.add_tensor(name, TensorType::F32, {uint64_t(n)}, to_bytes(out));
    report.tensors.push_back({name, "F32", "F32", "AWQ inverse scale folded in"});
  };

  for (const gguf::TensorInfo& t : file->tensors()) {
    report.bytes_in += t.n_bytes;
    if (auto it = linears.find(t.name); it != linears.end()) {
      add_linear(t.name, it->second);
      continue;
    }
    if (o.method == Method::Awq && t.name.rfind("blk.", 0) == 0) {
      const int64_t l = std::stoll(t.name.substr(4));
      const std::string suffix = t.name.substr(t.name.find('.', 4) + 1);
      const LayerWeights& L = mw.layers[size_t(l)];
      if (suffix == "attn_norm.weight") { add_vector(t.name, L.attn_norm, c.n_embd, scales[size_t(l)].attn_in); continue; }
      if (suffix == "ffn_norm.weight") { add_vector(t.name, L.ffn_norm, c.n_embd, scales[size_t(l)].ffn_in); continue; }
      if (suffix == "attn_v.bias") { add_vector(t.name, L.bv, c.kv_dim(), scales[size_t(l)].attn_out_kv); continue; }
    }
    const uint8_t* data = t.data;
    writer.add_tensor(t.name, t.type, t.dims, [data](uint8_t* dst, uint64_t n) { std::memcpy(dst, data, n); });
    report.tensors.push_back({t.name, std::string(tensor_type_name(t.type)), std::string(tensor_type_name(t.type)), ""});
  }
  if (o.quantize_output && c.tied_output) {  // the embedding stays; the output gets its own quantized copy
    add_linear("output.weight", linears["output.weight"]);
    report.notes.push_back("output.weight: tied to token_embd in the input; written as a separate quantized tensor");
  }

  writer.write(out_path, [&](size_t i, size_t n) {
    if (o.progress) o.progress("write", i, n);
  });
  report.bytes_out = std::filesystem::file_size(out_path);
  return report;
}

}  // namespace tessera::quant
