// Names and messages that come from files, made safe to put in a one-line error message.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tessera {

// Names read from a file could hold newlines, escape codes or megabytes: non-printable bytes (and '\') become
// \xNN and anything past `max_bytes` is cut, with the full length noted.
std::string printable(std::string_view text, size_t max_bytes = 64);

}  // namespace tessera
