// The files of an OCI layout or of an image tarball, by relative name, read in place: a
// directory on disk, or the members of a tar read straight from the archive (never extracted).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "image/layer.h"
#include "image/source.h"
#include "util/limits.h"

namespace imgcheck::image {

class FileStore {
 public:
  virtual ~FileStore() = default;
  /// True when the file exists.
  virtual bool Has(const std::string& name) = 0;
  /// The whole file, at most `limit` bytes; util::Fatal when missing or larger.
  virtual std::string Read(const std::string& name, uint64_t limit) = 0;
  /// The file's bytes, pulled. util::Fatal when missing.
  virtual std::unique_ptr<BlobReader> Open(const std::string& name) = 0;
  /// The file's size, without reading it. util::Fatal when missing.
  virtual uint64_t Size(const std::string& name) = 0;
  /// "the layout /x", "the archive /x.tar": for messages.
  virtual std::string Describe() const = 0;
  /// The file as a layer already read from a stream (see Source::Preread); nullptr otherwise.
  virtual const PrereadLayer* Preread(const std::string&) { return nullptr; }
};

/// A member name inside a store, normalised and relative ("a/./b/../c" -> "a/c"); nullopt when
/// it is empty, absolute or climbs out.
std::optional<std::string> CleanMemberName(const std::string& name);

/// Files under directory `root`: regular files only, reached through no symbolic link, names
/// that would leave `root` refused (util::OpenRegularBeneath).
std::unique_ptr<FileStore> OpenDirStore(const std::filesystem::path& root);
/// Members of the tar file `path` (optionally gzip- or zstd-compressed). Member symlinks and
/// hard links (docker save writes them for repeated layers) are followed within the archive.
/// The members are indexed once, bounded by `limits` (files, name bytes); util::Fatal when the
/// file is not a regular file or not a tar.
std::unique_ptr<FileStore> OpenTarStore(const std::filesystem::path& path,
                                        const util::Limits& limits = {});

}  // namespace imgcheck::image
