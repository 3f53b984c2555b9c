// Where manifests and blobs come from. Each transport (OCI layout, archives, a registry)
// implements Source; verification, decompression and merging are the pipeline's, not the source's.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace imgcheck::image {

struct Descriptor {
  std::string media_type;
  std::string digest;  ///< "sha256:<hex>"
  int64_t size = -1;   ///< -1 when unknown
  /// Where a transport without digests keeps the blob (a legacy docker-archive's
  /// "<id>/layer.tar"); empty elsewhere. A blob with an empty digest is verified only through
  /// its diff_id.
  std::string location;
};

/// Pull-style reading of one blob (libarchive and the decompressors pull).
class BlobReader {
 public:
  virtual ~BlobReader() = default;
  /// Reads up to `n` bytes into `buf`; returns 0 at the end. Throws util::Fatal on failure.
  virtual size_t Read(char* buf, size_t n) = 0;
  /// The blob's stored size when the transport knows it before reading (a file's st_size, an
  /// archive member's header), so that a descriptor that disagrees fails before any byte is read.
  virtual std::optional<uint64_t> Size() const { return std::nullopt; }
};

struct PrereadLayer;  // layer.h

class Source {
 public:
  virtual ~Source() = default;
  /// How to name this source in messages ("oci:/x/layout:latest").
  virtual std::string Describe() const = 0;
  /// The descriptor the reference names: a manifest or an index. Its digest may be empty when
  /// the transport has none (a legacy docker-archive manifest.json).
  virtual Descriptor Root() = 0;
  /// A small blob (manifest, index, config) of at most `limit` bytes. Throws util::Fatal when
  /// it is missing or larger. The caller verifies the digest.
  virtual std::string ReadBlob(const Descriptor& d, uint64_t limit) = 0;
  /// Opens a blob's stored bytes for reading from the beginning. The caller hashes and
  /// verifies. Throws util::Fatal when the blob cannot be opened.
  virtual std::unique_ptr<BlobReader> OpenBlob(const Descriptor& d) = 0;
  /// The blob's stored size, without reading it (a layer found in the cache is not read, but
  /// must still be there). nullopt when the transport cannot tell cheaply (a registry). Throws
  /// util::Fatal when the blob is missing.
  virtual std::optional<uint64_t> StatBlob(const Descriptor& /*d*/) { return std::nullopt; }
  /// A layer blob the transport already read because its stream cannot be read twice (the
  /// Docker Engine API's export); nullptr: open it with OpenBlob. The caller still verifies it.
  virtual const PrereadLayer* Preread(const Descriptor&) { return nullptr; }
};

}  // namespace imgcheck::image
