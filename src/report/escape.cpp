#include "report/escape.h"

#include <algorithm>
#include <cstdint>

namespace imgcheck::report {

namespace {

// Length of the valid UTF-8 sequence at s[i] (RFC 3629: no overlongs, no surrogates, at most
// U+10FFFF), 0 when the byte there starts none; its code point in `cp`.
size_t Utf8Length(std::string_view s, size_t i, uint32_t& cp) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  unsigned char c = b(0);
  size_t n;
  uint32_t min;
  if (c < 0x80) {
    cp = c;
    return 1;
  } else if ((c & 0xE0) == 0xC0) {
    n = 2, cp = c & 0x1F, min = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3, cp = c & 0x0F, min = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4, cp = c & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (s.size() - i < n) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(k) & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

void Hex(std::string& out, unsigned char c) {
  static constexpr char kDigits[] = "0123456789ABCDEF";
  out += "\\x";
  out += kDigits[c >> 4];
  out += kDigits[c & 0xF];
}

bool IsControl(uint32_t cp) {
  return (cp < 0x20 && cp != '\t') || cp == 0x7F || (cp >= 0x80 && cp < 0xA0);
}

// True when `s` is valid UTF-8 and, with `controls`, holds no control character.
bool Clean(std::string_view s, bool controls) {
  uint32_t cp;
  for (size_t i = 0; i < s.size();) {
    size_t n = Utf8Length(s, i, cp);
    if (n == 0 || (controls && IsControl(cp))) return false;
    i += n;
  }
  return true;
}

// `s` as is when no character in it needs escaping; otherwise each byte of an invalid sequence
// (and of a control character, with `controls`) as "\xHH" and each backslash as "\\", so that
// the bytes can be recovered from the result (rules/README.md, "Names that are not UTF-8").
std::string Escape(std::string_view s, bool controls) {
  if (Clean(s, controls)) return std::string(s);
  std::string out;
  out.reserve(s.size() + 8);
  uint32_t cp;
  for (size_t i = 0; i < s.size();) {
    size_t n = Utf8Length(s, i, cp);
    size_t step = std::max<size_t>(n, 1);
    if (n == 0 || (controls && IsControl(cp))) {
      for (size_t k = 0; k < step; ++k) Hex(out, static_cast<unsigned char>(s[i + k]));
    } else if (s[i] == '\\') {
      out += "\\\\";
    } else {
      out.append(s.substr(i, n));
    }
    i += step;
  }
  return out;
}

}  // namespace

std::string Visible(std::string_view s) { return Escape(s, true); }

std::string VisibleLines(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t at = 0; at < text.size();) {
    size_t nl = text.find('\n', at);
    size_t end = nl == std::string_view::npos ? text.size() : nl;
    out += Visible(text.substr(at, end - at));
    if (nl != std::string_view::npos) out += '\n';
    at = end + 1;
  }
  return out;
}

std::string LogLine(std::string_view message) {
  size_t end = message.find_last_not_of(" \t\n\r");
  return Visible(message.substr(0, end == std::string_view::npos ? 0 : end + 1));
}

std::string JsonText(std::string_view s) { return Escape(s, false); }

namespace {

// DEL and the C1 controls are valid JSON string characters that the dump leaves raw, yet a
// terminal obeys U+009B (CSI) like ESC [: written as \u escapes they read back the same.
std::string EscapeRawControls(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    unsigned char next = i + 1 < text.size() ? static_cast<unsigned char>(text[i + 1]) : 0;
    if (c == 0x7F || (c == 0xC2 && next >= 0x80 && next < 0xA0)) {
      static constexpr char kDigits[] = "0123456789abcdef";
      unsigned cp = c == 0x7F ? 0x7F : next;
      out += "\\u00";
      out += kDigits[cp >> 4];
      out += kDigits[cp & 0xF];
      i += c == 0xC2;  // valid UTF-8 (JsonText saw to it): 0xC2 here always leads a pair
      continue;
    }
    out += text[i];
  }
  return out;
}

template <typename Json>
std::string Dump(Json j, int indent) {
  TransformStrings(j, [](const std::string& s) { return JsonText(s); });
  return EscapeRawControls(j.dump(indent));
}

}  // namespace

std::string DumpJson(const nlohmann::ordered_json& j, int indent) { return Dump(j, indent); }
std::string DumpJson(const nlohmann::json& j, int indent) { return Dump(j, indent); }

}  // namespace imgcheck::report
