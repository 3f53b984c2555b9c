#include "image/registry_reference.h"

#include <algorithm>

namespace imgcheck::image {
namespace {

constexpr std::string_view kDockerHub = "docker.io";
constexpr size_t kMaxNameLength = 255;  // reference.NameTotalLengthMax
constexpr size_t kMaxTagLength = 128;

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool IsAlnum(char c) { return IsLowerAlnum(c) || (c >= 'A' && c <= 'Z'); }
bool IsHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

// path-component: [a-z0-9]+ ((\.|_|__|-+) [a-z0-9]+)*
bool IsPathComponent(std::string_view s) {
  if (s.empty() || !IsLowerAlnum(s.front()) || !IsLowerAlnum(s.back())) return false;
  for (size_t i = 0; i < s.size();) {
    if (IsLowerAlnum(s[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < s.size() && !IsLowerAlnum(s[j])) ++j;
    std::string_view sep = s.substr(i, j - i);
    bool dashes = sep.find_first_not_of('-') == std::string_view::npos;
    if (sep != "." && sep != "_" && sep != "__" && !dashes) return false;
    i = j;
  }
  return true;
}

// domain-component: [a-zA-Z0-9] | [a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]
bool IsDomainComponent(std::string_view s) {
  if (s.empty() || !IsAlnum(s.front()) || !IsAlnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return IsAlnum(c) || c == '-'; });
}

bool IsDomain(std::string_view s) {
  std::string_view host = s;
  if (!s.empty() && s.front() == '[') {  // [IPv6]:port
    size_t close = s.find(']');
    if (close == std::string_view::npos || close < 2) return false;
    std::string_view inside = s.substr(1, close - 1);
    if (!std::all_of(inside.begin(), inside.end(),
                     [](char c) { return IsHex(c) || (c >= 'A' && c <= 'F') || c == ':'; })) {
      return false;
    }
    host = {};
    s = s.substr(close + 1);
    if (s.empty()) return true;
    if (s.front() != ':') return false;
  } else {
    size_t colon = s.find(':');
    host = s.substr(0, colon);
    s = colon == std::string_view::npos ? std::string_view{} : s.substr(colon);
    for (size_t start = 0;;) {
      size_t dot = host.find('.', start);
      if (!IsDomainComponent(host.substr(start, dot - start))) return false;
      if (dot == std::string_view::npos) break;
      start = dot + 1;
    }
    if (s.empty()) return true;
  }
  std::string_view port = s.substr(1);
  return !port.empty() && port.size() <= 5 &&
         std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool IsTag(std::string_view s) {
  auto word = [](char c) { return IsAlnum(c) || c == '_'; };
  if (s.empty() || s.size() > kMaxTagLength || !word(s.front())) return false;
  return std::all_of(s.begin(), s.end(), [&](char c) { return word(c) || c == '.' || c == '-'; });
}

util::Error Invalid(std::string_view text, const std::string& why) {
  return util::MakeError("invalid image reference '" + std::string(text) + "': " + why);
}

}  // namespace

std::string Reference::ApiHost() const {
  return domain == kDockerHub ? "registry-1.docker.io" : domain;
}

std::string Reference::String() const {
  std::string s = domain + "/" + path;
  if (!tag.empty()) s += ":" + tag;
  if (!digest.empty()) s += "@" + digest;
  return s;
}

util::Expected<Reference> ParseReference(std::string_view text) {
  std::string_view original = text;
  if (text.starts_with("docker://")) text.remove_prefix(9);
  if (text.empty()) return Invalid(original, "empty");
  Reference ref;

  std::string_view name = text;
  if (size_t at = text.find('@'); at != std::string_view::npos) {
    std::string_view digest = text.substr(at + 1);
    name = text.substr(0, at);
    size_t colon = digest.find(':');
    if (colon == std::string_view::npos) return Invalid(original, "digest needs 'sha256:<hex>'");
    std::string_view algorithm = digest.substr(0, colon), hex = digest.substr(colon + 1);
    if (algorithm != "sha256") {
      return Invalid(original, "digest algorithm '" + std::string(algorithm) +
                                   "' is not supported (only sha256)");
    }
    if (hex.size() != 64 || !std::all_of(hex.begin(), hex.end(), IsHex)) {
      return Invalid(original, "a sha256 digest is 64 lower-case hex digits");
    }
    ref.digest = std::string(digest);
  }
  if (size_t colon = name.rfind(':');
      colon != std::string_view::npos && name.find('/', colon) == std::string_view::npos) {
    std::string_view tag = name.substr(colon + 1);
    if (!IsTag(tag)) {
      return Invalid(original, "bad tag '" + std::string(tag) +
                                   "' (letters, digits, '_', '.', '-'; at most 128)");
    }
    ref.tag = std::string(tag);
    name = name.substr(0, colon);
  }
  if (name.empty()) return Invalid(original, "no repository name");
  if (name.size() > kMaxNameLength) return Invalid(original, "name longer than 255 characters");

  // The first component is a registry when it looks like a host (reference.splitDomain).
  std::string_view path = name;
  if (size_t slash = name.find('/'); slash != std::string_view::npos) {
    std::string_view first = name.substr(0, slash);
    bool has_upper =
        std::any_of(first.begin(), first.end(), [](char c) { return c >= 'A' && c <= 'Z'; });
    if (first.find_first_of(".:") != std::string_view::npos || first == "localhost" || has_upper) {
      if (!IsDomain(first))
        return Invalid(original, "bad registry host '" + std::string(first) + "'");
      ref.domain = std::string(first);
      path = name.substr(slash + 1);
    }
  }
  if (ref.domain.empty() || ref.domain == "index.docker.io") ref.domain = kDockerHub;
  for (size_t start = 0;;) {
    size_t slash = path.find('/', start);
    std::string_view component = path.substr(start, slash - start);
    if (!IsPathComponent(component)) {
      bool upper = std::any_of(component.begin(), component.end(),
                               [](char c) { return c >= 'A' && c <= 'Z'; });
      return Invalid(original,
                     upper ? "repository name must be lowercase"
                           : "bad repository name component '" + std::string(component) + "'");
    }
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  ref.path = std::string(path);
  if (ref.domain == kDockerHub && ref.path.find('/') == std::string::npos) {
    ref.path = "library/" + ref.path;  // official images
  }
  if (ref.tag.empty() && ref.digest.empty()) ref.tag = "latest";
  return ref;
}

}  // namespace imgcheck::image
