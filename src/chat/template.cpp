// Template: parse once, render per request.
#include "chat/template.h"

#include "chat/interpreter.h"
#include "chat/lexer.h"
#include "chat/parser.h"

namespace tessera::chat {

Template Template::parse(std::string_view source) {
  return Template(std::make_shared<const Body>(chat::parse(lex(source))));
}

std::string Template::render(const Dict& context, const RenderOptions& options) const {
  const WorkBudget budget(options.max_work);
  return Interpreter(context, options.now).run(*body_);
}

}  // namespace tessera::chat
