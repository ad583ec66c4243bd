// How deeply JSON text nests, counted over the text: the request parser refuses bodies past a depth before
// anything recurses over the parsed value (nlohmann's destructor and dump included).
#pragma once

#include <cstddef>
#include <string_view>

namespace tessera {

// The deepest nesting of arrays and objects in `text`, which is valid JSON.
size_t json_nesting(std::string_view text);

}  // namespace tessera
