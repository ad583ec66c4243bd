// Error messages with their template positions.
#include "chat/errors.h"

namespace tessera::chat {

SyntaxError::SyntaxError(int line, int column, const std::string& message)
    : TemplateError("chat template line " + std::to_string(line) + ", column " + std::to_string(column) + ": " +
                    message),
      line_(line),
      column_(column),
      message_(message) {}

RenderError::RenderError(int line, const std::string& message)
    : TemplateError("chat template line " + std::to_string(line) + ": " + message), line_(line) {}

}  // namespace tessera::chat
