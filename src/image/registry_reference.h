// Image references as the distribution reference grammar (docker/distribution `reference`)
// defines them: [domain[:port]/]path[:tag][@digest], with docker.io and library/ implied.
#pragma once

#include <string>
#include <string_view>

#include "util/error.h"

namespace imgcheck::image {

struct Reference {
  std::string domain;  ///< "docker.io", "quay.io", "127.0.0.1:5000", "localhost"
  std::string path;    ///< repository path: "library/ubuntu", "nvidia/cuda"
  std::string tag;     ///< empty only when a digest is given without a tag
  std::string digest;  ///< "sha256:<hex>" or empty

  /// Host[:port] serving the API: registry-1.docker.io for docker.io, else the domain.
  std::string ApiHost() const;
  /// What a manifest request names: the digest when there is one, else the tag.
  std::string ManifestRef() const { return digest.empty() ? tag : digest; }
  /// The fully qualified form: "docker.io/library/ubuntu:22.04@sha256:...".
  std::string String() const;
};

/// Parses `text` ("ubuntu", "nvidia/cuda:12.1.1-runtime-ubuntu22.04", "host:5000/x@sha256:...",
/// or any of those after "docker://"). A name with neither tag nor digest gets tag "latest".
util::Expected<Reference> ParseReference(std::string_view text);

}  // namespace imgcheck::image
