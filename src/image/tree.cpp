#include "image/tree.h"

#include <algorithm>

namespace imgcheck::image {

namespace {

constexpr int kMaxSymlinks = 40;  // Linux's MAXSYMLINKS

// Pushes the components of `path` ("" and "." dropped) onto `stack` so that the first
// component is on top. The views point into `path`.
void PushComponents(std::string_view path, std::vector<std::string_view>& stack) {
  const size_t first = stack.size();
  for (size_t i = 0; i <= path.size();) {
    size_t end = std::min(path.find('/', i), path.size());
    std::string_view part = path.substr(i, end - i);
    if (!part.empty() && part != ".") stack.push_back(part);
    i = end + 1;
  }
  std::reverse(stack.begin() + static_cast<std::ptrdiff_t>(first), stack.end());
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
  // Components still to walk, next on top: views into `path` and into the link targets of
  // nodes_, which outlive the walk. `current` is the path walked so far, extended in place (the
  // loader resolves thousands of candidate paths per scan: no string per component).
  std::vector<std::string_view> todo;
  PushComponents(path, todo);
  std::string current = "/";
  current.reserve(path.size() + 1);
  int links = 0;
  while (!todo.empty()) {
    std::string_view part = todo.back();
    todo.pop_back();
    if (part == "..") {
      current.resize(std::max<size_t>(current.rfind('/'), 1));  // DirName, clamped at "/"
      continue;
    }
    const size_t parent = current.size();
    if (parent > 1) current += '/';
    current += part;
    const Node* node = Find(current);
    bool last = todo.empty();
    if (node != nullptr && node->type == NodeType::kSymlink && (!last || follow_last)) {
      if (++links > kMaxSymlinks) return std::nullopt;
      // The target is read relative to the link's directory; an absolute one restarts at the
      // image root, never the host's.
      current.resize(parent);
      if (!node->link_target.empty() && node->link_target.front() == '/') current.resize(1);
      PushComponents(node->link_target, todo);
      continue;
    }
    if (node != nullptr && !last && node->type != NodeType::kDirectory) return std::nullopt;
  }
  const Node* node = Find(current);
  return Resolved{std::move(current), node};
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
