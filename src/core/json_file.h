// Reading small text and JSON files (configs, tokenizers, indexes, templates) with errors that name the file.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace tessera {

// The whole file; throws tessera::Error "<path>: cannot open file".
std::string read_text_file(const std::string& path);
// Throws tessera::Error "<path>: cannot open file" or "<path>: not valid JSON: ..." (one line).
nlohmann::json read_json_file(const std::string& path);

}  // namespace tessera
