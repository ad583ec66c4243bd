// read_json_file(): the whole file, parsed; parser messages are escaped because they quote the input.
#include "core/json_file.h"

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/printable.h"

namespace tessera {

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open file", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

nlohmann::json read_json_file(const std::string& path) {
  const std::string text = read_text_file(path);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: not valid JSON: {}", path, printable(e.what(), 200));
  }
}

}  // namespace tessera
