// Package managers' databases: dpkg (status, status.d, info/*.list), pip (*.dist-info METADATA
// and RECORD, *.egg-info PKG-INFO) and conda (conda-meta/*.json). CUDA packages become
// components; every package records which files it owns, for the libraries' version evidence.
#include <algorithm>
#include <cctype>
#include <set>

#include "catalog/builder.h"
#include "catalog/metadata.h"
#include "util/path.h"
#include "util/sha256.h"

namespace imgcheck::catalog {

using image::Node;
using image::NodeType;

std::string Builder::Canonical(std::string_view path) const {
  std::optional<image::Tree::Resolved> r = tree_.Resolve(path, /*follow_last=*/false);
  return r ? r->path : util::NormalizePath(path);
}

void Builder::Own(std::string_view path, const PackageRef& owner) {
  // Only files the image has (or had: deleted libraries keep their owner) are looked up, so a
  // database listing millions of absent paths costs nothing past its parse.
  std::string canonical = Canonical(path);
  if (tree_.Find(canonical) != nullptr || tree_.FindDeleted(canonical) != nullptr)
    owners_.emplace(std::move(canonical), owner);
}

void Builder::ReadDpkg() {
  std::map<std::string, DpkgPackage> packages;
  for (const std::string& db : dpkg_databases_) {
    const Node* node = tree_.Find(db);
    std::optional<std::string_view> text = Records(db, *node);
    if (!text) continue;
    bool status_d = db != "/var/lib/dpkg/status";
    for (DpkgPackage& p : ParseDpkgStatus(*text)) {
      // "install ok installed", "hold ok installed": the last word is the state. status.d
      // records carry no Status: the package is installed.
      if (!p.status.ends_with(" installed") && !(status_d && p.status.empty())) continue;
      std::string name = p.name;
      bool cuda = rules_.IsCudaPackage(PackageManager::kDpkg, name);
      {
        Component c;
        c.kind = ComponentKind::kOsPackage;
        c.name = name;
        if (const Family* f = rules_.ByPackage(PackageManager::kDpkg, name)) c.family = f->family;
        c.path = db;
        c.layer = node->layer;
        c.status = p.status;
        c.held = p.status.starts_with("hold ");
        c.versions.push_back(
            {UpstreamVersion(p.version), VersionSource::kDpkg, db, node->layer, p.version});
        (cuda ? cat_.components : cat_.packages).push_back(std::move(c));
      }
      packages.emplace(name, std::move(p));
    }
  }
  for (const auto& [package, list_path] : dpkg_lists_) {
    auto it = packages.find(package);
    if (it == packages.end()) continue;
    const Node* node = tree_.Find(list_path);
    std::optional<std::string_view> text = Records(list_path, *node);
    if (!text) continue;
    PackageRef owner{PackageManager::kDpkg, package, it->second.version, list_path, node->layer};
    for (std::string_view rest = *text; !rest.empty();) {
      size_t eol = rest.find('\n');
      std::string_view line = rest.substr(0, eol);
      rest = eol == std::string_view::npos ? std::string_view() : rest.substr(eol + 1);
      std::string file;
      if (!line.empty() && line.front() == '/')
        file = line;  // info/*.list: "/usr/lib/x"
      else if (size_t sep = line.find("  "); sep != std::string_view::npos)
        file = "/" + std::string(line.substr(sep + 2));  // status.d/*.md5sums: "<md5>  usr/lib/x"
      if (!file.empty() && file != "/.") Own(file, owner);
    }
  }
  for (const auto& [package, md5sums] : dpkg_md5sums_)
    if (auto it = packages.find(package); it != packages.end()) CheckMd5sums(md5sums, it->second);
}

void Builder::CheckMd5sums(const std::string& path, const DpkgPackage& package) {
  const Node* node = tree_.Find(path);
  std::optional<std::string_view> text = Records(path, *node);
  if (!text) return;
  PackageRef owner{PackageManager::kDpkg, package.name, package.version, path, node->layer};
  for (const Md5sumsLibrary& line : ParseMd5sumsLibraries(*text)) {
    std::optional<image::Tree::Resolved> r = tree_.Resolve(line.path);
    // Only a later layer's file counts: dpkg wrote both in one layer (a same-layer change is
    // the package's own maintainer scripts' business).
    if (!r || !r->node || r->node->type != NodeType::kRegular || r->node->layer <= node->layer ||
        !r->node->content)
      continue;
    const util::SparseFile& content = *r->node->content;
    std::string md5 = content.md5();
    if (md5.empty() && content.complete())
      if (std::optional<std::string_view> bytes = content.View(0, content.size()))
        md5 = util::Md5Hex(*bytes);
    if (!md5.empty() && md5 != line.md5)
      cat_.replaced.push_back({r->path, owner, line.md5, "MD5 " + md5, r->node->layer});
  }
}

void Builder::ReadDists() {
  for (auto& [dir, d] : dists_) {
    Component c;
    c.kind = ComponentKind::kPythonDist;
    c.path = dir;
    DistMetadata meta;
    int meta_layer = -1;
    if (d.metadata != nullptr) {
      if (std::optional<std::string_view> text = Records(d.metadata_path, *d.metadata)) {
        meta = ParseDistMetadata(*text);
      }
      meta_layer = d.metadata->layer;
      c.layer = meta_layer;
    }
    if (meta.name.empty()) {
      // "torch-2.1.0.dist-info": the name is before the first '-'.
      std::string_view base = util::BaseName(dir);
      meta.name = std::string(base.substr(0, base.find('-')));
      if (meta.version.empty() && base.find('-') != std::string_view::npos) {
        std::string_view rest = base.substr(base.find('-') + 1);
        meta.version = std::string(rest.substr(0, rest.rfind('.')));
      }
    }
    c.name = NormalizeDistName(meta.name);
    if (const Family* f = rules_.ByPackage(PackageManager::kPip, c.name)) c.family = f->family;
    if (!meta.version.empty()) {
      c.versions.push_back({meta.version, VersionSource::kPipMetadata,
                            d.metadata ? d.metadata_path : dir, meta_layer, ""});
    }
    c.requires_dist = std::move(meta.requires_dist);
    if (d.record != nullptr) {
      if (c.layer < 0) c.layer = d.record->layer;
      if (std::optional<std::string_view> text = Records(d.record_path, *d.record, true)) {
        PackageRef owner{PackageManager::kPip, c.name, meta.version, d.record_path,
                         d.record->layer};
        std::string site = std::string(util::DirName(dir));
        for (const RecordEntry& entry : ParseRecord(*text)) {
          std::string abs = util::JoinPath(site, entry.path);
          std::optional<image::Tree::Resolved> r = tree_.Resolve(abs);
          if (!r || r->node == nullptr) {
            c.missing_files.push_back(abs);
            continue;
          }
          Own(abs, owner);
          // Only a later layer's file counts, as with dpkg: in the RECORD's own layer the
          // mismatch may be the wheel's (pip copies its RECORD rows and checks none:
          // pynvvideocodec 2.0.4 states 2402945 bytes for a module of 2439136), which the
          // layers cannot tell from a change the installing step made.
          if (entry.size && r->node->type == NodeType::kRegular && r->node->size != *entry.size &&
              r->node->layer > d.record->layer)
            cat_.replaced.push_back({r->path, owner, std::to_string(*entry.size),
                                     std::to_string(r->node->size) + " bytes", r->node->layer});
        }
      }
    }
    cat_.components.push_back(std::move(c));
  }
}

void Builder::ReadConda() {
  for (const std::string& path : conda_) {
    const Node* node = tree_.Find(path);
    std::optional<std::string_view> text = Text(path, *node, true);
    if (!text) continue;
    util::Expected<CondaPackage> p = ParseCondaMeta(*text);
    if (!p) {
      Diagnose(path, node->layer, p.error().message);
      continue;
    }
    std::string prefix(util::DirName(util::DirName(path)));
    PackageRef owner{PackageManager::kConda, p->name, p->version, path, node->layer};
    for (const std::string& f : p->files) Own(util::JoinPath(prefix, f), owner);
    Component c;
    c.kind = ComponentKind::kCondaPackage;
    c.name = p->name;
    if (const Family* f = rules_.ByPackage(PackageManager::kConda, c.name)) c.family = f->family;
    c.path = path;
    c.layer = node->layer;
    c.versions.push_back({p->version, VersionSource::kConda, path, node->layer, p->build});
    bool cuda = rules_.IsCudaPackage(PackageManager::kConda, p->name);
    (cuda ? cat_.components : cat_.packages).push_back(std::move(c));
  }
}

void Builder::ReadIntent() {
  auto mark = [&](PackageManager m, const std::string& name, const std::string& why) {
    cat_.requested.try_emplace(std::string(ManagerName(m)) + ":" + name, why);
  };
  std::set<std::string, std::less<>> dpkg, pip, conda;
  for (const auto* list : {&cat_.components, &cat_.packages})
    for (const Component& c : *list) {
      if (c.kind == ComponentKind::kOsPackage) dpkg.insert(c.name);
      if (c.kind == ComponentKind::kPythonDist && !c.deleted) pip.insert(c.name);
      if (c.kind == ComponentKind::kCondaPackage) conda.insert(c.name);
    }
  // The RUN lines: a package named after `apt-get install` or `pip install`.
  for (size_t i = 0; i < image_.layers.size(); ++i) {
    const std::string& line = image_.layers[i].created_by;
    std::string where = " (named on the RUN line of layer " + std::to_string(i) + ")";
    for (const std::string& name : InstalledOnCommandLine(line, "apt"))
      if (dpkg.count(name)) mark(PackageManager::kDpkg, name, "apt-get install " + name + where);
    for (const std::string& name : InstalledOnCommandLine(line, "pip"))
      if (std::string n = NormalizeDistName(name); pip.count(n))
        mark(PackageManager::kPip, n, "pip install " + n + where);
  }
  // apt: every installed package its extended_states does not mark Auto-Installed.
  const std::string states = "/var/lib/apt/extended_states";
  if (const Node* node = tree_.Find(states); node && node->type == NodeType::kRegular)
    if (std::optional<std::string_view> text = Records(states, *node)) {
      std::set<std::string, std::less<>> automatic;
      for (const DpkgPackage& p : ParseDpkgStatus(*text))
        if (p.auto_installed) automatic.insert(p.name);
      for (const std::string& name : dpkg)
        if (!automatic.count(name))
          mark(PackageManager::kDpkg, name,
               "apt marks it manually installed (" + states + ", layer " +
                   std::to_string(node->layer) + ")");
    }
  // pip: the REQUESTED file of its *.dist-info (PEP 376, written for a name on pip's command line).
  for (const Component& c : cat_.components)
    if (c.kind == ComponentKind::kPythonDist && !c.deleted)
      if (const Node* r = tree_.Find(c.path + "/REQUESTED"))
        mark(PackageManager::kPip, c.name,
             "pip REQUESTED (" + c.path + "/REQUESTED, layer " + std::to_string(r->layer) + ")");
  // conda: the specs of its history.
  for (const std::string& path : conda_history_) {
    const Node* node = tree_.Find(path);
    std::optional<std::string_view> text = Records(path, *node);
    if (!text) continue;
    for (const std::string& name : ParseCondaHistorySpecs(*text))
      if (conda.count(name))
        mark(PackageManager::kConda, name,
             "conda history specs (" + path + ", layer " + std::to_string(node->layer) + ")");
  }
}

}  // namespace imgcheck::catalog
