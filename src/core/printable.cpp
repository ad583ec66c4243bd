// printable(): escaping for untrusted text in error messages.
#include "core/printable.h"

#include <fmt/format.h>

namespace tessera {

std::string printable(std::string_view text, size_t max_bytes) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (i == max_bytes) {
      out += fmt::format("...({} bytes)", text.size());
      break;
    }
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  return out;
}

}  // namespace tessera
