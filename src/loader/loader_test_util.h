// Test helpers: an image tree read from a host directory, and an ELF index over it.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "elf/elf.h"
#include "image/tree.h"
#include "loader/loader.h"
#include "support.h"

namespace imgcheck::loader::testing {

/// The merged tree of a root file system on the host: directories, symlinks (not followed),
/// and regular files with their whole content (fixtures are small; larger files keep none).
inline image::Tree TreeFromDir(const std::filesystem::path& root) {
  namespace fs = std::filesystem;
  image::Tree tree;
  auto& nodes = tree.mutable_nodes();
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator();
       ++it) {
    std::string path = "/" + fs::relative(it->path(), root).generic_string();
    image::Node node;
    node.layer = 0;
    if (it->is_symlink()) {
      node.type = image::NodeType::kSymlink;
      node.link_target = fs::read_symlink(it->path()).string();
    } else if (it->is_directory()) {
      node.type = image::NodeType::kDirectory;
    } else if (it->is_regular_file()) {
      node.size = it->file_size();
      if (node.size <= (16u << 20))
        node.content = std::make_shared<util::SparseFile>(
            util::SparseFile::Whole(imgcheck::testing::ReadFile(it->path())));
    }
    nodes[path] = std::move(node);
  }
  return tree;
}

/// ElfInfo of every regular file of `tree` that elf::Parse accepts, by path: what the
/// catalog's ELF index supplies in production.
class ElfIndex {
 public:
  explicit ElfIndex(const image::Tree& tree) {
    for (const auto& [path, node] : tree.nodes()) {
      if (node.type != image::NodeType::kRegular || !node.content) continue;
      auto parsed = elf::Parse(*node.content);
      if (parsed && parsed->has_value()) infos_.emplace(path, std::move(**parsed));
    }
  }
  ElfLookup Lookup() const {
    return [this](std::string_view path) -> const elf::ElfInfo* {
      auto it = infos_.find(path);
      return it == infos_.end() ? nullptr : &it->second;
    };
  }
  std::map<std::string, elf::ElfInfo, std::less<>>& infos() { return infos_; }

 private:
  std::map<std::string, elf::ElfInfo, std::less<>> infos_;
};

}  // namespace imgcheck::loader::testing
