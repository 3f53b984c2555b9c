// What changed between two images' CUDA stacks (imgcheck diff OLD NEW): frameworks and their
// builds, CUDA libraries by package, what each consumer's loader now resolves differently, and
// findings new, fixed and unchanged. scan::Compare fills it; the renderers here only read it.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "report/report.h"
#include "util/formats.h"

namespace imgcheck::report {

enum class DiffFormat : uint8_t { kText, kJson, kMarkdown };

/// The one table of diff output formats (diff --format, its help, check and completion).
inline constexpr std::array<util::FormatInfo<DiffFormat>, 3> kDiffFormats = {{
    {DiffFormat::kText, "text", "the changes, then new, fixed and unchanged findings"},
    {DiffFormat::kJson, "json", "imgcheck-diff/1 JSON, for tools"},
    {DiffFormat::kMarkdown, "markdown",
     "GitHub-flavoured Markdown, for job summaries and pull-request comments"},
}};

enum class Change : uint8_t { kAdded, kRemoved, kUpgraded, kDowngraded, kChanged };
/// "added", "removed", "upgraded", "downgraded", "changed".
std::string_view ChangeName(Change change);

/// A framework whose version or build facts differ ("2.3.0+cu121 (cuda 12.1)").
struct FrameworkChange {
  std::string name;                  ///< "torch"
  std::string old_build, new_build;  ///< "" where the image lacks it
  Change change = Change::kChanged;
};

/// A CUDA library (by base name) of one package whose versions differ.
struct LibraryChange {
  /// The owning package's name; "unowned in DIR" for copies no package owns (each directory
  /// apart: a stale copy is another install).
  std::string package;
  std::string library;                   ///< "libcudnn"
  std::string old_version, new_version;  ///< every version found, ", "-joined; "" where absent
  Change change = Change::kChanged;
};

/// A name a consumer asks for that the loader now resolves differently.
struct LoadChange {
  std::string consumer;  ///< real path of the consumer (the root of the link map), in both images
  std::string name;      ///< as requested ("libcudnn.so.8")
  std::string old_file, new_file;  ///< real path, or "not found"; "" where not asked for
  std::string why;  ///< how the new image resolves it (ResolutionReason), or why it does not
};

struct Diff {
  ImageInfo old_image;
  Report report;  ///< the new image's: findings the old one had are marked `baseline`
  std::vector<rules::Finding> fixed;  ///< the old image's findings the new one lacks
  std::vector<FrameworkChange> frameworks;
  std::vector<LibraryChange> libraries;
  size_t libraries_unchanged = 0;  ///< (package, library) pairs whose versions did not change
  std::vector<LoadChange> loads;
};

std::string RenderDiff(const Diff& diff, DiffFormat format, const RenderOptions& options = {});
std::string RenderDiffText(const Diff& diff, const RenderOptions& options);
std::string RenderDiffJson(const Diff& diff);
std::string RenderDiffMarkdown(const Diff& diff);

}  // namespace imgcheck::report
