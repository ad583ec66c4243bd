#include "core/json_shape.h"

#include <algorithm>
#include <vector>

namespace tessera {

JsonShape json_shape(std::string_view text) {
  JsonShape shape;
  // Per open container: its members so far (commas + 1), or kArray.
  constexpr size_t kArray = SIZE_MAX;
  std::vector<size_t> open;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;  // the escaped character cannot end the string
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
      // An object's first key: it has a member (an empty object never reaches here).
      if (!open.empty() && open.back() == 0) shape.widest_object = std::max<size_t>(shape.widest_object, open.back() = 1);
    } else if (c == '[' || c == '{') {
      open.push_back(c == '[' ? kArray : 0);
      shape.depth = std::max(shape.depth, open.size());
    } else if (c == ']' || c == '}') {
      if (!open.empty()) open.pop_back();
    } else if (c == ',' && !open.empty() && open.back() != kArray) {
      shape.widest_object = std::max(shape.widest_object, ++open.back());
    }
  }
  return shape;
}

}  // namespace tessera
