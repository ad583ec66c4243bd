// Where tests find shared data (../shared beside the repo, or $TESSERA_SHARED_DIR) and the built binary.
#pragma once

#include <cstdlib>
#include <string>

namespace tessera::testing {

inline std::string shared_dir() {
  if (const char* env = std::getenv("TESSERA_SHARED_DIR")) return env;
  return TESSERA_SHARED_DIR;
}
inline std::string shared_path(const std::string& relative) { return shared_dir() + "/" + relative; }
inline std::string source_path(const std::string& relative) { return std::string(TESSERA_SOURCE_DIR) + "/" + relative; }
inline std::string tessera_binary() { return TESSERA_BINARY; }

}  // namespace tessera::testing
