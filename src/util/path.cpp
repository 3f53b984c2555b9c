#include "util/path.h"

#include <fnmatch.h>

namespace imgcheck::util {

std::string NormalizePath(std::string_view path) {
  std::vector<std::string_view> parts;
  size_t i = 0;
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    std::string_view part = path.substr(i, j - i);
    if (part == "..") {
      if (!parts.empty()) parts.pop_back();
    } else if (!part.empty() && part != ".") {
      parts.push_back(part);
    }
    i = j + 1;
  }
  std::string out;
  for (auto p : parts) {
    out += '/';
    out += p;
  }
  return out.empty() ? "/" : out;
}

std::string JoinPath(std::string_view dir, std::string_view rel) {
  if (!rel.empty() && rel.front() == '/') return NormalizePath(rel);
  std::string s(dir);
  s += '/';
  s += rel;
  return NormalizePath(s);
}

std::string_view DirName(std::string_view normalized) {
  size_t k = normalized.rfind('/');
  if (k == std::string_view::npos || k == 0) return "/";
  return normalized.substr(0, k);
}

std::string_view BaseName(std::string_view normalized) {
  size_t k = normalized.rfind('/');
  return k == std::string_view::npos ? normalized : normalized.substr(k + 1);
}

std::vector<std::string> Split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t i = 0;
  while (true) {
    size_t j = s.find(sep, i);
    out.emplace_back(s.substr(i, j == std::string_view::npos ? std::string_view::npos : j - i));
    if (j == std::string_view::npos) break;
    i = j + 1;
  }
  return out;
}

bool GlobMatch(std::string_view pattern, std::string_view name) {
  return fnmatch(std::string(pattern).c_str(), std::string(name).c_str(), FNM_PATHNAME) == 0;
}

}  // namespace imgcheck::util
