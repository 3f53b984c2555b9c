#include "image/merge.h"

#include <map>
#include <set>
#include <unordered_set>

#include "util/path.h"

namespace imgcheck::image {

namespace {

using NodeMap = std::map<std::string, Node, std::less<>>;

NodeType TypeOf(EntryKind k) {
  switch (k) {
    case EntryKind::kDirectory:
      return NodeType::kDirectory;
    case EntryKind::kSymlink:
      return NodeType::kSymlink;
    case EntryKind::kCharDevice:
      return NodeType::kCharDevice;
    case EntryKind::kBlockDevice:
      return NodeType::kBlockDevice;
    case EntryKind::kFifo:
      return NodeType::kFifo;
    default:
      return NodeType::kRegular;
  }
}

// "/a" + "b" without renormalising.
std::string Child(std::string_view dir, std::string_view name) {
  std::string s(dir);
  if (s != "/") s += '/';
  s += name;
  return s;
}

// One layer's application. Mirrors umoci's TarExtractor: `upper_` holds the paths this layer
// wrote and their ancestors, which whiteouts never remove.
class Merger {
 public:
  Merger(Tree& tree, int layer, std::vector<util::Diagnostic>& diags)
      : tree_(tree), nodes_(tree.mutable_nodes()), layer_(layer), diags_(diags) {}

  void Apply(const LayerEntry& e) {
    if (e.path == "/") {
      if (e.kind == EntryKind::kDirectory)
        nodes_["/"].mode = e.mode;
      else if (e.kind != EntryKind::kOpaque)
        Note("/", "entry would replace the root directory; skipped");
      else
        RemoveLower("/", true);
      return;
    }
    switch (e.kind) {
      case EntryKind::kWhiteout: {
        std::optional<std::string> path = ResolvedPath(e.path, false);
        if (path && nodes_.count(*path)) RemoveLower(*path, false);
        return;
      }
      case EntryKind::kOpaque: {
        auto r = tree_.Resolve(e.path, true);
        if (r && r->node && r->node->type == NodeType::kDirectory) RemoveLower(r->path, true);
        return;
      }
      case EntryKind::kHardlink:
        return Link(e);
      default:
        break;
    }
    std::optional<std::string> path = ResolvedPath(e.path, true);
    if (!path) return;
    Node n;
    n.type = TypeOf(e.kind);
    n.mode = e.mode;
    n.size = e.size;
    if (e.kind == EntryKind::kSymlink) n.link_target = e.link_target;
    n.content = e.content;
    Write(*path, std::move(n));
  }

  LayerStats Finish() const {
    LayerStats s;
    for (const auto& [path, existed] : written_) {
      if (!nodes_.count(path)) continue;
      (existed ? s.changed : s.added)++;
    }
    for (const std::string& path : removed_)
      if (!nodes_.count(path)) s.deleted++;
    return s;
  }

 private:
  void Note(const std::string& path, std::string message) {
    diags_.push_back({path, layer_, std::move(message)});
  }

  // Where an entry lands: its parent resolved through the tree's symlinks (inside the root),
  // its own name not followed. With `make_parents`, missing parents are created.
  std::optional<std::string> ResolvedPath(const std::string& path, bool make_parents) {
    std::string_view dir = util::DirName(path);
    auto r = tree_.Resolve(dir, true);
    if (!r) {
      if (make_parents)
        Note(path, "parent directory is not a directory or is a symlink loop; entry skipped");
      return std::nullopt;
    }
    if (r->node == nullptr) {
      if (!make_parents) return std::nullopt;
      MakeDirs(r->path);
    } else if (r->node->type != NodeType::kDirectory) {
      if (make_parents) Note(path, "parent " + r->path + " is not a directory; entry skipped");
      return std::nullopt;
    }
    return Child(r->path, util::BaseName(path));
  }

  // Creates the missing directories of `dir` (already resolved, so existing parts are dirs).
  void MakeDirs(const std::string& dir) {
    std::string at;
    for (const std::string& part : util::Split(dir, '/')) {
      if (part.empty()) continue;
      at += "/" + part;
      if (nodes_.count(at)) continue;
      Node n;
      n.type = NodeType::kDirectory;
      n.mode = 0755;
      Write(at, std::move(n));
    }
  }

