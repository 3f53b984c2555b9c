// Libraries of the families in rules/libraries.json, present and deleted, with their aliases
// and every version evidence: file name, soname, owning package, version headers and
// /usr/local/cuda*/version.json under the same install prefix.
#include <set>

#include "catalog/builder.h"
#include "catalog/metadata.h"
#include "util/path.h"

namespace imgcheck::catalog {
namespace {

using image::Node;
using image::NodeType;

std::string Major(std::string_view version) {
  return std::string(version.substr(0, version.find('.')));
}

struct HeaderFact {
  const Family* family;
  std::string path, prefix, version;
  int layer;
};

}  // namespace

ComponentKind Builder::LibraryKind(const Family& f, std::string_view path) const {
  if (HasDirComponent(path, rules_.stub_dirs)) return ComponentKind::kDriverStub;
  if (f.kind == ComponentKind::kDriverLibrary && HasDirComponent(path, rules_.compat_dirs)) {
    return ComponentKind::kCompatLibrary;
  }
  return f.kind;
}

/// A library component for `path` with what its name says; null when it is no library.
Component* Builder::NewLibrary(const std::string& path) {
  std::string_view name = util::BaseName(path);
  std::string_view base = LibraryBaseName(name);
  if (base.empty()) return nullptr;
  const Family* f = rules_.Classify(base);
  if (f == nullptr) return nullptr;
  Component c;
  c.kind = LibraryKind(*f, path);
  c.name = std::string(base);
  c.family = f->family;
  c.path = path;
  cat_.components.push_back(std::move(c));
  return &cat_.components.back();
}

void Builder::AddLibraries() {
  for (const auto& [path, node] : tree_.nodes()) {
    if (node.type != NodeType::kRegular) continue;
    Component* c = NewLibrary(path);
    if (c == nullptr) continue;
    c->layer = node.layer;
    c->overwritten_layers = node.history;
    if (node.content) c->sha256 = node.content->sha256();
    if (std::string v = FilenameVersion(util::BaseName(path)); !v.empty()) {
      c->versions.push_back({v, VersionSource::kFilename, path, node.layer, ""});
    }
    if (const elf::ElfInfo* info = cat_.Elf(path)) {
      LibraryFacts facts;
      facts.soname = info->soname;
      facts.needed = info->needed;
      facts.machine = info->machine;
      facts.is64 = info->is64;
      std::set<unsigned> sass, ptx;
      for (const elf::FatbinEntry& e : info->fatbin) {
        (e.kind == elf::FatbinEntry::Kind::kCubin ? sass : ptx).insert(e.sm);
      }
      facts.sass_sm.assign(sass.begin(), sass.end());
      facts.ptx_sm.assign(ptx.begin(), ptx.end());
      c->elf = std::move(facts);
      if (std::string v = FilenameVersion(info->soname); !v.empty()) {
        c->versions.push_back({v, VersionSource::kSoname, path, node.layer, info->soname});
      }
    }
    auto owner = owners_.find(Canonical(path));
    if (owner != owners_.end()) {
      c->owner = owner->second;
      const PackageRef& o = owner->second;
      // Only the family's own package states the library's version (torch owning a bundled
      // libcudnn.so.8 says nothing about cuDNN's).
      if (rules_.ByPackage(o.manager, o.name) == rules_.Classify(c->name)) {
        static constexpr VersionSource kBy[] = {VersionSource::kDpkg, VersionSource::kPipRecord,
                                                VersionSource::kConda};
        std::string v = o.manager == PackageManager::kDpkg ? UpstreamVersion(o.version) : o.version;
        c->versions.push_back({v, kBy[static_cast<int>(o.manager)], o.metadata, o.layer,
                               o.version == v ? "" : o.version});
      }
    }
    library_at_[path] = cat_.components.size() - 1;
  }
}

void Builder::AddDeletedLibraries() {
  for (const auto& [path, deletion] : tree_.deleted()) {
    if (deletion.type != NodeType::kRegular) continue;
    Component* c = NewLibrary(path);
    if (c == nullptr) continue;
    c->deleted = true;
    c->layer = deletion.layer;
    c->overwritten_layers = deletion.history;
    int wrote = deletion.history.empty() ? -1 : deletion.history.back();
    if (std::string v = FilenameVersion(util::BaseName(path)); !v.empty()) {
      c->versions.push_back({v, VersionSource::kFilename, path, wrote, ""});
    }
  }
}

void Builder::AddAliases() {
  for (const auto& [path, node] : tree_.nodes()) {
    if (node.type != NodeType::kSymlink) continue;
    std::optional<image::Tree::Resolved> r = tree_.Resolve(path);
    if (!r) continue;
    auto it = library_at_.find(r->path);
    if (it != library_at_.end()) cat_.components[it->second].aliases.push_back(path);
  }
}

/// Adds `evidence` to the present libraries of `family` under `root` whose major agrees,
/// unless a deeper root (a closer header) claims them: `claimed` keeps the depth per library.
void Builder::AttachUnder(std::string_view family, const std::string& root,
                          const VersionEvidence& e, std::map<size_t, size_t>& claimed) {
  std::string prefix = root == "/" ? "/" : root + "/";
  for (const auto& [path, index] : library_at_) {
    Component& c = cat_.components[index];
    if (c.family != family || !path.starts_with(prefix)) continue;
    std::string file_major;
    for (const VersionEvidence& v : c.versions) {
      if (v.source == VersionSource::kFilename || v.source == VersionSource::kSoname) {
        file_major = Major(v.value);
        break;
      }
    }
    if (!file_major.empty() && file_major != Major(e.value)) continue;
    auto [it, fresh] = claimed.emplace(index, root.size());
    if (!fresh) {
      if (it->second >= root.size()) continue;
      // A deeper root wins: drop the shallower evidence of the same source.
      std::erase_if(c.versions, [&](const VersionEvidence& v) { return v.source == e.source; });
      it->second = root.size();
    }
    c.versions.push_back(e);
  }
}

void Builder::AddHeaders() {
  std::map<size_t, size_t> claimed;
  // Deepest headers last, so that AttachUnder's replacement sees them win.
  std::vector<HeaderFact> facts;
  for (const std::string& path : headers_) {
    const Node* node = tree_.Find(path);
    const Family* f = rules_.ByHeader(util::BaseName(path));
    std::optional<std::string_view> text = Text(path, *node);
    if (!text) continue;
    std::optional<std::string> v =
        f->family == "cudart" ? CudartHeaderVersion(*text) : CudnnHeaderVersion(*text);
    if (!v) continue;
    // The install prefix: what comes before the "include" directory.
    std::string root = path;
    size_t inc = path.rfind("/include/");
    root = inc == std::string::npos ? std::string(util::DirName(path)) : path.substr(0, inc);
    if (root.empty()) root = "/";
    Component c;
    c.kind = ComponentKind::kHeader;
    c.name = std::string(util::BaseName(path));
    c.family = f->family;
    c.path = path;
    c.layer = node->layer;
    c.overwritten_layers = node->history;
    VersionEvidence e{*v, VersionSource::kHeader, path, node->layer, ""};
    c.versions.push_back(e);
    cat_.components.push_back(std::move(c));
    facts.push_back({f, path, root, *v, node->layer});
  }
  for (const HeaderFact& h : facts) {
    AttachUnder(h.family->family, h.prefix,
                {h.version, VersionSource::kHeader, h.path, h.layer, ""}, claimed);
  }
}

void Builder::AddVersionFiles() {
  std::map<size_t, size_t> claimed;
  for (const std::string& path : version_files_) {
    const Node* node = tree_.Find(path);
    std::optional<std::string_view> text = Text(path, *node, true);
    if (!text) continue;
    std::map<std::string, std::string> versions;
    if (path.ends_with(".json")) {
      util::Expected<std::map<std::string, std::string>> parsed = ParseCudaVersionJson(*text);
      if (!parsed) {
        Diagnose(path, node->layer, parsed.error().message);
        continue;
      }
      versions = std::move(*parsed);
    } else if (std::optional<std::string> v = ParseCudaVersionTxt(*text)) {
      versions["cuda"] = *v;
    }
    if (versions.empty()) continue;
    Component c;
    c.kind = ComponentKind::kCudaToolkit;
    c.name = "cuda";
    c.path = path;
    c.layer = node->layer;
    c.overwritten_layers = node->history;
    if (versions.count("cuda")) {
      c.versions.push_back({versions["cuda"], VersionSource::kVersionJson, path, node->layer, ""});
    }
    for (const auto& [k, v] : versions) c.build[k] = v;
    cat_.components.push_back(std::move(c));
    std::string root(util::DirName(path));
    for (const Family& f : rules_.families) {
      for (const std::string& key : f.version_json) {
        auto it = versions.find(key);
        if (it == versions.end()) continue;
        AttachUnder(f.family, root,
                    {it->second, VersionSource::kVersionJson, path, node->layer, key}, claimed);
      }
    }
  }
}

}  // namespace imgcheck::catalog
