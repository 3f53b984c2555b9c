// The image transports a user can name, by skopeo's names: the one table that the loader,
// --help and error messages all read.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "image/image.h"

namespace imgcheck::image {

struct Transport {
  std::string_view name;     ///< "oci"
  std::string_view syntax;   ///< "oci:PATH[:REF]"
  std::string_view summary;  ///< one line for help
  /// Reads the image `rest` names (the reference after "name:"), fully verified and merged.
  Image (*load)(std::string_view rest, const LoadOptions& options);
  /// True when the file or directory at a path is in this transport's format; null for
  /// transports that name no file (docker) or take any directory (dir).
  bool (*recognizes)(const std::string& path) = nullptr;
};

const std::vector<Transport>& Transports();

/// The transport a reference names and the rest of it. A reference without a known
/// "transport:" prefix that is a path on disk some transport recognizes (an OCI layout, an
/// oci-archive or docker-archive tarball) is read by that transport; any other is a registry
/// reference ("docker"); "docker://x" gives "x".
std::pair<const Transport*, std::string> SplitReference(std::string_view reference);

/// The reference as typed, less its tag or digest (the image's repository, for names stable
/// across builds): "docker-daemon:app:1" -> "docker-daemon:app", "nvidia/cuda:12@sha256:.." ->
/// "nvidia/cuda", "oci:/x:tag" -> "oci:/x"; "dir:PATH" and names without either unchanged.
std::string WithoutTagOrDigest(std::string_view reference);

/// The transport that recognizes what is at `path` (see Transport::recognizes); null when none.
const Transport* RecognizePath(const std::string& path);

/// "oci:PATH[:REF], oci-archive:PATH[:REF], ...": for help and errors.
std::string TransportSyntaxList();

}  // namespace imgcheck::image