  void Link(const LayerEntry& e) {
    // Like umoci: the target's directory is resolved in the root, its last part is not.
    auto target_dir = tree_.Resolve(util::DirName(e.link_target), true);
    std::string target =
        target_dir ? Child(target_dir->path, util::BaseName(e.link_target)) : e.link_target;
    auto it = nodes_.find(target);
    if (it == nodes_.end())
      return Note(e.path, "hard link to missing target " + e.link_target + "; skipped");
    if (it->second.type == NodeType::kDirectory)
      return Note(e.path, "hard link to directory " + e.link_target + "; skipped");
    Node n = it->second;
    n.history.clear();
    std::optional<std::string> path = ResolvedPath(e.path, true);
    if (path) Write(*path, std::move(n));
  }

  void Write(const std::string& path, Node n) {
    auto it = nodes_.find(path);
    if (!written_.count(path))
      written_[path] = (it != nodes_.end() && it->second.layer != layer_) || removed_.count(path);
    if (it != nodes_.end()) {
      n.history = it->second.history;
      if (it->second.layer != layer_) n.history.push_back(it->second.layer);
      // A directory over a directory keeps its children; anything else replaces the subtree.
      if (!(it->second.type == NodeType::kDirectory && n.type == NodeType::kDirectory))
        Clobber(path);
    } else if (auto d = tree_.mutable_deleted().find(path); d != tree_.mutable_deleted().end()) {
      n.history = d->second.history;
    }
    tree_.mutable_deleted().erase(path);
    n.layer = layer_;
    nodes_[path] = std::move(n);
    for (std::string p = path; upper_.insert(p).second && p != "/";)
      p = std::string(util::DirName(p));
  }

  // Removes `path` (unless keep_self) and everything below it that this layer did not write.
  void RemoveLower(const std::string& path, bool keep_self) {
    if (!keep_self && !upper_.count(path)) Erase(path);
    ForSubtree(path, [&](const std::string& p) { return !upper_.count(p); });
  }

  // Removes `path` and everything below it.
  void Clobber(const std::string& path) {
    Erase(path);
    ForSubtree(path, [](const std::string&) { return true; });
  }

  template <class Pred>
  void ForSubtree(const std::string& path, Pred should_erase) {
    std::string prefix = path == "/" ? "/" : path + "/";
    std::string end = prefix.substr(0, prefix.size() - 1) + "0";  // '0' follows '/'
    auto it = nodes_.lower_bound(prefix);
    if (it != nodes_.end() && it->first == "/") ++it;
    auto stop = nodes_.lower_bound(end);
    std::vector<std::string> doomed;
    for (; it != stop; ++it)
      if (should_erase(it->first)) doomed.push_back(it->first);
    for (const std::string& p : doomed) Erase(p);
  }

  // Drops one node, recording the deletion when a lower layer had written it.
  void Erase(const std::string& path) {
    auto it = nodes_.find(path);
    if (it == nodes_.end()) return;
    const Node& n = it->second;
    bool from_lower = n.layer != layer_ || (written_.count(path) && written_.at(path));
    if (from_lower) {
      Deletion d;
      d.layer = layer_;
      d.history = n.history;
      if (n.layer != layer_) d.history.push_back(n.layer);
      d.type = n.type;
      tree_.mutable_deleted()[path] = std::move(d);
      removed_.insert(path);
    }
    nodes_.erase(it);
  }

  Tree& tree_;
  NodeMap& nodes_;
  int layer_;
  std::vector<util::Diagnostic>& diags_;
  std::unordered_set<std::string> upper_;
  std::map<std::string, bool> written_;  // path -> existed before this layer
  std::set<std::string> removed_;        // paths of lower layers this layer removed
};

}  // namespace

LayerStats Merge(Tree& tree, const LayerContents& contents, int layer,
                 std::vector<util::Diagnostic>& diagnostics) {
  auto& nodes = tree.mutable_nodes();
  if (!nodes.count("/")) {
    Node root;
    root.type = NodeType::kDirectory;
    root.mode = 0755;
    root.layer = layer;
    nodes["/"] = root;
  }
  diagnostics.insert(diagnostics.end(), contents.diagnostics.begin(), contents.diagnostics.end());
  Merger m(tree, layer, diagnostics);
  for (const LayerEntry& e : contents.entries) m.Apply(e);
  return m.Finish();
}

}  // namespace imgcheck::image
