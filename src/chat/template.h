// A chat template: Jinja source parsed once, rendered per request. The interpreter implements the subset of
// Jinja that chat templates use, with Hugging Face's environment (ImmutableSandboxedEnvironment with
// trim_blocks, lstrip_blocks and loop controls; tojson as json.dumps; raise_exception; strftime_now), and
// renders byte for byte what Python's jinja2 renders. docs/chat_templates.md lists what is supported.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "chat/ast.h"
#include "chat/builtins.h"
#include "chat/errors.h"
#include "chat/value.h"
#include "chat/work_budget.h"

namespace tessera::chat {

struct RenderOptions {
  Clock now;  // strftime_now's clock; empty: the system clock
  uint64_t max_work = kDefaultMaxWork;  // the render's work budget (chat/work_budget.h)
};

class Template {
 public:
  // Throws SyntaxError (line, column, message) for text that does not parse and for constructs the
  // interpreter does not support (a tag, filter or test it does not implement).
  static Template parse(std::string_view source);

  // Renders with `context` as the template's variables. Throws RaisedError for the template's own
  // raise_exception(), RenderError for what Python would raise (or an unsupported operation on these values) and
  // for a render that passes the interpreter's limits (output and string sizes, nesting, work budget).
  std::string render(const Dict& context, const RenderOptions& options = {}) const;

 private:
  explicit Template(std::shared_ptr<const Body> body) : body_(std::move(body)) {}
  std::shared_ptr<const Body> body_;  // immutable: one parsed template renders concurrently
};

}  // namespace tessera::chat
