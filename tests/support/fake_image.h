// Merged trees and images written by hand, for tests that need no layer on disk: the one
// in-memory tree builder of the tests.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "image/image.h"

namespace imgcheck::testing {

/// A regular file holding `bytes` (all of them captured), last written by `layer` over the
/// earlier layers `history`. Here and below, missing parent directories are added (by layer 0)
/// and an existing node at `path` is replaced.
image::Node& AddFile(image::Tree& tree, const std::string& path, std::string bytes = "",
                     int layer = 0, std::vector<int> history = {});
image::Node& AddDir(image::Tree& tree, const std::string& path, int layer = 0);
image::Node& AddLink(image::Tree& tree, const std::string& path, const std::string& target,
                     int layer = 0);

/// An old-format ("ld.so-1.7.0") ld.so.cache mapping each {soname, path} of `libs`, every entry
/// with `flags` (0x0303: libc6, x86-64), as glibc's dl-cache.h lays it out.
std::string OldCache(const std::vector<std::pair<std::string, std::string>>& libs, int32_t flags);

/// The METADATA and RECORD of pip distribution `name` owning `files`: {path, text}, paths
/// relative to site-packages like those of `files`.
std::vector<std::pair<std::string, std::string>> DistInfo(
    const std::string& name, const std::string& version,
    const std::vector<std::string>& requires_dist, const std::vector<std::string>& files);

/// An image of `layers` layers ("sha256:layer<i>", created by "RUN step <i>") whose tree, "/"
/// at first, the calls below fill.
class FakeImage {
 public:
  explicit FakeImage(int layers = 1);

  FakeImage& File(const std::string& path, std::string bytes = "", int layer = 0,
                  std::vector<int> history = {}) {
    AddFile(image_.tree, path, std::move(bytes), layer, std::move(history));
    return *this;
  }
  FakeImage& Dir(const std::string& path, int layer = 0) {
    AddDir(image_.tree, path, layer);
    return *this;
  }
  FakeImage& Link(const std::string& path, const std::string& target, int layer = 0) {
    AddLink(image_.tree, path, target, layer);
    return *this;
  }
  /// A regular file of the layers `history` that `layer` deleted.
  FakeImage& Deleted(const std::string& path, int layer, std::vector<int> history);

  image::Image& image() { return image_; }
  const image::Tree& tree() const { return image_.tree; }

 private:
  image::Image image_;
};

}  // namespace imgcheck::testing
