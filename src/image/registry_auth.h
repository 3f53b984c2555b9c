// Registry credentials and the parts of the auth flow that are plain data: where credentials
// come from (--creds, containers auth.json, ~/.docker/config.json and its credential helpers),
// WWW-Authenticate challenges, and token responses. Secrets never go into messages.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace imgcheck::image {

struct Credential {
  std::string username;  ///< empty: anonymous
  std::string password;  ///< the secret; never printed
  /// Where they came from, for messages: "--creds", "/root/.docker/config.json",
  /// "docker-credential-pass"; for anonymous, the places that were searched.
  std::string source;
  bool anonymous() const { return username.empty() && password.empty(); }
  /// "user 'bob' from --creds" or "no credentials (searched: ...)": safe to print.
  std::string Describe() const;
};

/// The --creds flags and --authfile: where a registry's credential may come from.
struct CredentialSources {
  /// --creds values: "HOST=USER:PASS" (offered to HOST only) or a bare "USER:PASS" (offered to
  /// the one registry a `scan` reads; the caller refuses it where several registries may be
  /// read, as `serve` does).
  std::vector<std::string> creds;
  /// --authfile: the one auth file to read (docker config.json or containers auth.json, an
  /// `auths` map by registry); empty: the default search below.
  std::string authfile;
};

/// One --creds value. `domain` is the registry's domain as references name it (docker.io for
/// Docker Hub and its aliases, "host:5000"), empty for a bare USER:PASS.
struct CredsFlag {
  std::string domain;
  Credential credential;
};
/// Parses "HOST=USER:PASS" or "USER:PASS". Throws util::Fatal (without the secret) when it is
/// neither.
CredsFlag ParseCredsFlag(const std::string& text);

/// The credential for registry `domain` ("docker.io", "host:5000") and for no other: the
/// --creds entry naming `domain` (or a bare one), else the first match in --authfile when given,
/// else in $REGISTRY_AUTH_FILE or $XDG_RUNTIME_DIR/containers/auth.json,
/// ~/.config/containers/auth.json, then $DOCKER_CONFIG/config.json or ~/.docker/config.json
/// (credHelpers, auths, credsStore). Throws util::Fatal for a malformed --creds or auth file.
Credential FindCredential(const std::string& domain, const CredentialSources& sources);

/// The keys an auth file may use for `domain` (docker.io has its legacy index URL).
std::vector<std::string> AuthFileKeys(const std::string& domain);

/// Looks `domain` up in one auth file's JSON text; `file` names it in messages and sources.
/// Returns an anonymous credential when the file has nothing for it.
Credential CredentialFromAuthFile(const std::string& json_text, const std::string& file,
                                  const std::string& domain);

/// Runs `docker-credential-<helper> get` with the server URL on stdin (docker-credential-helpers
/// protocol). Anonymous when the helper knows nothing; util::Fatal when it cannot run.
Credential CredentialFromHelper(const std::string& helper, const std::string& server_url);

/// One challenge of a WWW-Authenticate header (RFC 7235): scheme and auth-params.
struct Challenge {
  std::string scheme;                         ///< lower-case: "bearer", "basic"
  std::map<std::string, std::string> params;  ///< lower-case names: realm, service, scope
};
std::vector<Challenge> ParseChallenges(std::string_view header);

struct Token {
  std::string value;
  int64_t expires_in = 60;  ///< seconds (the spec's default when absent)
};
/// Reads a token server answer ({"token": ...} or {"access_token": ...}); empty value if neither.
Token ParseTokenResponse(std::string_view body);

std::string Base64Encode(std::string_view bytes);
/// Decodes standard base64 (padding optional); false on a bad character.
bool Base64Decode(std::string_view text, std::string& out);

}  // namespace imgcheck::image
