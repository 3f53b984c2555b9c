// The JSON documents of an image: index / manifest list, manifest, config. Size-limited,
// type-checked; anything unexpected is a util::Fatal naming the document.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "image/image.h"
#include "image/source.h"

namespace imgcheck::image {

constexpr uint64_t kMaxManifestBytes = 4 << 20;  ///< as containerd's limit for manifests/indexes
constexpr uint64_t kMaxConfigBytes = 8 << 20;

namespace media {
inline constexpr std::string_view kOciIndex = "application/vnd.oci.image.index.v1+json";
inline constexpr std::string_view kOciManifest = "application/vnd.oci.image.manifest.v1+json";
inline constexpr std::string_view kOciConfig = "application/vnd.oci.image.config.v1+json";
inline constexpr std::string_view kDockerList =
    "application/vnd.docker.distribution.manifest.list.v2+json";
inline constexpr std::string_view kDockerManifest =
    "application/vnd.docker.distribution.manifest.v2+json";
inline constexpr std::string_view kDockerConfig = "application/vnd.docker.container.image.v1+json";
}  // namespace media

/// Parses `bytes` as JSON of at most `limit` bytes and bounded nesting. `what` names the
/// document in errors ("manifest sha256:...").
nlohmann::json ParseJson(std::string_view bytes, uint64_t limit, const std::string& what);
/// ParseJson keeping the members' order: for a document that is read, changed and written back.
nlohmann::ordered_json ParseOrderedJson(std::string_view bytes, uint64_t limit,
                                        const std::string& what);

/// A descriptor from JSON; its digest must be a well-formed sha256 digest, or be absent with a
/// location given as its first url (see Descriptor::location).
Descriptor ParseDescriptor(const nlohmann::json& j, const std::string& what);

enum class DocumentKind { kIndex, kManifest };
/// What a root/child document is, by its media type (or by its shape when the type is absent).
/// Unknown media types (and Docker schema 1) are a util::Fatal.
DocumentKind KindOf(const std::string& media_type, const nlohmann::json& doc,
                    const std::string& what);

struct PlatformEntry {
  Descriptor descriptor;
  std::string os, architecture, variant;
  std::string Name() const;  ///< "linux/arm64/v8"
};
std::vector<PlatformEntry> ParseIndex(const nlohmann::json& doc, const std::string& what);
/// The entry for `platform` ("os/arch[/variant]"); the error lists the platforms there are.
const PlatformEntry& SelectPlatform(const std::vector<PlatformEntry>& entries,
                                    const std::string& platform, const std::string& what);

struct Manifest {
  Descriptor config;
  std::vector<Descriptor> layers;
};
Manifest ParseManifest(const nlohmann::json& doc, const std::string& what);

struct ParsedConfig {
  Config config;
  std::vector<std::string> diff_ids;
  /// created_by of the history entries that made a layer (empty_layer ones left out), in order.
  std::vector<std::string> layer_history;
};
ParsedConfig ParseConfig(const nlohmann::json& doc, const std::string& what);

/// True for the layer media types imgcheck reads (OCI and Docker tar, gzip, zstd).
bool IsLayerMediaType(std::string_view media_type);

}  // namespace imgcheck::image
