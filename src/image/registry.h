// The registry transport: a Source over the OCI distribution API (docker://REF or a bare REF).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "image/registry_auth.h"
#include "image/source.h"
#include "util/error.h"

namespace imgcheck::image {

class ConnectionShares;

struct RegistryOptions {
  /// --creds and --authfile. A credential goes only to the registry it names (and to the token
  /// service that registry names), never across origins on a redirect.
  CredentialSources credentials;
  /// `serve --allow-registry` (HOST[:PORT], docker.io for Docker Hub): manifest, tag and token
  /// requests redirected anywhere else are refused. Empty: followed anywhere, credentials left
  /// behind.
  std::vector<std::string> allow_registries;
  /// --allow-blob-host (HOST, HOST:PORT or *.DOMAIN): where a blob request may be redirected
  /// besides the registry's own origin. When this or allow_registries is set, a blob redirect
  /// to any other host is refused; when neither is, blobs follow redirects anywhere (object
  /// stores and CDNs), credentials left behind.
  std::vector<std::string> allow_blob_hosts;
  bool tls_verify = true;  ///< --tls-verify=false turns certificate checks off
  std::string cert_dir;    ///< --cert-dir: extra CA certificates (*.crt), client cert/key
  std::string ca_cert;     ///< --ca-cert: one CA bundle file
  /// Waits before a retry (back-off, Retry-After); null: std::this_thread::sleep_for. Tests
  /// pass one that records the waits instead of sleeping.
  std::function<void(std::chrono::milliseconds)> sleep;
  /// util::Limits::read_timeout_s and deadline_s (Load copies them from LoadOptions::limits):
  /// a registry that sends (next to) nothing this long, and the whole image from OpenRegistry on.
  int read_timeout_s = 60;
  uint64_t min_rate = 0;  ///< util::Limits::min_rate
  int deadline_s = 3600;
  /// Called before each request to the registry or its token service (serve --crawl-rate paces
  /// a crawl with it); it may wait, or throw to give the operation up. Null: nothing.
  std::function<void()> pace;
  /// Connections and TLS sessions kept warm per registry across the clients made with these
  /// options (serve's lifetime); null: each client's exchanges start cold.
  std::shared_ptr<ConnectionShares> connections;
};

/// A source for `reference` ("nvidia/cuda:12.1.1-runtime-ubuntu22.04", "host:5000/x@sha256:...").
/// Throws util::Fatal with a message the user can act on.
std::unique_ptr<Source> OpenRegistry(const std::string& reference, const RegistryOptions& options);

/// One page of a registry's listing: the catalog's repositories or a repository's tags
/// (distribution-spec "Listing Tags"; docker-registry's /v2/_catalog pages the same way).
struct ListingPage {
  std::vector<std::string> names;  ///< as the registry spelled them (hostile: check before use)
  std::string next;                ///< the next page's URL (NextPageUrl); empty at the end
};

/// The next page of a listing at `page_url`: the target of the RFC 8288 (5988) `Link` header
/// `link` whose rel is "next", resolved against `page_url`. Empty when there is none or it is
/// malformed; an error when it leaves the page's origin (credentials go only to the registry
/// they are for) or its endpoint (/v2/_catalog, /v2/REPO/tags/list).
util::Expected<std::string> NextPageUrl(const std::string& page_url, std::string_view link);

/// Pages of referrers read for one image (Repository::GetReferrers).
inline constexpr size_t kMaxReferrerPages = 16;

/// Page sizes a listing asks for (`n`), within 1 and this.
inline constexpr size_t kMaxPageSize = 1000;

/// The catalog of a registry (GET /v2/_catalog), page by page; credentials, redirects, retries
/// and deadlines as Repository's. A page's body is bounded (4 MiB).
class Catalog {
 public:
  /// `host`: the registry, HOST[:PORT] ("docker.io" for Docker Hub).
  Catalog(const std::string& host, const RegistryOptions& options);
  ~Catalog();
  Catalog(const Catalog&) = delete;
  Catalog& operator=(const Catalog&) = delete;
  /// The first page of at most `n` repositories when `next` is empty, else the page `next`
  /// (a ListingPage::next). util::Fatal when the registry will not list them.
  ListingPage Repositories(const std::string& next, size_t n);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// One repository of a registry, for callers that read and write small objects by name (attest:
/// cosign's attestation tags): manifests by tag or digest, blobs by digest, uploads. One API
/// check for all of them; credentials, redirects, retries and deadlines as OpenRegistry's.
class Repository {
 public:
  /// `reference` names the repository ("host:5000/app:tag"; the tag or digest is not used).
  Repository(const std::string& reference, const RegistryOptions& options);
  ~Repository();
  Repository(const Repository&) = delete;
  Repository& operator=(const Repository&) = delete;

