// The format patterns.
#include "grammar/json_formats.h"

#include <utility>

namespace tessera::grammar {
namespace {

// Days per month; 02-29 only after a leap year (divisible by 4 and not by 100, or by 400).
#define TESSERA_DATE                                                                                        \
  "(?:[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|"    \
  "02-(?:0[1-9]|1[0-9]|2[0-8]))|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)" \
  "-02-29)"
// Always with a time zone: some validators require one.
#define TESSERA_TIME "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{1,9})?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
#define TESSERA_LABEL "[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
#define TESSERA_ATOM "[a-z0-9!#$%&'*+/=?^_`{|}~-]"
#define TESSERA_OCTET "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
#define TESSERA_DIGITS "[0-9]{1,6}"

constexpr std::pair<std::string_view, std::string_view> kFormats[] = {
    {"date", TESSERA_DATE},
    {"time", TESSERA_TIME},
    {"date-time", TESSERA_DATE "T" TESSERA_TIME},
    // At least one part; T only with a time part after it; weeks alone.
    {"duration",
     "P(?:(?:" TESSERA_DIGITS "Y(?:" TESSERA_DIGITS "M)?(?:" TESSERA_DIGITS "D)?|" TESSERA_DIGITS "M(?:" TESSERA_DIGITS
     "D)?|" TESSERA_DIGITS "D)(?:T(?:" TESSERA_DIGITS "H(?:" TESSERA_DIGITS "M)?(?:" TESSERA_DIGITS "S)?|" TESSERA_DIGITS
     "M(?:" TESSERA_DIGITS "S)?|" TESSERA_DIGITS "S))?|T(?:" TESSERA_DIGITS "H(?:" TESSERA_DIGITS "M)?(?:" TESSERA_DIGITS
     "S)?|" TESSERA_DIGITS "M(?:" TESSERA_DIGITS "S)?|" TESSERA_DIGITS "S)|" TESSERA_DIGITS "W)"},
    {"email", TESSERA_ATOM "{1,32}(?:\\." TESSERA_ATOM "{1,32}){0,3}@(?:" TESSERA_LABEL "\\.){1,3}" TESSERA_LABEL},
    // At most three labels of 63: well within the 253 characters a hostname may have.
    {"hostname", TESSERA_LABEL "(?:\\." TESSERA_LABEL "){0,2}"},
    {"ipv4", TESSERA_OCTET "(?:\\." TESSERA_OCTET "){3}"},
    {"ipv6", "[0-9a-f]{1,4}(?::[0-9a-f]{1,4}){7}"},
    {"uuid", "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"},
};

#undef TESSERA_DATE
#undef TESSERA_TIME
#undef TESSERA_LABEL
#undef TESSERA_ATOM
#undef TESSERA_OCTET
#undef TESSERA_DIGITS

}  // namespace

std::string_view json_format_pattern(std::string_view format) {
  for (const auto& [name, pattern] : kFormats)
    if (name == format) return pattern;
  return {};
}

}  // namespace tessera::grammar
