// safetensors parsing and shard resolution. The header is untrusted JSON: every number is range-checked before
// it becomes an offset, and names are escaped before they reach a message.
#include "formats/safetensors.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/error.h"
#include "core/json_file.h"
#include "core/mapped_file.h"
#include "core/printable.h"

namespace tessera {
namespace {

using nlohmann::json;

// The reference implementation refuses headers above 100 MB; a real one is a few hundred kilobytes.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;
constexpr size_t kMaxDims = 8;
constexpr size_t kMaxMessage = 200;

// Element size of every safetensors dtype, so that a file with an unsupported one is reported as such rather
// than as malformed. Only F32/F16/BF16 are handed out.
struct DtypeInfo {
  std::string_view name;
  uint64_t bytes;
};
constexpr DtypeInfo kDtypes[] = {
    {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2},  {"U16", 2}, {"F16", 2},
    {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4},     {"F64", 8},     {"I64", 8},  {"U64", 8},
};

std::optional<TensorType> supported_type(std::string_view dtype) {
  if (dtype == "F32") return TensorType::F32;
  if (dtype == "F16") return TensorType::F16;
  if (dtype == "BF16") return TensorType::BF16;
  return std::nullopt;
}

uint64_t unsigned_field(const json& v, const std::string& file, const std::string& tensor, const char* what) {
  if (!v.is_number_unsigned()) {
    fail("{}: tensor '{}': {} must be a non-negative integer, not {}", file, tensor, what,
         printable(v.dump(), kMaxMessage));
  }
  return v.get<uint64_t>();
}

}  // namespace

std::shared_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  auto mapping = std::make_shared<MappedFile>(path);
  std::shared_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->name_ = path;
  file->mapping_ = mapping;
  file->bytes_ = mapping->bytes();
  file->parse();
  return file;
}

std::shared_ptr<SafetensorsFile> SafetensorsFile::from_memory(std::span<const uint8_t> bytes, std::string name) {
  std::shared_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->name_ = std::move(name);
  file->bytes_ = bytes;
  file->parse();
  return file;
}

