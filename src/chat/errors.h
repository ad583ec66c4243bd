// Errors of the chat-template interpreter. All are tessera::Error (bad input, never a crash): a template that
// does not parse, a construct the interpreter does not support, an operation Python would reject while
// rendering, and the template's own raise_exception().
#pragma once

#include <string>

#include "core/error.h"

namespace tessera::chat {

class TemplateError : public Error {
 public:
  using Error::Error;
};

// The template text does not parse, or uses a construct this interpreter does not support. Raised by
// Template::parse; what() reads "chat template line L, column C: <message>".
class SyntaxError : public TemplateError {
 public:
  SyntaxError(int line, int column, const std::string& message);
  int line() const { return line_; }
  int column() const { return column_; }
  const std::string& message() const { return message_; }

 private:
  int line_, column_;
  std::string message_;
};

// Rendering failed the way Python would fail (a type error, an undefined value used, ...) or reached a
// construct that is only unsupported for the values at hand. what() reads "chat template line L: <message>".
class RenderError : public TemplateError {
 public:
  RenderError(int line, const std::string& message);
  int line() const { return line_; }

 protected:
  struct Raw {};
  RenderError(Raw, int line, const std::string& text) : TemplateError(text), line_(line) {}

 private:
  int line_;
};

// The template called raise_exception(message): what() is exactly `message`, as Hugging Face reports it.
class RaisedError : public RenderError {
 public:
  RaisedError(int line, const std::string& message) : RenderError(Raw{}, line, message) {}
};

}  // namespace tessera::chat
