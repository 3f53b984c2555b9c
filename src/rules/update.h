// Rule data without a rebuild: rules/ packed as an OCI artifact (one config, one layer; media
// types below, documented in rules/README.md), pushed by maintainers, pulled and installed by
// `imgcheck rules update` into a cache directory, and preferred to the bundled data only when
// it is newer and of the schema this binary reads.
#pragma once

#include <string>

#include "image/artifact.h"
#include "rules/knowledge.h"

namespace imgcheck::rules {

inline constexpr image::ArtifactTypes kRulesArtifact{
    "application/vnd.imgcheck.rules.v1",
    "application/vnd.imgcheck.rules.config.v1+json",
    "application/vnd.imgcheck.rules.layer.v1.tar+gzip",
};
/// Where the project publishes its rule data (`imgcheck rules update` without REF).
inline constexpr char kDefaultRulesReference[] = "ghcr.io/imgcheck/imgcheck-rules:1";
inline constexpr uint64_t kMaxRulesLayer = 16 << 20;
inline constexpr uint64_t kMaxRulesFile = 8 << 20;
inline constexpr size_t kMaxRulesFiles = 64;

/// DIR's *.json packed for publishing: the layer (image::PackFiles) and the config
/// {"schema", "date", "version"} of the data. The data is loaded (validated) first: util::Fatal
/// with file:line when it is not a whole, valid data set with a version.json.
struct PackedRules {
  std::string config, layer;
  DataVersion version;
};
PackedRules PackRules(const std::string& dir);

/// The cache of installed data: `dir`/current is a link to the installed version's directory.
/// "" for `dir` means $XDG_DATA_HOME/imgcheck/rules (~/.local/share/imgcheck/rules).
std::string RulesCacheDir(const std::string& dir);

/// Installs a pulled artifact into `cache`: unpacked into a new directory there, loaded and
/// checked (schema kRulesSchema, the config's version equal to the content's), then `current`
/// is switched to it with one rename. util::Fatal, one line, when anything is wrong; the data
/// in use is then untouched. Returns the installed data's version.
DataVersion InstallRules(const image::Artifact& artifact, const std::string& cache);

/// Which rule data to use: the installed data of `cache` when it is there, of this binary's
/// schema and newer than `bundled`'s; else `bundled`. `note` (when given) receives why
/// installed data was passed over ("" when there was none or it was used).
std::string ChooseRulesDir(const std::string& cache, const std::string& bundled,
                           std::string* note = nullptr);

}  // namespace imgcheck::rules
