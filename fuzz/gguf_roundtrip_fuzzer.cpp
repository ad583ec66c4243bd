// libFuzzer target for the writer: whatever the reader accepts, the writer must write back so that the reader
// finds the same metadata and the same tensor bytes. Slower than gguf_fuzzer (a file per input), so separate.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>

#include "core/error.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"

namespace {

using tessera::gguf::Array;
using tessera::gguf::File;
using tessera::gguf::TensorInfo;
using tessera::gguf::Value;
using tessera::gguf::Writer;

void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "gguf_roundtrip_fuzzer: %s\n", what);
    std::abort();
  }
}

bool same_value(const Value& a, const Value& b) {
  if (a.type != b.type || a.data.index() != b.data.index()) return false;
  if (const auto* x = std::get_if<Array>(&a.data)) {
    const Array& y = std::get<Array>(b.data);
    if (x->element_type() != y.element_type() || x->size() != y.size()) return false;
    for (size_t i = 0; i < x->size(); ++i) {
      if (!same_value(x->at(i), y.at(i))) return false;
    }
    return true;
  }
  if (const auto* d = std::get_if<double>(&a.data)) {
    const double e = std::get<double>(b.data);
    return std::memcmp(d, &e, sizeof e) == 0;
  }
  if (const auto* u = std::get_if<uint64_t>(&a.data)) return *u == std::get<uint64_t>(b.data);
  if (const auto* i = std::get_if<int64_t>(&a.data)) return *i == std::get<int64_t>(b.data);
  if (const auto* f = std::get_if<bool>(&a.data)) return *f == std::get<bool>(b.data);
  return std::get<std::string>(a.data) == std::get<std::string>(b.data);
}

std::string scratch_path() {
  const char* tmpdir = std::getenv("TMPDIR");
  const char* dir = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : (tmpdir != nullptr ? tmpdir : "/tmp");
  return std::string(dir) + "/tessera-gguf-roundtrip-" + std::to_string(::getpid()) + ".gguf";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::shared_ptr<File> original;
  try {
    original = File::from_memory(std::span<const uint8_t>(data, size), "fuzz.gguf");
  } catch (const tessera::Error&) {
    return 0;  // gguf_fuzzer covers rejected inputs
  }
  static const std::string path = scratch_path();
  static const struct Cleanup {
    ~Cleanup() { std::remove(path.c_str()); }
  } cleanup;
  Writer w(original->alignment());
  for (const auto& [key, value] : original->metadata()) w.set(key, value);
  for (const TensorInfo& t : original->tensors()) {
    const uint8_t* src = t.data;
    w.add_tensor(t.name, t.type, t.dims, [src](uint8_t* dst, uint64_t n) { std::memcpy(dst, src, n); });
  }
  w.write(path);  // a tessera::Error here is a bug: the writer refused what the reader accepted
  const auto copy = File::open(path);
  require(copy->alignment() == original->alignment(), "alignment changed");
  require(copy->metadata().size() == original->metadata().size(), "metadata count changed");
  for (size_t i = 0; i < copy->metadata().size(); ++i) {
    require(copy->metadata()[i].first == original->metadata()[i].first, "metadata key changed");
    require(same_value(copy->metadata()[i].second, original->metadata()[i].second), "metadata value changed");
  }
  require(copy->tensors().size() == original->tensors().size(), "tensor count changed");
  for (size_t i = 0; i < copy->tensors().size(); ++i) {
    const TensorInfo& a = copy->tensors()[i];
    const TensorInfo& b = original->tensors()[i];
    require(a.name == b.name && a.dims == b.dims && a.type == b.type && a.n_bytes == b.n_bytes, "tensor changed");
    require(std::memcmp(a.data, b.data, a.n_bytes) == 0, "tensor bytes changed");
  }
  return 0;
}
