// OCI artifacts of one config and one layer (image-spec manifest.md, "Guidelines for Artifact
// Usage": an artifactType and a config media type of the artifact's own), pulled through the
// image Sources and verified by digest, and pushed to a registry or written as an OCI layout.
// imgcheck publishes its rule data this way (rules::InstallUpdate).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "image/registry.h"

namespace imgcheck::image {

/// The media types that make an artifact of one kind.
struct ArtifactTypes {
  std::string_view artifact;  ///< the manifest's artifactType ("": none, as an image's)
  std::string_view config;    ///< config.mediaType
  std::string_view layer;     ///< the one layer's mediaType
};

struct Artifact {
  std::string describe;         ///< where it came from ("docker://host/rules:1")
  std::string manifest_digest;  ///< "sha256:..."
  std::string manifest;         ///< the manifest's bytes, of manifest_digest
  std::string config;           ///< the config blob, digest-verified
  std::string layer;            ///< the layer blob, digest- and size-verified
};

/// Reads the artifact `reference` names: "oci:PATH[:REF]" (an OCI layout, for air-gapped
/// sites) or a registry reference ("docker://" optional). util::Fatal, one line, when the
/// manifest is not one of `types` with exactly one layer, a blob is larger than `limit`, or a
/// blob's bytes do not match its descriptor's digest and size (tampered, truncated).
Artifact PullArtifact(const std::string& reference, const ArtifactTypes& types, uint64_t limit,
                      const RegistryOptions& options = {});

/// Publishes `config` and `layer` as an artifact of `types`: to a registry reference (blob
/// upload POST + PUT, then the manifest PUT: OCI distribution-spec "Pushing blobs" and
/// "Pushing Manifests"), or into the OCI layout of "oci:PATH[:REF]" (created when missing;
/// REF defaults to "latest"). The layer's descriptor carries `layer_annotations`. Returns the
/// manifest digest. util::Fatal on failure.
std::string PushArtifact(const std::string& reference, const ArtifactTypes& types,
                         const std::string& config, const std::string& layer,
                         const RegistryOptions& options = {},
                         const std::map<std::string, std::string>& layer_annotations = {});

/// A layer of `files` (name -> bytes): a gzip'd POSIX tar, names sorted, mode 0644, owner 0,
/// time 0 and no gzip timestamp, so the same files always make the same bytes (and digest).
std::string PackFiles(const std::map<std::string, std::string>& files);

/// The files of a tar(.gz) layer made by PackFiles. util::Fatal, one line, for a corrupt or
/// truncated archive, an entry that is not a regular file at the top level (a link, a
/// directory, "a/b", ".."), more than `max_files` entries or one larger than `max_file` bytes.
std::map<std::string, std::string> UnpackFiles(const std::string& layer, size_t max_files,
                                               uint64_t max_file);

}  // namespace imgcheck::image
