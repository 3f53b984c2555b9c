// Paths inside an image: always absolute, '/'-separated, lexically normalised.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace imgcheck::util {

/// Lexical normalisation rooted at "/": collapses "//" and ".", applies ".." clamped at the root
/// (chroot semantics), drops a trailing slash. "a/../../b" -> "/b"; "" -> "/".
std::string NormalizePath(std::string_view path);
/// Joins `rel` onto directory `dir` (rel may be absolute, then it wins), then normalises.
std::string JoinPath(std::string_view dir, std::string_view rel);
/// "/a/b/c" -> "/a/b"; "/a" -> "/"; "/" -> "/".
std::string_view DirName(std::string_view normalized);
/// "/a/b/c" -> "c"; "/" -> "".
std::string_view BaseName(std::string_view normalized);
/// Splits on `sep`, keeping empty fields ("a::b" -> {"a","","b"}).
std::vector<std::string> Split(std::string_view s, char sep);
/// fnmatch(3)-style glob match with '*', '?' and '[...]'; '*' does not cross '/'.
bool GlobMatch(std::string_view pattern, std::string_view name);

}  // namespace imgcheck::util
