// JSON Schema string formats as regular expressions over the string's characters: the formats OpenAI's
// structured outputs list (date-time, time, date, duration, email, hostname, ipv4, ipv6, uuid). Each pattern
// generates only strings that the format's usual validators (ajv-formats in full mode, Python's jsonschema)
// accept: dates have real day counts (29 February only in leap years), times carry a time zone, hostnames and
// e-mail parts have bounded lengths. Some valid strings cannot be generated (IPv6 only in its uncompressed
// form, e-mail without quoted local parts); see docs/structured_output.md.
#pragma once

#include <string_view>

namespace tessera::grammar {

// The pattern for `format`, or an empty view when the format is not supported.
std::string_view json_format_pattern(std::string_view format);

}  // namespace tessera::grammar
