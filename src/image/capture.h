// What later stages keep of file contents while a layer streams past.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "util/capturer.h"
#include "util/sparse_file.h"

namespace imgcheck::image {

/// The capturer interface lives in util (elf implements it without depending on image).
using Capturer = util::Capturer;

/// Chooses per regular file whether (non-null) and how its bytes are captured. Called from the
/// threads that read layers, so it must be thread-safe. `path` is normalised and absolute;
/// `mode` holds the permission bits (07777).
using CapturePolicy =
    std::function<std::unique_ptr<Capturer>(std::string_view path, uint64_t size, uint32_t mode)>;

/// Keeps the first `limit` bytes (the whole file when it is no longer): for small metadata files.
std::unique_ptr<Capturer> CapturePrefix(uint64_t limit);

/// Keeps what `inner` keeps and hashes every byte on the way (MD5, streamed: nothing more is
/// held), so the result's md5() is the whole file's; left empty when the stream ended short.
std::unique_ptr<Capturer> CaptureWithMd5(std::unique_ptr<Capturer> inner);
/// The same with SHA-256 (SparseFile::sha256): the SBOM's file hashes, taken only when asked.
std::unique_ptr<Capturer> CaptureWithSha256(std::unique_ptr<Capturer> inner);

/// Paths, looked up by string_view.
using PathSet = std::set<std::string, std::less<>>;

/// Which files' MD5 a layer's reading takes (CaptureWithMd5 around what the policy keeps). IC015
/// compares a file that a later layer wrote over a package's file with the MD5 the package's
/// records state; a file its own package's layer installed needs none. So the digest is wanted
/// only for the paths that the records of the layers below state: a plan per layer, known once
/// those layers are merged (read_layers.h).
struct DigestPlan {
  std::shared_ptr<const PathSet> paths;  ///< these paths; null: none
  /// Set: also every path it accepts, for a reading that can neither wait for the layers below
  /// nor be read again (docker-daemon's stream).
  std::function<bool(std::string_view path)> all;
  bool Wants(std::string_view path) const {
    return (paths && paths->contains(path)) || (all && all(path));
  }
};

struct LayerContents;  // layer.h
class Tree;            // tree.h

/// How plans are made (LoadOptions::digests). Both null: no digests.
struct DigestRule {
  /// The paths a layer's package records state (in the tree merged up to and including it):
  /// the files whose digest is wanted from the layers above it.
  std::function<std::vector<std::string>(const LayerContents& layer, const Tree& tree)> stated;
  /// Every path that can ever be wanted (DigestPlan::all).
  std::function<bool(std::string_view path)> candidate;
};

}  // namespace imgcheck::image
