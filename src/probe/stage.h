// Staging the image's libraries for the probe: a private directory, the files' bytes streamed out
// of the image, and the soname links beside them.
#pragma once

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "image/image.h"
#include "probe/compare.h"

namespace imgcheck::probe {

/// A directory only this user can read (mkdtemp, mode 0700), removed with its contents when the
/// object dies. Throws util::Fatal when it cannot be created.
class PrivateDir {
 public:
  PrivateDir();
  ~PrivateDir();
  PrivateDir(const PrivateDir&) = delete;
  PrivateDir& operator=(const PrivateDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

/// Reads `reference` again and streams the files at `paths` to files under `dir`, as their
/// layers stream past: memory stays bounded whatever their size. `scanned` is the merged tree of
/// the scan, the truth: each path it has as a regular file gets the copy that tree kept (a path
/// several layers wrote gets the top layer's; a hard link its target's bytes). Only the layers
/// that last wrote the paths are read when their tree yields the same copies, else every layer.
/// Returns image path -> local file; util::Fatal when the image read again differs from
/// `scanned`. Uses only the image stage's public API (Load with a capture policy).
std::map<std::string, std::filesystem::path> ExtractFiles(const std::string& reference,
                                                          const image::LoadOptions& options,
                                                          const image::Tree& scanned,
                                                          const std::set<std::string>& paths,
                                                          const std::filesystem::path& dir);

/// Places each library of `ordered` (load order) into a directory of its own under `dir`
/// (dir/<index>/): its bytes (`extracted`, image path -> local file) as the image's file name,
/// and the soname link beside it when the names differ, as ldconfig makes them. Each staged
/// library's local_path is that file itself, so a soname equal to another library's file name
/// cannot swap them. Returns the staged libraries in the same order; util::Fatal when a
/// library's bytes are missing or a name would leave its directory.
std::vector<StagedLibrary> Materialise(
    const std::vector<PlannedLibrary>& ordered, const std::filesystem::path& dir,
    const std::map<std::string, std::filesystem::path>& extracted);

}  // namespace imgcheck::probe
