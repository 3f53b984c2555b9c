// Rule data without a rebuild: rules/ packed as an OCI artifact (one config, one layer; media
// types below, documented in rules/README.md), pushed by maintainers, pulled and installed by
// `imgcheck rules update` into a cache directory, and preferred to the bundled data only when
// it is newer and of the schema this binary reads.
#pragma once

#include <functional>
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

/// Checks the signature record `rules update` kept with installed data (opaque here: the CLI
/// writes it, src/attest verifies it, as this stage cannot): "" when it signs manifest `digest`
/// with a key trusted now, else why not.
using SignatureCheck =
    std::function<std::string(const std::string& record, const std::string& digest)>;

/// Installs a pulled artifact, whose signature `record` the caller verified, into `cache`:
/// unpacked into a new directory there, loaded and checked (schema kRulesSchema, the config's
/// version equal to the content's, and newer than the data installed, unless it is the same:
/// an older signed artifact replayed is a rollback), then `current` is switched to it with one
/// rename. The manifest, the layer and `record` are kept beside the data, so that every later
/// load checks them again (ChooseRulesDir). util::Fatal, one line, when anything is wrong; the
/// data in use is then untouched. Returns the installed data's version.
DataVersion InstallRules(const image::Artifact& artifact, const std::string& cache,
                         const std::string& record);

/// Which rule data to use: the installed data of `cache` when it is there, of this binary's
/// schema, newer than `bundled`'s, and still what was signed: its files are those of the layer
/// it came in, the layer is the one its manifest names, and `check` accepts the signature
/// record of that manifest; else `bundled`. `note` (when given) receives why installed data was
/// passed over ("" when there was none or it was used).
std::string ChooseRulesDir(const std::string& cache, const std::string& bundled,
                           const SignatureCheck& check, std::string* note = nullptr);

}  // namespace imgcheck::rules
