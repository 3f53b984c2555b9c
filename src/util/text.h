// Small text helpers shared by the stages: trimming, checked numbers, "did you mean" distances,
// sizes for people.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace imgcheck::util {

/// `s` without leading and trailing ASCII whitespace (" \t\n\v\f\r"; no locale).
inline std::string_view Trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\v\f\r";
  size_t b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(kSpace) - b + 1);
}

/// All of `text` as a decimal T: digits only (a '-' first when T is signed), no spaces, no
/// overflow. nullopt for "", "12x", " 1" or a value T cannot hold.
template <class T>
std::optional<T> ParseInt(std::string_view text) {
  T value{};
  const char* end = text.data() + text.size();
  auto [stop, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || stop != end) return std::nullopt;
  return value;
}

/// `s` with ASCII letters lowered (no locale): hosts, header names, rule ids, keywords.
inline std::string AsciiLower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

/// `s` with ASCII letters raised (no locale).
inline std::string AsciiUpper(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return out;
}

/// Levenshtein distance (insertions, deletions, substitutions), for "did you mean".
inline size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1])});
      diag = up;
    }
  }
  return row[b.size()];
}

/// "1.2 GB", "456.0 MB", "12 B": decimal units, as registries and docker print sizes.
inline std::string HumanBytes(double bytes) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB"};
  int u = 0;
  while (bytes >= 1000 && u < 4) {
    bytes /= 1000;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return buf;
}

}  // namespace imgcheck::util
