// The distribution registry's notifications (docker/distribution docs/notifications.md): an
// envelope of events, media type application/vnd.docker.distribution.events.v1+json. Manifest
// pushes are what matters here: each is scanned before anyone deploys it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "util/error.h"

namespace imgcheck::serve::front {

struct PushedManifest {
  std::string host;        ///< the registry as clients name it (request.host)
  std::string repository;  ///< "team/app"
  std::string digest;      ///< the manifest or index pushed
  std::string tag;         ///< may be empty
  std::string Reference() const { return host + "/" + repository + "@" + digest; }
};

/// The manifest pushes of an envelope (other events are skipped); an error when the body is no
/// envelope at all.
util::Expected<std::vector<PushedManifest>> ParseRegistryEvents(std::string_view body);

}  // namespace imgcheck::serve::front
