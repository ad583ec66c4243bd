// SSE framing and parsing.
#include "server/sse.h"

namespace tessera::server {

std::string sse_event(std::string_view payload) {
  std::string out;
  out.reserve(payload.size() + 8);
  size_t start = 0;
  while (true) {
    const size_t nl = payload.find('\n', start);
    out += "data: ";
    out.append(payload.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start));
    out += '\n';
    if (nl == std::string_view::npos) break;
    start = nl + 1;
  }
  out += '\n';
  return out;
}

bool SseParser::next(SseEvent& out) {
  // Events end with a blank line; accept \n\n and \r\n\r\n.
  size_t end = std::string::npos, sep = 0;
  for (size_t i = 0; i + 1 < buffer_.size(); ++i) {
    if (buffer_[i] == '\n' && buffer_[i + 1] == '\n') { end = i; sep = 2; break; }
    if (buffer_[i] == '\n' && buffer_[i + 1] == '\r' && i + 2 < buffer_.size() && buffer_[i + 2] == '\n') {
      end = i; sep = 3; break;
    }
  }
  if (end == std::string::npos) return false;
  const std::string event = buffer_.substr(0, end + 1);
  buffer_.erase(0, end + sep);
  out.data.clear();
  out.error.clear();
  bool first = true, error_type = false;
  // A field's value: the line after "name:", less one leading space.
  const auto field = [](std::string_view line, std::string_view name, std::string_view& value) {
    if (line.substr(0, name.size()) != name || line.substr(name.size(), 1) != ":") return false;
    value = line.substr(name.size() + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    return true;
  };
  size_t pos = 0;
  while (pos < event.size()) {
    size_t nl = event.find('\n', pos);
    if (nl == std::string::npos) nl = event.size();
    std::string_view line(event.data() + pos, nl - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    std::string_view value;
    if (field(line, "data", value)) {
      if (!first) out.data += '\n';
      out.data.append(value);
      first = false;
    } else if (field(line, "error", value)) {
      out.error = value.empty() ? "error" : std::string(value);
    } else if (field(line, "event", value)) {
      error_type = value == "error";
    }
    pos = nl + 1;
  }
  if (error_type && out.error.empty()) out.error = out.data.empty() ? "error" : out.data;
  return true;
}

bool SseParser::next(std::string& data) {
  SseEvent event;
  if (!next(event)) return false;
  data = std::move(event.data);
  return true;
}

}  // namespace tessera::server
