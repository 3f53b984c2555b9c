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

bool ValidUtf8(std::string_view s) {
  uint32_t cp;
  for (size_t i = 0; i < s.size();) {
    size_t n = Utf8Length(s, i, cp);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

template <typename Json>
void Sanitize(Json& j) {
  if (j.is_string()) {
    const auto& s = j.template get_ref<const std::string&>();
    if (!ValidUtf8(s)) j = JsonText(s);
  } else if (j.is_array()) {
    for (auto& e : j) Sanitize(e);
  } else if (j.is_object()) {
    Json fixed = Json::object();
    for (auto& [key, value] : j.items()) {
      Sanitize(value);
      fixed[JsonText(key)] = std::move(value);
    }
    j = std::move(fixed);
  }
}

}  // namespace

std::string Visible(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  uint32_t cp;
  for (size_t i = 0; i < s.size();) {
    size_t n = Utf8Length(s, i, cp);
    if (n == 0 || IsControl(cp)) {
      for (size_t k = 0; k < std::max<size_t>(n, 1); ++k)
        Hex(out, static_cast<unsigned char>(s[i + k]));
      i += std::max<size_t>(n, 1);
      continue;
    }
    out.append(s.substr(i, n));
    i += n;
  }
  return out;
}

std::string JsonText(std::string_view s) {
  if (ValidUtf8(s)) return std::string(s);
  std::string out;
  uint32_t cp;
  for (size_t i = 0; i < s.size();) {
    size_t n = Utf8Length(s, i, cp);
    if (n == 0) {
      Hex(out, static_cast<unsigned char>(s[i++]));
    } else if (s[i] == '\\') {
      out += "\\\\";
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

namespace {

template <typename Json>
std::string Dump(Json j, int indent) {
  Sanitize(j);
  return j.dump(indent);
}

}  // namespace

std::string DumpJson(const nlohmann::ordered_json& j, int indent) { return Dump(j, indent); }
std::string DumpJson(const nlohmann::json& j, int indent) { return Dump(j, indent); }

}  // namespace imgcheck::report
