// Token text -> id, looked up by std::string_view without building a std::string (a transparent hash): the
// tokenizers probe it with slices of the input text on every merge and match.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace tessera {

struct TransparentStringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

using TokenIdMap = std::unordered_map<std::string, int32_t, TransparentStringHash, std::equal_to<>>;

}  // namespace tessera
