#include "fake_image.h"

#include <algorithm>
#include <memory>

namespace imgcheck::testing {
namespace {

image::Node& Add(image::Tree& tree, const std::string& path, image::NodeType type, int layer) {
  auto& nodes = tree.mutable_nodes();
  for (size_t s = path.find('/', 1); s != std::string::npos; s = path.find('/', s + 1)) {
    auto [dir, added] = nodes.try_emplace(path.substr(0, s));
    if (added) {
      dir->second.type = image::NodeType::kDirectory;
      dir->second.layer = 0;
    }
  }
  image::Node& n = nodes[path] = image::Node{};
  n.type = type;
  n.layer = layer;
  return n;
}

}  // namespace

image::Node& AddFile(image::Tree& tree, const std::string& path, std::string bytes, int layer,
                     std::vector<int> history) {
  image::Node& n = Add(tree, path, image::NodeType::kRegular, layer);
  n.mode = 0644;
  n.size = bytes.size();
  n.history = std::move(history);
  n.content = std::make_shared<util::SparseFile>(util::SparseFile::Whole(std::move(bytes)));
  return n;
}

image::Node& AddDir(image::Tree& tree, const std::string& path, int layer) {
  image::Node& n = Add(tree, path, image::NodeType::kDirectory, layer);
  n.mode = 0755;
  return n;
}

image::Node& AddLink(image::Tree& tree, const std::string& path, const std::string& target,
                     int layer) {
  image::Node& n = Add(tree, path, image::NodeType::kSymlink, layer);
  n.link_target = target;
  return n;
}

// magic[11], pad, nlibs, then {flags, key, value} entries, then the string table that key/value
// offsets point into.
std::string OldCache(const std::vector<std::pair<std::string, std::string>>& libs, int32_t flags) {
  std::string strings, table;
  auto put32 = [&](uint32_t v) { table.append(reinterpret_cast<const char*>(&v), 4); };
  for (const auto& [name, path] : libs) {
    put32(static_cast<uint32_t>(flags));
    put32(static_cast<uint32_t>(strings.size()));
    strings += name + '\0';
    put32(static_cast<uint32_t>(strings.size()));
    strings += path + '\0';
  }
  std::string out("ld.so-1.7.0\0", 12);
  uint32_t n = static_cast<uint32_t>(libs.size());
  out.append(reinterpret_cast<const char*>(&n), 4);
  return out + table + strings;
}

std::vector<std::pair<std::string, std::string>> DistInfo(
    const std::string& name, const std::string& version,
    const std::vector<std::string>& requires_dist, const std::vector<std::string>& files) {
  std::string dist = name;
  std::replace(dist.begin(), dist.end(), '-', '_');
  std::string dir = dist + "-" + version + ".dist-info";
  std::string metadata = "Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version + "\n";
  for (const auto& r : requires_dist) metadata += "Requires-Dist: " + r + "\n";
  std::string record;
  for (const auto& f : files) record += f + ",,\n";
  record += dir + "/METADATA,,\n" + dir + "/RECORD,,\n";
  return {{dir + "/METADATA", metadata}, {dir + "/RECORD", record}};
}

FakeImage::FakeImage(int layers) {
  for (int i = 0; i < layers; ++i) {
    image::Layer l;
    l.index = i;
    l.digest = "sha256:layer" + std::to_string(i);
    l.created_by = "RUN step " + std::to_string(i);
    image_.layers.push_back(l);
  }
  AddDir(image_.tree, "/");
}

FakeImage& FakeImage::Deleted(const std::string& path, int layer, std::vector<int> history) {
  image_.tree.mutable_deleted()[path] =
      image::Deletion{layer, std::move(history), image::NodeType::kRegular};
  return *this;
}

}  // namespace imgcheck::testing
