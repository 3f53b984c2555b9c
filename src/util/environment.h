// The environment variables imgcheck reads that are not a flag's: one table, which the man page,
// docs/usage.md and the cli test read. A flag's own variable (IMGCHECK_<FLAG>, see
// cli::FlagVariable) comes from the flag itself; no name here may be one of those, so that a
// variable never means two things.
#pragma once

#include <string_view>

namespace imgcheck::util {

struct EnvironmentVariable {
  std::string_view name;
  std::string_view meaning;  ///< one line, for the man page and docs/usage.md
};

inline constexpr EnvironmentVariable kEnvironment[] = {
    {"IMGCHECK_RULES_DIR", "the rule data directory, instead of the bundled or updated data"},
    {"IMGCHECK_PROBE_HELPER",
     "the imgcheck-probe program `probe` and `scan --probe` run (default: beside imgcheck)"},
    {"NO_COLOR", "no colour in the text report"},
    {"XDG_CACHE_HOME", "the layer cache is $XDG_CACHE_HOME/imgcheck (default ~/.cache/imgcheck)"},
    {"XDG_DATA_HOME",
     "`rules update` installs into $XDG_DATA_HOME/imgcheck/rules (default ~/.local/share)"},
    {"HOME", "the default cache, rule data and registry auth files are under it"},
    {"XDG_RUNTIME_DIR", "registry credentials from $XDG_RUNTIME_DIR/containers/auth.json"},
    {"REGISTRY_AUTH_FILE", "the containers auth file to read first (as podman and skopeo do)"},
    {"DOCKER_CONFIG", "the directory of docker's config.json (registry credentials)"},
    {"DOCKER_HOST", "the Docker daemon docker-daemon: images are read from (unix:// or tcp://)"},
};

/// A variable renamed because its old name became a flag's, still honoured under the old name
/// when its value cannot be the flag's: an absolute path, where the flag takes true or false.
struct RenamedVariable {
  std::string_view old_name;
  std::string_view name;
};

inline constexpr RenamedVariable kRenamedVariables[] = {
    {"IMGCHECK_PROBE", "IMGCHECK_PROBE_HELPER"},  // before scan's --probe read IMGCHECK_PROBE
};

}  // namespace imgcheck::util
