// The shape of JSON text, counted over the text before anything recurses over or indexes the parsed value: how
// deeply arrays and objects nest (nlohmann's destructor and dump recurse once per level) and how many members the
// widest object has (nlohmann's ordered_json finds each key by a linear search: a 1 MiB body of 105,000 keys in
// one object took 20 s to parse).
#pragma once

#include <cstddef>
#include <string_view>

namespace tessera {

struct JsonShape {
  size_t depth = 0;           // the deepest nesting of arrays and objects
  size_t widest_object = 0;   // the most members of one object
};

// The shape of `text`, which is valid JSON.
JsonShape json_shape(std::string_view text);

}  // namespace tessera
