// Sources over a FileStore: an OCI image layout (directory or oci-archive) and a docker save
// tarball (docker-archive). The registry source is in registry.h.
#pragma once

#include <memory>
#include <string>

#include "image/source.h"
#include "image/store.h"

namespace imgcheck::image {

/// An OCI image layout. `ref` picks the index.json entry whose
/// "org.opencontainers.image.ref.name" equals it; empty: the only entry, or, when there are
/// several, index.json itself as an index to choose a platform from.
std::unique_ptr<Source> OpenOciLayout(std::unique_ptr<FileStore> store, std::string ref,
                                      std::string describe);

/// A `docker save` tarball: manifest.json with <id>/layer.tar (legacy) or blobs/sha256 paths
/// (Docker 25+). `ref` is a RepoTags entry ("repo:tag", ":latest" implied) or "@N", the N-th
/// manifest.json entry; empty: the only one. Without manifest.json, read as an OCI layout.
std::unique_ptr<Source> OpenDockerArchive(std::unique_ptr<FileStore> store, std::string ref,
                                          std::string describe);

}  // namespace imgcheck::image