void SafetensorsFile::parse() {
  const std::string& file = name_;
  if (bytes_.size() < 8) fail("{}: not a safetensors file: only {} bytes", file, bytes_.size());
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, bytes_.data(), 8);  // little-endian, as every supported host
  if (header_bytes > bytes_.size() - 8) {
    fail("{}: truncated safetensors file: the header claims {} bytes but only {} follow", file, header_bytes,
         bytes_.size() - 8);
  }
  if (header_bytes > kMaxHeaderBytes) fail("{}: safetensors header of {} bytes is too large", file, header_bytes);
  const std::string_view text(reinterpret_cast<const char*>(bytes_.data() + 8), header_bytes);
  json header;
  try {
    header = json::parse(text);
  } catch (const json::exception& e) {
    fail("{}: safetensors header is not valid JSON: {}", file, printable(e.what(), kMaxMessage));
  }
  if (!header.is_object()) fail("{}: safetensors header is not a JSON object", file);

  const uint64_t data_begin = 8 + header_bytes;
  const uint64_t data_size = bytes_.size() - data_begin;
  tensors_.reserve(header.size());
  for (const auto& [key, entry] : header.items()) {
    if (key == "__metadata__") continue;  // free-form strings (format, framework): nothing Tessera needs
    const std::string name = printable(key);
    if (!entry.is_object()) fail("{}: tensor '{}': entry is not an object", file, name);
    if (!entry.contains("dtype") || !entry["dtype"].is_string()) fail("{}: tensor '{}': missing dtype", file, name);
    if (!entry.contains("shape") || !entry["shape"].is_array()) fail("{}: tensor '{}': missing shape", file, name);
    const json& offsets = entry.value("data_offsets", json());
    if (!offsets.is_array() || offsets.size() != 2) fail("{}: tensor '{}': data_offsets must be [begin, end]", file, name);

    const std::string dtype = entry["dtype"].get<std::string>();
    const auto info = std::find_if(std::begin(kDtypes), std::end(kDtypes), [&](const DtypeInfo& d) { return d.name == dtype; });
    if (info == std::end(kDtypes)) fail("{}: tensor '{}' has unknown dtype '{}'", file, name, printable(dtype));
    const std::optional<TensorType> type = supported_type(dtype);
    if (!type) fail("{}: tensor '{}' has dtype {}, which is not supported (F32, F16, BF16)", file, name, dtype);

    SafetensorsTensor t;
    t.name = key;
    t.type = *type;
    const json& shape = entry["shape"];
    if (shape.size() > kMaxDims) fail("{}: tensor '{}' has {} dimensions (at most {})", file, name, shape.size(), kMaxDims);
    t.n_elements = 1;
    for (const json& d : shape) {
      const uint64_t dim = unsigned_field(d, file, name, "a shape dimension");
      // Bounded so the product cannot overflow; no real tensor comes near 2^48 elements.
      if (dim > (uint64_t{1} << 40) || (dim != 0 && t.n_elements > (uint64_t{1} << 48) / dim)) {
        fail("{}: tensor '{}' has an absurd dimension {}", file, name, dim);
      }
      t.n_elements *= dim;
      t.shape.push_back(dim);
    }
    t.n_bytes = t.n_elements * info->bytes;
    const uint64_t begin = unsigned_field(offsets[0], file, name, "data_offsets[0]");
    const uint64_t end = unsigned_field(offsets[1], file, name, "data_offsets[1]");
    if (begin > end) fail("{}: tensor '{}': data_offsets [{}, {}] are reversed", file, name, begin, end);
    if (end > data_size) {
      fail("{}: tensor '{}': data_offsets [{}, {}] run past the end of the file ({} data bytes)", file, name, begin,
           end, data_size);
    }
    if (end - begin != t.n_bytes) {
      fail("{}: tensor '{}': {} {} needs {} bytes but data_offsets [{}, {}] hold {}", file, name, dtype,
           fmt::format("[{}]", fmt::join(t.shape, ", ")), t.n_bytes, begin, end, end - begin);
    }
    if (begin % info->bytes != 0) {
      fail("{}: tensor '{}': data offset {} is not aligned to its {}-byte elements", file, name, begin, info->bytes);
    }
    t.data = bytes_.data() + data_begin + begin;
    tensors_.push_back(std::move(t));
  }

  // The format requires the ranges to tile the data exactly (no overlaps, no holes): a file whose ranges
  // overlap could alias one tensor onto another, and holes could hide a second payload.
  std::sort(tensors_.begin(), tensors_.end(), [](const SafetensorsTensor& a, const SafetensorsTensor& b) {
    return a.data != b.data ? a.data < b.data : a.n_bytes < b.n_bytes;
  });
  uint64_t expected = 0;
  for (const SafetensorsTensor& t : tensors_) {
    const uint64_t begin = uint64_t(t.data - bytes_.data()) - data_begin;
    if (begin < expected) fail("{}: tensor '{}' overlaps the tensor before it (offset {})", file, printable(t.name), begin);
    if (begin > expected) fail("{}: bytes {}..{} of the data belong to no tensor", file, expected, begin);
    expected = begin + t.n_bytes;
  }
  if (expected != data_size) fail("{}: {} bytes after the last tensor belong to no tensor", file, data_size - expected);
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  for (const SafetensorsTensor& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

bool SafetensorsFile::rewrite_private(const uint8_t* p, size_t n, const std::function<void(uint8_t*)>& fn) {
  if (mapping_ == nullptr || p < bytes_.data() || n > bytes_.size() || size_t(p - bytes_.data()) > bytes_.size() - n) {
    return false;
  }
  mapping_->rewrite_private(size_t(p - bytes_.data()), n, fn);
  return true;
}

std::shared_ptr<SafetensorsFolder> SafetensorsFolder::open(const std::string& dir) {
  namespace fs = std::filesystem;
  auto folder = std::make_shared<SafetensorsFolder>();
  folder->dir_ = dir;
  const fs::path index_path = fs::path(dir) / "model.safetensors.index.json";
  const fs::path single_path = fs::path(dir) / "model.safetensors";

  // name -> shard file name, in the order tensors are listed.
  std::vector<std::pair<std::string, std::string>> wanted;
  if (fs::exists(index_path)) {
    const json index = read_json_file(index_path.string());
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
      fail("{}: no weight_map object", index_path.string());
    }
    for (const auto& [name, shard] : index["weight_map"].items()) {
      if (!shard.is_string()) fail("{}: weight_map['{}'] is not a file name", index_path.string(), printable(name));
      const std::string file = shard.get<std::string>();
      // Shards live beside the index; a path could point anywhere on the machine.
      if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..") {
        fail("{}: weight_map['{}'] = '{}' is not a file name in the folder", index_path.string(), printable(name),
             printable(file));
      }
      wanted.emplace_back(name, file);
    }
    if (wanted.empty()) fail("{}: weight_map is empty", index_path.string());
  } else if (!fs::exists(single_path)) {
    fail("{}: no model.safetensors or model.safetensors.index.json", dir);
  }

  if (wanted.empty()) {
    folder->shards_.push_back(SafetensorsFile::open(single_path.string()));
    for (const SafetensorsTensor& t : folder->shards_[0]->tensors()) {
      folder->tensors_.push_back(&t);
      folder->tensor_shard_.push_back(0);
    }
  } else {
    std::vector<std::string> shard_files;
    for (const auto& [name, file] : wanted) {
      if (std::find(shard_files.begin(), shard_files.end(), file) == shard_files.end()) shard_files.push_back(file);
    }
    for (const std::string& file : shard_files) {
      const fs::path path = fs::path(dir) / file;
      if (!fs::exists(path)) fail("{}: missing shard '{}' named by model.safetensors.index.json", dir, printable(file));
      folder->shards_.push_back(SafetensorsFile::open(path.string()));
    }
    for (const auto& [name, file] : wanted) {
      const size_t shard = size_t(std::find(shard_files.begin(), shard_files.end(), file) - shard_files.begin());
      const SafetensorsTensor* t = folder->shards_[shard]->find(name);
      if (t == nullptr) {
        fail("{}: tensor '{}' is not in shard '{}' where model.safetensors.index.json puts it", dir, printable(name),
             printable(file));
      }
      folder->tensors_.push_back(t);
      folder->tensor_shard_.push_back(shard);
    }
  }

  // Sorted by name for lookups; a name in two places would make the folder ambiguous.
  std::vector<size_t> order(folder->tensors_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return folder->tensors_[a]->name < folder->tensors_[b]->name; });
  std::vector<const SafetensorsTensor*> tensors;
  std::vector<size_t> shards;
  for (size_t i : order) {
    if (!tensors.empty() && tensors.back()->name == folder->tensors_[i]->name) {
      fail("{}: tensor '{}' appears more than once", dir, printable(tensors.back()->name));
    }
    tensors.push_back(folder->tensors_[i]);
    shards.push_back(folder->tensor_shard_[i]);
  }
  folder->tensors_ = std::move(tensors);
  folder->tensor_shard_ = std::move(shards);
  return folder;
}

const SafetensorsTensor* SafetensorsFolder::find(const std::string& name) const {
  const auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                                   [](const SafetensorsTensor* t, const std::string& n) { return t->name < n; });
  return it != tensors_.end() && (*it)->name == name ? *it : nullptr;
}

bool SafetensorsFolder::rewrite_private(const uint8_t* p, size_t n, const std::function<void(uint8_t*)>& fn) const {
  for (const auto& shard : shards_) {
    if (shard->rewrite_private(p, n, fn)) return true;
  }
  return false;
}

const std::string& SafetensorsFolder::shard_name(const SafetensorsTensor& t) const {
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (tensors_[i] == &t) return shards_[tensor_shard_[i]]->name();
  }
  return dir_;
}

}  // namespace tessera
