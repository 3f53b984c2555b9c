// The image's merged file system: every path, which layer wrote it, and what later layers hid.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/sparse_file.h"

namespace imgcheck::image {

enum class NodeType : uint8_t { kRegular, kDirectory, kSymlink, kCharDevice, kBlockDevice, kFifo };

/// One path of the merged tree, with its provenance.
struct Node {
  NodeType type = NodeType::kRegular;
  uint32_t mode = 0;         ///< permission bits
  uint64_t size = 0;         ///< regular files: size in bytes
  std::string link_target;   ///< symlinks: the target as stored
  int layer = -1;            ///< index of the layer that last wrote this path
  std::vector<int> history;  ///< earlier layers that wrote this path, oldest first
  /// What the capture policy kept of a regular file's bytes; null when nothing was captured.
  /// Hard links share their target's content.
  std::shared_ptr<const util::SparseFile> content;
};

/// A path that existed in a lower layer and was removed by a whiteout (or an opaque directory,
/// or replaced by a non-directory).
struct Deletion {
  int layer = -1;                      ///< the layer that deleted it
  std::vector<int> history;            ///< the layers that had written it, oldest first
  NodeType type = NodeType::kRegular;  ///< what it was before deletion
};

/// Paths are absolute and normalised ("/usr/lib/x"); the root is "/".
class Tree {
 public:
  /// The node at exactly this path; no symlink is followed.
  const Node* Find(std::string_view path) const;
  const Deletion* FindDeleted(std::string_view path) const;

  struct Resolved {
    std::string path;  ///< final path after following links
    const Node* node;  ///< null when the final path does not exist
  };
  /// Resolves `path` with chroot semantics: symlinks in every component (and in the last one
  /// when `follow_last`) are followed inside the image, absolute targets restart at the image
  /// root, ".." is clamped at "/". Nullopt on a symlink loop (more than 40 links, as Linux) or
  /// when a middle component is not a directory.
  std::optional<Resolved> Resolve(std::string_view path, bool follow_last = true) const;

  /// Names of the direct children of directory `dir` (exact path, no link following), sorted.
  std::vector<std::string> List(std::string_view dir) const;

  const std::map<std::string, Node, std::less<>>& nodes() const { return nodes_; }
  const std::map<std::string, Deletion, std::less<>>& deleted() const { return deleted_; }

  // Building (used by the layer merge and by tests).
  std::map<std::string, Node, std::less<>>& mutable_nodes() { return nodes_; }
  std::map<std::string, Deletion, std::less<>>& mutable_deleted() { return deleted_; }

 private:
  std::map<std::string, Node, std::less<>> nodes_;
  std::map<std::string, Deletion, std::less<>> deleted_;
};

}  // namespace imgcheck::image
