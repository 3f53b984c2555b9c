// Staging: files streamed out of a real image fixture, soname links, the private directory.
#include "probe/stage.h"

#include <sys/stat.h>

#include <catch2/catch.hpp>

#include "image_writer.h"
#include "support.h"
#include "util/error.h"

namespace imgcheck::probe {
namespace {

namespace fs = std::filesystem;
using namespace imgcheck::testing;

TEST_CASE("the private directory is 0700 and removed with its contents") {
  fs::path kept;
  {
    PrivateDir d;
    kept = d.path();
    struct stat st {};
    REQUIRE(stat(kept.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0700);
    WriteFile(kept / "x", "y");
  }
  CHECK_FALSE(fs::exists(kept));
}

// The scan's tree of `ref`, keeping whole files (up to 1 MiB) as the catalog keeps ELF headers:
// what extraction checks its copies against.
image::Image Scanned(const std::string& ref) {
  image::LoadOptions o;
  o.capture = [](std::string_view, uint64_t, uint32_t) { return image::CapturePrefix(1 << 20); };
  return image::Load(ref, o);
}

std::string Layout(const TempDir& dir, const ImageRecipe& r) {
  WriteOciLayout(dir / "layout", r);
  return "oci:" + (dir / "layout").string() + ":latest";
}

TEST_CASE("extract streams the merged tree's copy of each file, whichever layer wrote it") {
  TempDir dir;
  std::string big(3 << 20, 'a');
  for (size_t i = 0; i < big.size(); i += 4099) big[i] = static_cast<char>('0' + i % 10);
  ImageRecipe r;
  r.layers.push_back({{Dir("usr"), Dir("usr/lib"), File("usr/lib/libcudnn.so.9.1.0", "old cudnn"),
                       File("usr/lib/libcudart.so.12.8.90", big),
                       Symlink("usr/lib/libcudnn.so.9", "libcudnn.so.9.1.0")},
                      Compression::kGzip,
                      "COPY old"});
  // A later layer overwrites one file with the same size and same first bytes but other bytes
  // at the end, and the other with new content.
  r.layers.push_back({{File("usr/lib/libcudnn.so.9.1.0", "new cudnn"),
                       File("usr/lib/libcudart.so.12.8.90", big.substr(0, big.size() - 1) + "Z")},
                      Compression::kZstd,
                      "COPY new"});
  std::string ref = Layout(dir, r);
  image::Image scanned = image::Load(ref, {});
  PrivateDir out;
  std::set<std::string> wanted = {"/usr/lib/libcudnn.so.9.1.0", "/usr/lib/libcudnn.so.9",
                                  "/usr/lib/absent.so", "/usr/lib/libcudart.so.12.8.90"};
  auto got = ExtractFiles(ref, image::LoadOptions{}, scanned.tree, wanted, out.path());
  // Only regular files: the symlink and the absent path are left out.
  REQUIRE(got.size() == 2);
  CHECK(ReadFile(got.at("/usr/lib/libcudnn.so.9.1.0")) == "new cudnn");
  CHECK(ReadFile(got.at("/usr/lib/libcudart.so.12.8.90")) == big.substr(0, big.size() - 1) + "Z");
  // Nothing but the two kept copies is left in the directory.
  CHECK(std::distance(fs::directory_iterator(out.path()), fs::directory_iterator()) == 2);
}

TEST_CASE("extract: a hard link gets the bytes of the entry it names, as tar extracts it") {
  TempDir dir;
  ImageRecipe r;
  r.layers.push_back({{Dir("usr"), Dir("usr/lib"), File("usr/lib/libcudnn.so.9", "old cudnn")},
                      Compression::kGzip,
                      "base"});
  // Debian's way: one inode, two names. The link's target is rewritten after the link in the
  // same layer: the link keeps the bytes it was made from (tar unlinks, then creates).
  r.layers.push_back({{File("usr/lib/libcudnn.so.9.1.0", "cudnn 9.1"),
                       Hardlink("usr/lib/libcudnn.so.9", "usr/lib/libcudnn.so.9.1.0"),
                       File("usr/lib/libother.so", "other 1"),
                       Hardlink("usr/lib/libother.so.1", "usr/lib/libother.so"),
                       File("usr/lib/libother.so", "other 2")},
                      Compression::kGzip,
                      "dpkg -i"});
  std::string ref = Layout(dir, r);
  image::Image scanned = Scanned(ref);
  PrivateDir out;
  auto got = ExtractFiles(ref, image::LoadOptions{}, scanned.tree,
                          {"/usr/lib/libcudnn.so.9", "/usr/lib/libcudnn.so.9.1.0",
                           "/usr/lib/libother.so.1", "/usr/lib/libother.so"},
                          out.path());
  REQUIRE(got.size() == 4);
  CHECK(ReadFile(got.at("/usr/lib/libcudnn.so.9")) == "cudnn 9.1");
  CHECK(ReadFile(got.at("/usr/lib/libcudnn.so.9.1.0")) == "cudnn 9.1");
  CHECK(got.at("/usr/lib/libcudnn.so.9") != got.at("/usr/lib/libcudnn.so.9.1.0"));
  CHECK(ReadFile(got.at("/usr/lib/libother.so.1")) == "other 1");
  CHECK(ReadFile(got.at("/usr/lib/libother.so")) == "other 2");
}

TEST_CASE("extract: a hard link to a file of a lower layer follows the merged tree") {
  // The link in layer 3 names a file layer 0 wrote and layer 1 rewrote. Reading only the layers
  // that last wrote the wanted files (0 and 3) would give layer 0's bytes: the scan's copy tells
  // them apart, and every layer is read.
  TempDir dir;
  ImageRecipe r;
  r.layers.push_back(
      {{Dir("lib"), File("lib/libcudnn.so.9.0", "cudnn v0"), File("lib/libcudart.so.12", "cudart")},
       Compression::kGzip,
       "0"});
  r.layers.push_back({{File("lib/libcudnn.so.9.0", "cudnn v1")}, Compression::kGzip, "1"});
  r.layers.push_back({{File("lib/unrelated", "x")}, Compression::kGzip, "2"});
  r.layers.push_back(
      {{Hardlink("lib/libcudnn.so.9", "lib/libcudnn.so.9.0")}, Compression::kGzip, "3"});
  std::string ref = Layout(dir, r);
  image::Image scanned = Scanned(ref);
  PrivateDir out;
  auto got = ExtractFiles(ref, image::LoadOptions{}, scanned.tree,
                          {"/lib/libcudnn.so.9", "/lib/libcudart.so.12"}, out.path());
  REQUIRE(got.size() == 2);
  CHECK(ReadFile(got.at("/lib/libcudnn.so.9")) == "cudnn v1");
  CHECK(ReadFile(got.at("/lib/libcudart.so.12")) == "cudart");
}

TEST_CASE("extract reads only the layers that last wrote the files when they place them") {
  TempDir dir;
  ImageRecipe r;
  r.layers.push_back({{Dir("opt"), File("opt/base.txt", "base")}, Compression::kGzip, "base"});
  r.layers.push_back({{File("opt/libcudnn.so.9", "cudnn")}, Compression::kGzip, "cudnn"});
  WrittenImage written = WriteOciLayout(dir / "layout", r);
  std::string ref = "oci:" + (dir / "layout").string() + ":latest";
  image::Image scanned = Scanned(ref);
  // The base layer's blob is garbage now: reading it would fail the digest check.
  WriteFile(BlobPath(dir / "layout", written.layers[0].digest), "garbage");
  PrivateDir out;
  auto got =
      ExtractFiles(ref, image::LoadOptions{}, scanned.tree, {"/opt/libcudnn.so.9"}, out.path());
  REQUIRE(got.size() == 1);
  CHECK(ReadFile(got.at("/opt/libcudnn.so.9")) == "cudnn");
  CHECK_THROWS_AS(
      ExtractFiles(ref, image::LoadOptions{}, scanned.tree, {"/opt/base.txt"}, out.path()),
      util::Fatal);
}

TEST_CASE("extract refuses an image that reads differently from the one scanned") {
  TempDir dir;
  ImageRecipe r;
  r.layers.push_back({{Dir("opt"), File("opt/libcudnn.so.9", "cudnn A")}, Compression::kGzip, "a"});
  std::string ref = Layout(dir, r);
  image::Image scanned = Scanned(ref);
  // The tag now names another image, with the same file at the same size but other bytes.
  TempDir other;
  r.layers[0].entries[1] = File("opt/libcudnn.so.9", "cudnn B");
  std::string moved = Layout(other, r);
  PrivateDir out;
  CHECK_THROWS_WITH(
      ExtractFiles(moved, image::LoadOptions{}, scanned.tree, {"/opt/libcudnn.so.9"}, out.path()),
      Catch::Contains("differs from the one scanned"));
}

TEST_CASE("a large file is extracted whole") {
  TempDir dir;
  std::string big(5 << 20, 'q');
  big.back() = '!';
  ImageRecipe r;
  r.layers.push_back({{Dir("lib"), File("lib/libcublasLt.so.12", big)}, Compression::kGzip, "x"});
  std::string ref = Layout(dir, r);
  PrivateDir out;
  auto got = ExtractFiles(ref, image::LoadOptions{}, Scanned(ref).tree, {"/lib/libcublasLt.so.12"},
                          out.path());
  REQUIRE(got.size() == 1);
  CHECK(ReadFile(got.at("/lib/libcublasLt.so.12")) == big);
}

// Materialises `plan` into `out`, the extracted copy of each image path of `bytes` a file
// holding those bytes (written under `src`).
std::vector<StagedLibrary> MaterialiseBytes(const std::vector<PlannedLibrary>& plan,
                                            const PrivateDir& out, const TempDir& src,
                                            const std::map<std::string, std::string>& bytes) {
  std::map<std::string, fs::path> extracted;
  for (const auto& [path, content] : bytes) {
    fs::path copy = src / std::to_string(extracted.size());
    WriteFile(copy, content);
    extracted[path] = copy;
  }
  return Materialise(plan, out.path(), extracted);
}

TEST_CASE("materialise: a soname equal to another library's file name swaps nothing") {
  // An image whose libcudart has the SONAME libcudnn.so.9, the file name of its cuDNN: one
  // staging directory would let the soname link stand for cuDNN's file.
  PrivateDir out;
  TempDir src;
  std::vector<PlannedLibrary> plan = {
      {"cudart", "libcudnn.so.9", "/usr/local/cuda/lib64/libcudart.so.12", 2, "", {}},
      {"cudnn", "libcudnn.so.9.1.0", "/usr/lib/x86_64-linux-gnu/libcudnn.so.9", 3, "", {}},
  };
  auto staged = MaterialiseBytes(plan, out, src,
                                 {{"/usr/local/cuda/lib64/libcudart.so.12", "cudart bytes"},
                                  {"/usr/lib/x86_64-linux-gnu/libcudnn.so.9", "cudnn bytes"}});
  REQUIRE(staged.size() == 2);
  CHECK(ReadFile(staged[0].local_path) == "cudart bytes");
  CHECK(ReadFile(staged[1].local_path) == "cudnn bytes");
  CHECK(fs::read_symlink(out.path() / "0" / "libcudnn.so.9") == "libcudart.so.12");
}

TEST_CASE("materialise: the same file planned under two names is staged twice") {
  PrivateDir out;
  TempDir src;
  std::vector<PlannedLibrary> plan = {
      {"cudnn", "libcudnn.so.9", "/usr/lib/libcudnn.so.9.1.0", 3, "", {}},
      {"cudnn", "libcudnn.so.9.1", "/usr/lib/libcudnn.so.9.1.0", 3, "", {}},
  };
  auto staged = MaterialiseBytes(plan, out, src, {{"/usr/lib/libcudnn.so.9.1.0", "cudnn bytes"}});
  REQUIRE(staged.size() == 2);
  CHECK(ReadFile(staged[0].local_path) == "cudnn bytes");
  CHECK(ReadFile(staged[1].local_path) == "cudnn bytes");
}

TEST_CASE("materialise: the image's file name, the soname link beside it, load order kept") {
  PrivateDir out;
  TempDir src;
  std::vector<PlannedLibrary> plan = {
      {"cudart", "libcudart.so.12", "/usr/local/cuda/lib64/libcudart.so.12.8.90", 2, "12.8.90", {}},
      {"cudnn", "libcudnn.so.9", "/usr/lib/libcudnn.so.9.1.0", 3, "9.1.0", {}},
  };
  auto staged = MaterialiseBytes(plan, out, src,
                                 {{"/usr/lib/libcudnn.so.9.1.0", "cudnn bytes"},
                                  {"/usr/local/cuda/lib64/libcudart.so.12.8.90", "cudart bytes"}});
  REQUIRE(staged.size() == 2);
  CHECK(staged[0].planned.role == "cudart");
  CHECK(staged[0].local_path == (out.path() / "0" / "libcudart.so.12.8.90").string());
  CHECK(fs::read_symlink(out.path() / "0" / "libcudart.so.12") == "libcudart.so.12.8.90");
  CHECK(ReadFile(staged[1].local_path) == "cudnn bytes");
  CHECK(ReadFile(out.path() / "1" / "libcudnn.so.9") == "cudnn bytes");

  std::vector<PlannedLibrary> hostile = {
      {"cudnn", "../../etc/x", "/usr/lib/libcudnn.so.9", 0, "", {}}};
  CHECK_THROWS_AS(MaterialiseBytes(hostile, out, src, {{"/usr/lib/libcudnn.so.9", "x"}}),
                  util::Fatal);
  std::vector<PlannedLibrary> absent = {{"cudnn", "libcudnn.so.9", "/nowhere", 0, "", {}}};
  CHECK_THROWS_AS(Materialise(absent, out.path(), {}), util::Fatal);
}

}  // namespace
}  // namespace imgcheck::probe
