// The merged tree against independent tools: umoci (the OCI unpacker) lays the same layer
// stacks out on disk, and skopeo converts images between transports.
#include <unistd.h>

#include <catch2/catch.hpp>

#include "image/image.h"
#include "image_writer.h"
#include "support.h"
#include "util/sha256.h"

namespace imgcheck::image {
namespace {

namespace fs = std::filesystem;
using namespace imgcheck::testing;

LayerRecipe Layer(std::vector<Entry> entries, std::string created_by,
                  Compression c = Compression::kGzip) {
  LayerRecipe l;
  l.entries = std::move(entries);
  l.compression = c;  // umoci 0.4 reads gzip and plain layers, not zstd
  l.created_by = std::move(created_by);
  return l;
}

// Layer stacks covering every whiteout case of OCI image-spec layer.md, and the replacements.
std::vector<std::pair<std::string, ImageRecipe>> Stacks() {
  std::vector<std::pair<std::string, ImageRecipe>> out;
  ImageRecipe r;
  r.layers = {
      Layer({Dir("a"), File("a/f", "f0"), Dir("a/b"), File("a/b/g", "g0"), Symlink("s", "a/f"),
             File("top", "t0"), Dir("keep"), File("keep/k", "k")},
            "base"),
      Layer({Whiteout("a/f"), Whiteout("a/b"), Whiteout("s"), Whiteout("missing"),
             Whiteout("a/nothing")},
            "delete a file, a directory, a symlink, missing paths"),
  };
  out.emplace_back("plain whiteouts", r);

  r.layers = {
      Layer({Dir("a"), File("a/f", "old"), File("a/g", "old"), Dir("d"), File("d/x", "x"),
             Dir("d/sub"), File("d/sub/y", "y")},
            "base"),
      Layer({Whiteout("a/f"), File("a/f", "new"), File("a/g", "new"), Whiteout("a/g"),
             File("d/new", "n"), Opaque("d"), File("d/after", "a"), Dir("e"), File("e/z", "z"),
             Whiteout("e/z")},
            "whiteouts and opaque markers in the same layer as new entries, both orders",
            Compression::kNone),
  };
  out.emplace_back("same-layer whiteouts", r);

  r.layers = {
      Layer({Dir("r"), File("r/c", "c"), File("q", "q"), Symlink("l", "r"), Dir("o"), Dir("o/p"),
             File("o/p/q", "1")},
            "base"),
      Layer({File("r", "file now"), Dir("q"), File("q/n", "n"), Dir("l"), File("l/m", "m"),
             Opaque("o")},
            "file over dir, dir over file, dir over symlink, opaque with subdirs"),
      Layer({Dir("r"), File("r/back", "b"), Whiteout("q"), File("o/p/q", "2")}, "and back again"),
  };
  out.emplace_back("replacement", r);

  r.layers = {
      Layer({Dir("usr"), Dir("usr/lib"), Symlink("lib", "usr/lib"), File("usr/lib/old.so", "o"),
             Symlink("abs", "/usr"), File("usr/lib/libc.so.6", "libc")},
            "usrmerge base"),
      Layer({Dir("lib"), File("lib/libz.so.1", "z"), Whiteout("abs/lib/old.so"),
             Hardlink("lib/hl", "usr/lib/libc.so.6"), File("dup", "one"), File("dup", "two")},
            "entries through symlinked parents; hard link to a lower file; duplicates"),
  };
  out.emplace_back("symlinked parents", r);
  return out;
}

struct Seen {
  std::string type, link, sha;
  bool operator==(const Seen&) const = default;
};

std::map<std::string, Seen> FromTree(const Image& img) {
  std::map<std::string, Seen> out;
  for (const auto& [path, n] : img.tree.nodes()) {
    if (path == "/") continue;
    Seen s;
    switch (n.type) {
      case NodeType::kRegular:
        s.type = "file";
        REQUIRE(n.content);
        s.sha = util::Sha256Digest(*n.content->View(0, n.content->size()));
        break;
      case NodeType::kDirectory:
        s.type = "dir";
        break;
      case NodeType::kSymlink:
        s.type = "link";
        s.link = n.link_target;
        break;
      default:
        s.type = "special";
        break;
    }
    out[path] = s;
  }
  return out;
}

std::map<std::string, Seen> FromDisk(const fs::path& root) {
  std::map<std::string, Seen> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    Seen s;
    fs::file_status st = fs::symlink_status(e.path());
    if (fs::is_symlink(st)) {
      s.type = "link";
      s.link = fs::read_symlink(e.path()).string();
    } else if (fs::is_directory(st)) {
      s.type = "dir";
    } else if (fs::is_regular_file(st)) {
      s.type = "file";
      s.sha = util::Sha256Digest(ReadFile(e.path()));
    } else {
      s.type = "special";
    }
    out["/" + e.path().lexically_relative(root).generic_string()] = s;
  }
  return out;
}

TEST_CASE("the merged tree equals umoci's unpacked rootfs", "[oracle][umoci]") {
  if (!HaveProgram("umoci")) return Skip("umoci not installed");
  LoadOptions capture_all;
  capture_all.capture = [](std::string_view, uint64_t, uint32_t) { return CapturePrefix(1 << 20); };
  for (const auto& [name, recipe] : Stacks()) {
    INFO("stack: " << name);
    TempDir tmp;
    WriteOciLayout(tmp / "layout", recipe, "t");
    std::string rootless = geteuid() == 0 ? "" : " --rootless";
    CommandResult r = Run("umoci raw unpack" + rootless + " --image '" + (tmp / "layout").string() +
                          ":t' '" + (tmp / "rootfs").string() + "'");
    REQUIRE(r.status == 0);
    Image img = Load("oci:" + (tmp / "layout").string() + ":t", capture_all);
    std::map<std::string, Seen> ours = FromTree(img), theirs = FromDisk(tmp / "rootfs");
    for (const auto& [path, s] : theirs) {
      INFO("umoci has " << path << " (" << s.type << ")");
      REQUIRE(ours.count(path));
      CHECK(ours[path] == s);
    }
    for (const auto& [path, s] : ours) {
      INFO("imgcheck has " << path << " (" << s.type << ")");
      CHECK(theirs.count(path));
    }
  }
}

TEST_CASE("images converted by skopeo read back identically", "[oracle][skopeo]") {
  if (!HaveProgram("skopeo")) return Skip("skopeo not installed");
  LoadOptions capture_all;
  capture_all.capture = [](std::string_view, uint64_t, uint32_t) { return CapturePrefix(1 << 20); };
  TempDir tmp;
  ImageRecipe recipe = Stacks()[2].second;
  recipe.env = {"CUDA_VERSION=12.1.1"};
  recipe.layers.insert(recipe.layers.begin() + 1, EmptyLayer("ENV CUDA_VERSION=12.1.1"));
  WriteOciLayout(tmp / "layout", recipe, "t");
  std::string src = "oci:" + (tmp / "layout").string() + ":t";
  Image want = Load(src, capture_all);
  const std::vector<std::string> targets = {
      "docker-archive:" + (tmp / "d.tar").string() + ":example/img:1",
      "oci-archive:" + (tmp / "o.tar").string() + ":t",
      "oci:" + (tmp / "copy").string() + ":t",
  };
  for (size_t i = 0; i < targets.size(); ++i) {
    INFO(targets[i]);
    CommandResult r = Run("skopeo --insecure-policy copy -q " + src + " " + targets[i]);
    REQUIRE(r.status == 0);
    Image got = Load(targets[i], capture_all);
    CHECK(FromTree(got) == FromTree(want));
    CHECK(got.config.env == want.config.env);
    REQUIRE(got.layers.size() == want.layers.size());
    for (size_t l = 0; l < got.layers.size(); ++l) {
      CHECK(got.layers[l].diff_id == want.layers[l].diff_id);
      CHECK(got.layers[l].created_by == want.layers[l].created_by);
      CHECK(got.layers[l].added == want.layers[l].added);
      CHECK(got.layers[l].changed == want.layers[l].changed);
      CHECK(got.layers[l].deleted == want.layers[l].deleted);
    }
  }
  // And back: docker-archive -> OCI layout by skopeo, read again.
  REQUIRE(Run("skopeo --insecure-policy copy -q " + targets[0] + " oci:" + (tmp / "back").string() +
              ":t")
              .status == 0);
  CHECK(FromTree(Load("oci:" + (tmp / "back").string() + ":t", capture_all)) == FromTree(want));
}

}  // namespace
}  // namespace imgcheck::image
