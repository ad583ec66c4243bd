// Errors in a grammar, regular expression or JSON schema a request supplied: the message says what is wrong
// and where (a rule name, a schema path, a column), for a 400 answer.
#pragma once

#include <string>

#include "core/error.h"

namespace tessera::grammar {

class GrammarError : public Error {
 public:
  explicit GrammarError(const std::string& message) : Error(message) {}
};

template <typename... Args>
[[noreturn]] void grammar_fail(fmt::format_string<Args...> format, Args&&... args) {
  throw GrammarError(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace tessera::grammar
