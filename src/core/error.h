// Error types: bad input (files, requests, flags) is reported with tessera::Error; bugs abort via CHECK.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace tessera {

// Thrown for bad input that the caller can report: a corrupt file, a missing key, an invalid flag.
// Never thrown on the hot path (the per-token loop), only at load/parse/validation time.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace tessera
