// Random-weight models at a preset's real shape: written to GGUF (make-model) or built in memory (bench
// --preset). Both draw the same numbers: a weight is a pure function of (seed, tensor, row, column), so a file
// and an in-memory model made with one seed hold identical bytes, however many threads filled them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor_type.h"
#include "core/thread_pool.h"
#include "core/weight_types.h"  // weight_type_from_name, the --type parser
#include "formats/gguf.h"
#include "model/model.h"
#include "model/presets.h"
#include "tokenizer/vocab.h"

namespace tessera {

// Where fill_synthetic_rows leaves the side data of the types that carry it outside their rows (indexed by
// row; null when the type has none): I8 and FP8 one F32 scale per row, INT4 an fp16 scale and zero point per
// group ([n_rows, n_groups]).
struct SyntheticRowParams {
  float* row_scales = nullptr;
  uint16_t* group_scales = nullptr;
  uint16_t* group_zeros = nullptr;
};

// One tensor of a synthetic model, in file order.
struct SyntheticTensor {
  enum class Fill { Ones, Normal };

  std::string name;
  TensorType type;
  int64_t n_in = 0;    // row length (GGUF dims[0])
  int64_t n_rows = 1;  // 1 for a vector
  bool is_matrix = false;
  Fill fill = Fill::Normal;
  float stddev = 0.0f;
  uint64_t seed = 0;   // per tensor, derived from the model seed and the name
  int64_t group = 0;   // INT4: values per group

  uint64_t row_bytes() const { return tensor_row_bytes(type, uint64_t(n_in)); }
  uint64_t n_bytes() const { return row_bytes() * uint64_t(n_rows); }
  // TensorType::I8 and FP8_E4M3 matrices carry a separate F32 tensor "<name>.scale" with one scale per row.
  bool has_row_scales() const { return type == TensorType::I8 || type == TensorType::FP8_E4M3; }
  // TensorType::INT4 matrices carry F16 tensors "<name>.scale" and "<name>.zero", [n_groups] per row.
  bool has_group_params() const { return type == TensorType::INT4; }
  int64_t n_groups() const { return has_group_params() ? (n_in + group - 1) / group : 0; }
  uint64_t side_bytes() const {  // the companion tensors' bytes
    return has_row_scales() ? uint64_t(n_rows) * 4 : uint64_t(n_rows) * uint64_t(n_groups()) * 4;
  }
};

struct SyntheticPlan {
  std::vector<SyntheticTensor> tensors;
  std::vector<std::string> notes;  // one line per matrix stored in another type than asked (block size)
  uint64_t n_bytes() const;        // all tensor bytes, companion tensors (scales, zero points) included
};

// The tensors of `preset` with weight type `type` (norms and biases F32). A matrix whose row length is not a
// multiple of the type's block size is stored in the nearest type that fits (Q4_K → Q4_0, Q6_K → Q8_0, then
// F16) and noted; INT4 (groups of `int4_group`, a shorter last group allowed) and FP8 fit any row. Throws
// tessera::Error for a type Tessera cannot compute with or an invalid INT4 group.
SyntheticPlan plan_synthetic_model(const ModelPreset& preset, TensorType type, uint64_t seed,
                                   int64_t int4_group = 32);

// Encodes rows [row_begin, row_end) of `t` into dst (row r at dst + r * row_bytes) and their side data into
// `params`. Matrices are normal(0, stddev) (an approximation from four uniforms) quantized round-to-nearest,
// vectors ones.
void fill_synthetic_rows(const SyntheticTensor& t, int64_t row_begin, int64_t row_end, uint8_t* dst,
                         const SyntheticRowParams& params);

// A SentencePiece ("llama") vocabulary of n_tokens: <unk>, <s>, </s>, the 256 byte tokens, then every string
// of one, two, three... characters over a small alphabet, so that any merge chain the BPE needs exists.
Vocab synthetic_vocab(int64_t n_tokens);

struct WriteProgress {
  size_t tensor = 0, n_tensors = 0;
  uint64_t bytes = 0, total_bytes = 0;
};

// Writes `preset` with random weights to `path` (GGUF v3). The tokenizer keys are `tokenizer` when given
// (tokenizer_metadata_of() another GGUF file, or vocab_metadata() of a tokenizer.json; at most preset.n_vocab
// tokens), else synthetic_vocab(preset.n_vocab). Rows are generated and quantized in the writer's per-tensor
// producer on `pool`, so memory stays bounded by the largest tensor.
void write_synthetic_model(const ModelPreset& preset, const SyntheticPlan& plan, const std::string& path,
                           const gguf::Metadata* tokenizer, ThreadPool& pool,
                           const std::function<void(const WriteProgress&)>& on_progress = {});

// The same model built in memory (Model::from_parts), weights in anonymous memory, with a synthetic
// vocabulary. Throws tessera::Error when the weights would not fit the available memory.
std::shared_ptr<Model> make_synthetic_model(const ModelPreset& preset, const SyntheticPlan& plan, ThreadPool& pool,
                                            const LoadOptions& options = {});

}  // namespace tessera
