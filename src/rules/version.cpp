#include "rules/version.h"

#include <algorithm>
#include <cstddef>

namespace imgcheck::rules {

std::optional<Version> Version::Parse(std::string_view text) {
  size_t i = 0;
  size_t start = 0;
  while (i < text.size() &&
         (text[i] == ' ' || text[i] == '>' || text[i] == '<' || text[i] == '=' || text[i] == '~'))
    ++i;
  if (i < text.size() && (text[i] == 'v' || text[i] == 'V')) ++i;
  start = i;
  std::vector<int> parts;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    long value = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      value = value * 10 + (text[i] - '0');
      if (value > 999999999) return std::nullopt;
      ++i;
    }
    parts.push_back(static_cast<int>(value));
    // Another component only when a digit follows the dot ("12." stops).
    if (i + 1 < text.size() && text[i] == '.' && text[i + 1] >= '0' && text[i + 1] <= '9')
      ++i;
    else
      break;
  }
  if (parts.empty()) return std::nullopt;
  Version v(std::move(parts));
  v.text_ = std::string(text.substr(start, i - start));
  return v;
}

Version Version::Prefix(size_t n) const {
  auto end = parts_.begin() + static_cast<std::ptrdiff_t>(std::min(n, parts_.size()));
  return Version(std::vector<int>(parts_.begin(), end));
}

std::string Version::str() const {
  if (!text_.empty()) return text_;
  std::string out;
  for (size_t i = 0; i < parts_.size(); ++i) {
    if (i) out += '.';
    out += std::to_string(parts_[i]);
  }
  return out;
}

std::strong_ordering operator<=>(const Version& a, const Version& b) {
  size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i)
    if (auto c = a.at(i) <=> b.at(i); c != 0) return c;
  return std::strong_ordering::equal;
}

bool InRange(const Version& v, const Version& from, const Version& to) {
  return from <= v && v <= to;
}

bool PinHolds(std::string_view pinned, std::string_view version) {
  if (pinned.find('+') == std::string_view::npos) version = version.substr(0, version.find('+'));
  if (pinned == version) return true;
  auto a = Version::Parse(pinned), b = Version::Parse(version);
  return !a || !b || *a == *b;
}

}  // namespace imgcheck::rules
