#include "image/merge.h"

#include <catch2/catch.hpp>

namespace imgcheck::image {
namespace {

LayerEntry F(std::string path, std::string content = "x") {
  LayerEntry e{std::move(path), EntryKind::kFile, 0644, content.size(), "", nullptr};
  e.content = std::make_shared<const util::SparseFile>(util::SparseFile::Whole(std::move(content)));
  return e;
}
LayerEntry D(std::string path) {
  return {std::move(path), EntryKind::kDirectory, 0755, 0, "", nullptr};
}
LayerEntry L(std::string path, std::string target) {
  return {std::move(path), EntryKind::kSymlink, 0777, 0, std::move(target), nullptr};
}
LayerEntry H(std::string path, std::string target) {
  return {std::move(path), EntryKind::kHardlink, 0, 0, std::move(target), nullptr};
}
LayerEntry Wh(std::string path) {
  return {std::move(path), EntryKind::kWhiteout, 0, 0, "", nullptr};
}
LayerEntry Opq(std::string dir) { return {std::move(dir), EntryKind::kOpaque, 0, 0, "", nullptr}; }

struct Stack {
  Tree tree;
  std::vector<util::Diagnostic> diags;
  std::vector<LayerStats> stats;
  Stack& Add(std::vector<LayerEntry> entries) {
    LayerContents c;
    c.entries = std::move(entries);
    stats.push_back(Merge(tree, c, static_cast<int>(stats.size()), diags));
    return *this;
  }
  bool Has(const std::string& p) const { return tree.Find(p) != nullptr; }
  std::string Content(const std::string& p) const {
    const Node* n = tree.Find(p);
    if (n == nullptr || !n->content) return "";
    return std::string(*n->content->View(0, n->content->size()));
  }
};

TEST_CASE("a whiteout deletes a lower file or subtree and records who deleted it", "[merge]") {
  Stack s;
  s.Add({D("/a"), F("/a/f"), D("/a/b"), F("/a/b/g"), L("/s", "a/f")});
  s.Add({F("/a/f", "v2")});
  s.Add({Wh("/a/f"), Wh("/a/b"), Wh("/s"), Wh("/missing")});
  CHECK_FALSE(s.Has("/a/f"));
  CHECK_FALSE(s.Has("/a/b"));
  CHECK_FALSE(s.Has("/a/b/g"));
  CHECK_FALSE(s.Has("/s"));
  CHECK(s.Has("/a"));
  const Deletion* d = s.tree.FindDeleted("/a/f");
  REQUIRE(d);
  CHECK(d->layer == 2);
  CHECK(d->history == std::vector<int>{0, 1});
  CHECK(d->type == NodeType::kRegular);
  REQUIRE(s.tree.FindDeleted("/a/b/g"));
  CHECK(s.tree.FindDeleted("/a/b")->type == NodeType::kDirectory);
  CHECK(s.tree.FindDeleted("/missing") == nullptr);  // a whiteout of nothing does nothing
  CHECK(s.stats[2].deleted == 4);                    // /a/f, /a/b, /a/b/g, /s
  CHECK(s.stats[2].added == 0);
  CHECK(s.stats[2].changed == 0);
}

TEST_CASE("whiteouts only hide lower layers, whatever their order in the layer", "[merge]") {
  Stack s;
  s.Add({D("/a"), F("/a/f", "old"), F("/a/g", "old")});
  // Whiteout before the new file: the lower file goes, the new one stays.
  // Whiteout after the new file: the new file stays as well (umoci's upper paths).
  s.Add({Wh("/a/f"), F("/a/f", "new"), F("/a/g", "new"), Wh("/a/g"), D("/n"), F("/n/x"), Wh("/n")});
  CHECK(s.Content("/a/f") == "new");
  CHECK(s.Content("/a/g") == "new");
  CHECK(s.Has("/n/x"));
  CHECK(s.tree.Find("/a/f")->layer == 1);
  CHECK(s.tree.Find("/a/f")->history == std::vector<int>{0});
  CHECK(s.tree.FindDeleted("/a/f") == nullptr);  // replaced, not gone
  CHECK(s.stats[1].changed == 2);
  CHECK(s.stats[1].added == 2);  // /n, /n/x
  CHECK(s.stats[1].deleted == 0);
}

TEST_CASE("an opaque directory hides lower children only", "[merge]") {
  Stack s;
  s.Add({D("/d"), F("/d/x"), D("/d/sub"), F("/d/sub/y"), F("/keep")});
  s.Add({F("/d/new"), Opq("/d"), F("/d/after")});
  CHECK(s.tree.List("/d") == std::vector<std::string>{"after", "new"});
  CHECK(s.Has("/keep"));
  CHECK(s.tree.Find("/d")->type == NodeType::kDirectory);
  REQUIRE(s.tree.FindDeleted("/d/sub/y"));
  CHECK(s.tree.FindDeleted("/d/sub/y")->layer == 1);
  CHECK(s.stats[1].deleted == 3);
}

TEST_CASE("a file replaces a directory and a directory replaces a file", "[merge]") {
  Stack s;
  s.Add({D("/d"), F("/d/x"), F("/f"), D("/r"), L("/l", "r")});
  s.Add({F("/d", "now a file"), D("/f"), F("/f/inside"), D("/l"), F("/l/m")});
  CHECK(s.tree.Find("/d")->type == NodeType::kRegular);
  CHECK_FALSE(s.Has("/d/x"));
  REQUIRE(s.tree.FindDeleted("/d/x"));
  CHECK(s.tree.FindDeleted("/d/x")->layer == 1);
  CHECK(s.tree.Find("/f")->type == NodeType::kDirectory);
  CHECK(s.Has("/f/inside"));
  // A directory entry over a symlink replaces the link (no --keep-dirlinks).
  CHECK(s.tree.Find("/l")->type == NodeType::kDirectory);
  CHECK(s.Has("/l/m"));
  CHECK_FALSE(s.Has("/r/m"));
}

TEST_CASE("entries land through symlinked parent directories, inside the root", "[merge]") {
  Stack s;
  s.Add({D("/usr"), D("/usr/lib"), L("/lib", "usr/lib"), F("/usr/lib/old"), L("/up", "../../..")});
  s.Add({F("/lib/libz.so.1", "z"), Wh("/lib/old"), F("/up/etc/escaped")});
  CHECK(s.Content("/usr/lib/libz.so.1") == "z");
  CHECK_FALSE(s.Has("/lib/libz.so.1"));
  CHECK_FALSE(s.Has("/usr/lib/old"));
  CHECK(s.Has("/etc/escaped"));  // "../../.." from / is / itself
}

TEST_CASE("hard links copy their target, a missing target is a diagnostic", "[merge]") {
  Stack s;
  s.Add({F("/lower", "L")});
  s.Add({F("/a", "A"), H("/b", "/a"), H("/c", "/lower"), H("/d", "/nope"), H("/e", "/")});
  CHECK(s.Content("/b") == "A");
  CHECK(s.Content("/c") == "L");
  CHECK(s.tree.Find("/c")->layer == 1);
  CHECK_FALSE(s.Has("/d"));
  REQUIRE(s.diags.size() == 2);
  CHECK(s.diags[0].path == "/d");
  CHECK(s.diags[0].layer == 1);
  CHECK(s.diags[0].message == "hard link to missing target /nope; skipped");
  CHECK(s.diags[1].message == "hard link to directory /; skipped");
}

TEST_CASE("duplicate entries: the last wins and counts once", "[merge]") {
  Stack s;
  s.Add({F("/x", "first"), F("/x", "second"), D("/y"), F("/y", "file wins")});
  CHECK(s.Content("/x") == "second");
  CHECK(s.tree.Find("/y")->type == NodeType::kRegular);
  CHECK(s.stats[0].added == 2);
  CHECK(s.stats[0].deleted == 0);
}

TEST_CASE("provenance: last writer, earlier writers, re-creation after deletion", "[merge]") {
  Stack s;
  s.Add({F("/p", "0")});
  s.Add({F("/p", "1")});
  s.Add({Wh("/p")});
  s.Add({F("/p", "3")});
  const Node* n = s.tree.Find("/p");
  REQUIRE(n);
  CHECK(n->layer == 3);
  CHECK(n->history == std::vector<int>{0, 1});
  CHECK(s.tree.FindDeleted("/p") == nullptr);
  CHECK(s.stats[3].added == 1);
}

TEST_CASE("entries under a symlink loop or a file are skipped with a diagnostic", "[merge]") {
  Stack s;
  s.Add({L("/loop", "loop"), F("/file")});
  s.Add({F("/loop/x"), F("/file/y"), {"/dev/null", EntryKind::kCharDevice, 0666, 0, "", nullptr}});
  CHECK_FALSE(s.Has("/loop/x"));
  CHECK_FALSE(s.Has("/file/y"));
  REQUIRE(s.diags.size() == 2);
  CHECK(s.diags[0].path == "/loop/x");
  CHECK(s.diags[1].path == "/file/y");
  REQUIRE(s.Has("/dev/null"));
  CHECK(s.tree.Find("/dev/null")->type == NodeType::kCharDevice);
  CHECK(s.tree.Find("/dev")->type == NodeType::kDirectory);  // implicit parent
}

}  // namespace
}  // namespace imgcheck::image
