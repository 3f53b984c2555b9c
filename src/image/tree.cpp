#include "image/tree.h"

#include "util/path.h"

namespace imgcheck::image {

namespace {

constexpr int kMaxSymlinks = 40;  // Linux's MAXSYMLINKS

// Pushes the components of `path` onto `stack` so that the first component is on top.
void PushComponents(std::string_view path, std::vector<std::string>& stack) {
  std::vector<std::string> parts;
  for (std::string& p : util::Split(path, '/'))
    if (!p.empty() && p != ".") parts.push_back(std::move(p));
  stack.insert(stack.end(), std::make_move_iterator(parts.rbegin()),
               std::make_move_iterator(parts.rend()));
}

}  // namespace

const Node* Tree::Find(std::string_view path) const {
  auto it = nodes_.find(path);
  return it == nodes_.end() ? nullptr : &it->second;
}

const Deletion* Tree::FindDeleted(std::string_view path) const {
  auto it = deleted_.find(path);
  return it == deleted_.end() ? nullptr : &it->second;
}

std::optional<Tree::Resolved> Tree::Resolve(std::string_view path, bool follow_last) const {
  std::vector<std::string> todo;  // components still to walk, next on top
  PushComponents(path, todo);
  std::string current = "/";
  int links = 0;
  while (!todo.empty()) {
    std::string part = std::move(todo.back());
    todo.pop_back();
    if (part == "..") {
      current = std::string(util::DirName(current));  // clamped at "/"
      continue;
    }
    std::string next = current == "/" ? "/" + part : current + "/" + part;
    const Node* node = Find(next);
    bool last = todo.empty();
    if (node != nullptr && node->type == NodeType::kSymlink && (!last || follow_last)) {
      if (++links > kMaxSymlinks) return std::nullopt;
      // The target is read relative to the link's directory; an absolute one restarts at the
      // image root, never the host's.
      if (!node->link_target.empty() && node->link_target.front() == '/') current = "/";
      PushComponents(node->link_target, todo);
      continue;
    }
    if (node != nullptr && !last && node->type != NodeType::kDirectory) return std::nullopt;
    current = std::move(next);
  }
  return Resolved{current, Find(current)};
}

std::vector<std::string> Tree::List(std::string_view dir) const {
  std::string prefix(dir);
  if (prefix.empty() || prefix.back() != '/') prefix += '/';
  std::vector<std::string> out;
  auto it = nodes_.lower_bound(prefix);
  while (it != nodes_.end()) {
    std::string_view p = it->first;
    if (!p.starts_with(prefix)) break;
    std::string_view rest = p.substr(prefix.size());
    size_t slash = rest.find('/');
    if (slash == std::string_view::npos) {
      if (!rest.empty()) out.emplace_back(rest);
      ++it;
    } else {
      // A grandchild: skip that child's whole subtree ('0' sorts right after '/').
      it = nodes_.lower_bound(prefix + std::string(rest.substr(0, slash)) + "0");
    }
  }
  return out;
}

}  // namespace imgcheck::image
