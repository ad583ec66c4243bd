// UTF-8 well-formedness per Unicode table 3-7.
#include "core/utf8.h"

#include <cstdint>

namespace tessera::utf8 {

Seq scan(std::string_view text, size_t pos) {
  const auto lead = static_cast<uint8_t>(text[pos]);
  if (lead < 0x80) return {SeqState::Valid, 1};
  size_t need = 0;
  // The second byte's range is what rules out overlong forms, surrogates and code points past U+10FFFF.
  uint8_t lo = 0x80, hi = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    need = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    need = 3;
    if (lead == 0xE0) lo = 0xA0;
    if (lead == 0xED) hi = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    need = 4;
    if (lead == 0xF0) lo = 0x90;
    if (lead == 0xF4) hi = 0x8F;
  } else {
    return {SeqState::Invalid, 1};  // a continuation byte, C0/C1 or F5..FF
  }
  for (size_t i = 1; i < need; ++i) {
    if (pos + i >= text.size()) return {SeqState::Truncated, i};
    const auto byte = static_cast<uint8_t>(text[pos + i]);
    if (byte < lo || byte > hi) return {SeqState::Invalid, i};
    lo = 0x80;
    hi = 0xBF;
  }
  return {SeqState::Valid, need};
}

std::string sanitize(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const Seq seq = scan(text, pos);
    if (seq.state == SeqState::Valid) {
      out.append(text.substr(pos, seq.length));
    } else {
      out.append(kReplacement);
    }
    pos += seq.length;
  }
  return out;
}

bool is_valid(std::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    const Seq seq = scan(text, pos);
    if (seq.state != SeqState::Valid) return false;
    pos += seq.length;
  }
  return true;
}

void append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

uint32_t decode(std::string_view text, size_t& pos) {
  const auto lead = static_cast<uint8_t>(text[pos]);
  if (lead < 0x80) {
    ++pos;
    return lead;
  }
  const Seq seq = scan(text, pos);
  if (seq.state != SeqState::Valid) {
    pos += seq.length;
    return 0xFFFD;
  }
  uint32_t cp = lead & (0x7F >> seq.length);
  for (size_t k = 1; k < seq.length; ++k) cp = (cp << 6) | (static_cast<uint8_t>(text[pos + k]) & 0x3F);
  pos += seq.length;
  return cp;
}

}  // namespace tessera::utf8
