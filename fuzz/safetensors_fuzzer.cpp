// libFuzzer target for the safetensors reader: any input must either parse into tensors that lie inside the
// input, tile its data exactly and agree with their dtype and shape, or fail with one tessera::Error line.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>

#include "core/error.h"
#include "formats/safetensors.h"

namespace {

void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "safetensors_fuzzer: invariant violated: %s\n", what);
    std::abort();
  }
}

uint64_t touch(const tessera::SafetensorsFile& file, std::span<const uint8_t> bytes) {
  uint64_t sum = 0, covered = 0;
  const uint8_t* previous_end = nullptr;
  for (const tessera::SafetensorsTensor& t : file.tensors()) {
    require(file.find(t.name) != nullptr, "unfindable tensor");
    uint64_t n = 1;
    for (uint64_t d : t.shape) n *= d;
    require(n == t.n_elements, "n_elements differs from the product of the shape");
    require(t.n_bytes == tessera::tensor_row_bytes(t.type, n), "n_bytes differs from dtype x shape");
    require(t.data >= bytes.data() + 8 && t.n_bytes <= uint64_t(bytes.data() + bytes.size() - t.data),
            "tensor data outside the input");
    require(previous_end == nullptr || t.data == previous_end, "tensors overlap or leave a hole");
    previous_end = t.data + t.n_bytes;
    covered += t.n_bytes;
    for (uint64_t i = 0; i < t.n_bytes; ++i) sum += t.data[i];  // ASan flags any byte past the input
  }
  require(previous_end == nullptr || previous_end == bytes.data() + bytes.size(), "data not covered to the end");
  return sum + covered;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  try {
    const auto file = tessera::SafetensorsFile::from_memory(bytes, "fuzz.safetensors");
    volatile uint64_t sink = touch(*file, bytes);
    (void)sink;
  } catch (const tessera::Error& e) {
    const std::string message = e.what();
    require(message.rfind("fuzz.safetensors: ", 0) == 0, "error message does not start with the file name");
    require(message.find('\n') == std::string::npos, "error message spans several lines");
    require(message.size() < 512, "error message is unreasonably long");
  }
  return 0;
}
