// Dotted numeric versions as NVIDIA and the frameworks write them ("8.9.2.26", "12.4",
// "535.104.05").
#pragma once

#include <compare>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace imgcheck::rules {

class Version {
 public:
  Version() = default;
  explicit Version(std::vector<int> parts) : parts_(std::move(parts)) {}

  /// The leading dotted number of `text`: "v12.4" -> 12.4, "8.9.2.26-1+cuda12.1" -> 8.9.2.26,
  /// "2.8.0+cu128" -> 2.8.0, ">=525.60.13" -> 525.60.13. Nullopt when there is no digit
  /// first (after an optional 'v' or comparison operator) or a component overflows.
  static std::optional<Version> Parse(std::string_view text);

  bool empty() const { return parts_.empty(); }
  size_t size() const { return parts_.size(); }
  const std::vector<int>& parts() const { return parts_; }
  /// Component `i`, 0 when the version has fewer.
  int at(size_t i) const { return i < parts_.size() ? parts_[i] : 0; }
  int major() const { return at(0); }
  int minor() const { return at(1); }
  int patch() const { return at(2); }
  /// The first `n` components (fewer when it has fewer).
  Version Prefix(size_t n) const;
  /// As written when parsed ("580.65.06", leading zeros kept), else the components joined.
  std::string str() const;

  /// Component-wise numeric order; missing components count as 0 (12.0 == 12).
  friend std::strong_ordering operator<=>(const Version& a, const Version& b);
  friend bool operator==(const Version& a, const Version& b) { return (a <=> b) == 0; }

 private:
  std::vector<int> parts_;
  std::string text_;  ///< the parsed text, when this came from Parse
};

/// True when `v` lies in [from, to] (inclusive, padded with zeros).
bool InRange(const Version& v, const Version& from, const Version& to);

/// Whether installed `version` satisfies the exact pin `pinned` (PEP 440 `==`): a pin without a
/// local label ignores the installed one's ("2.5.1" holds for "2.5.1+cu121"); zero padding is
/// equal ("2.5" == "2.5.0"). Where the numbers agree but the text does not (rc, dev builds), the
/// pin is taken to hold: a finding needs a release that surely differs.
bool PinHolds(std::string_view pinned, std::string_view version);

}  // namespace imgcheck::rules
