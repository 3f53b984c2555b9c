#include "image/tree.h"

#include <catch2/catch.hpp>

#include "fake_image.h"

namespace imgcheck::image {
namespace {

Tree Make(std::initializer_list<std::pair<std::string, std::string>> links,
          std::initializer_list<std::string> dirs, std::initializer_list<std::string> files) {
  testing::FakeImage f;
  for (const auto& d : dirs) f.Dir(d);
  for (const auto& p : files) f.File(p);
  for (const auto& [p, target] : links) f.Link(p, target);
  return f.tree();
}

TEST_CASE("Resolve follows links inside the image root", "[tree]") {
  Tree t = Make({{"/lib", "usr/lib"},
                 {"/usr/lib/libc.so", "libc.so.6"},
                 {"/usr/lib/abs", "/usr/lib/libc.so.6"},
                 {"/usr/lib/up", "../../../../etc/passwd"},
                 {"/loop1", "loop2"},
                 {"/loop2", "/loop1"},
                 {"/self", "self"},
                 {"/dangling", "nowhere/x"}},
                {"/usr", "/usr/lib", "/etc"}, {"/usr/lib/libc.so.6", "/etc/passwd"});

  auto r = t.Resolve("/lib/libc.so");
  REQUIRE(r);
  CHECK(r->path == "/usr/lib/libc.so.6");
  REQUIRE(r->node);
  CHECK(r->node->type == NodeType::kRegular);

  auto nofollow = t.Resolve("/lib/libc.so", false);
  REQUIRE(nofollow);
  CHECK(nofollow->path == "/usr/lib/libc.so");
  CHECK(nofollow->node->type == NodeType::kSymlink);

  // An absolute target restarts at the image root, not the host's.
  CHECK(t.Resolve("/lib/abs")->path == "/usr/lib/libc.so.6");
  // ".." is clamped at "/": the link cannot climb out of the image.
  CHECK(t.Resolve("/usr/lib/up")->path == "/etc/passwd");
  CHECK(t.Resolve("/../../usr/../etc/./passwd")->path == "/etc/passwd");
  // ".." after a symlink leaves the link's target, not the link (physical resolution).
  CHECK(t.Resolve("/lib/../lib/libc.so.6")->path == "/usr/lib/libc.so.6");
  CHECK(t.Resolve("/lib/..")->path == "/usr");

  CHECK_FALSE(t.Resolve("/loop1"));
  CHECK_FALSE(t.Resolve("/self"));
  CHECK_FALSE(t.Resolve("/loop1/x"));
  CHECK(t.Resolve("/loop1", false)->path == "/loop1");

  auto dangling = t.Resolve("/dangling");
  REQUIRE(dangling);
  CHECK(dangling->path == "/nowhere/x");
  CHECK(dangling->node == nullptr);

  // A regular file in the middle of a path is not a directory.
  CHECK_FALSE(t.Resolve("/etc/passwd/x"));
}

TEST_CASE("Resolve gives up after 40 links, as Linux does", "[tree]") {
  testing::FakeImage f;
  f.File("/f");
  for (int i = 0; i < 45; ++i)
    f.Link("/l" + std::to_string(i), i == 0 ? "f" : "l" + std::to_string(i - 1));
  const Tree& t = f.tree();
  CHECK(t.Resolve("/l39")->path == "/f");  // 40 links
  CHECK_FALSE(t.Resolve("/l40"));          // 41 links
}

TEST_CASE("List gives direct children only, sorted", "[tree]") {
  Tree t = Make({}, {"/a", "/a/b", "/a/b-x", "/ab"}, {"/a/b/c", "/a/z", "/a/b/d/e"});
  CHECK(t.List("/a") == std::vector<std::string>{"b", "b-x", "z"});
  CHECK(t.List("/") == std::vector<std::string>{"a", "ab"});
  CHECK(t.List("/nothing").empty());
  CHECK(t.Find("/a/z") != nullptr);
  CHECK(t.Find("/a/y") == nullptr);
  CHECK(t.FindDeleted("/a/z") == nullptr);
}

}  // namespace
}  // namespace imgcheck::image