  /// The repository as references name it, without tag or digest: "127.0.0.1:5000/app".
  std::string Name() const;

  struct Manifest {
    std::string media_type;  ///< the Content-Type, else the body's mediaType
    std::string digest;      ///< "sha256:..." of the body, computed here
    std::string body;
  };
  /// The manifest `tag_or_digest` names; nullopt when the registry has none (HTTP 404).
  /// util::Fatal when it is larger than `limit` or, asked by digest, its bytes do not match.
  std::optional<Manifest> GetManifest(const std::string& tag_or_digest, uint64_t limit);
  /// Blob `digest`, of at most `limit` bytes. util::Fatal when it is missing, larger, or the
  /// registry serves bytes whose digest is not `digest`.
  std::string GetBlob(const std::string& digest, uint64_t limit);
  /// Uploads `bytes` unless the registry has a blob of their digest (distribution-spec "Pushing
  /// blobs": POST, then a monolithic PUT). Returns the digest.
  std::string PutBlob(const std::string& bytes);
  /// Puts manifest `body` of `media_type` under `tag`; returns its digest. The distribution
  /// API has no conditional manifest PUT: a writer that must not lose another's update reads
  /// again afterwards (attest::Attach).
  std::string PutManifest(const std::string& tag, const std::string& body,
                          std::string_view media_type);
  /// Puts manifest `body` (one with a `subject`) by its digest. True when the registry answered
  /// with the OCI-Subject header, i.e. it lists the manifest in its referrers API itself; false:
  /// the writer must update the referrers tag schema's index (distribution-spec 1.1).
  bool PutReferrer(const std::string& body, std::string_view media_type);
  /// The referrers of `digest` (GET /v2/NAME/referrers/DIGEST, asking for `artifact_type` only
  /// when not empty: a registry may ignore the filter), every page of them followed through its
  /// Link header, as one image index of all pages' manifests. nullopt when the registry has no
  /// referrers API (404: distribution-spec 1.1 "Listing Referrers"). util::Fatal on any other
  /// failure, and when the pages hold more than `limit` bytes together, number more than
  /// kMaxReferrerPages, loop, or lead to another origin or endpoint.
  std::optional<std::string> GetReferrers(const std::string& digest, std::string_view artifact_type,
                                          uint64_t limit);
  /// The first page of at most `n` tags when `next` is empty, else the page `next` (a
  /// ListingPage::next). util::Fatal when the registry will not list them.
  ListingPage Tags(const std::string& next, size_t n);

 private:
  /// PUT of a manifest by tag or digest; returns the OCI-Subject response header ("" if none).
  std::string Put(const std::string& reference, const std::string& body,
                  std::string_view media_type);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Pushes to a registry (image::PushArtifact's registry half): uploads each of `blobs` the registry
/// does not have yet, then `manifest` (of `media_type`) under the reference's tag. Returns the
/// manifest digest.
std::string PushToRegistry(const std::string& reference, const std::vector<std::string>& blobs,
                           const std::string& manifest, std::string_view media_type,
                           const RegistryOptions& options);

}  // namespace imgcheck::image
