// Linked only while the registry transport (registry.cpp) is not in the tree.
#include "image/registry.h"
#include "util/error.h"

namespace imgcheck::image {

std::unique_ptr<Source> OpenRegistry(const std::string& reference, const RegistryOptions&) {
  throw util::Fatal("registry transport not available in this build; cannot read '" + reference +
                    "' (use oci:, oci-archive:, docker-archive: or dir:)");
}

}  // namespace imgcheck::image
