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
  WriteOciLayout(dir / "layout", r);
  PrivateDir out;
  image::LoadOptions o;
  std::set<std::string> wanted = {"/usr/lib/libcudnn.so.9.1.0", "/usr/lib/libcudnn.so.9",
                                  "/usr/lib/absent.so"};
  auto got = ExtractFiles("oci:" + (dir / "layout").string() + ":latest", o, wanted, out.path());
  // Only regular files: the symlink and the absent path are left out.
  REQUIRE(got.size() == 1);
  CHECK(ReadFile(got.at("/usr/lib/libcudnn.so.9.1.0")) == "new cudnn");

  // Same size, same first 4 KiB, different bytes: the two copies cannot be told apart...
  CHECK_THROWS_AS(ExtractFiles("oci:" + (dir / "layout").string() + ":latest", o,
                               {"/usr/lib/libcudart.so.12.8.90"}, out.path()),
                  util::Fatal);
  // ...unless only the layer that last wrote the file is read, as the probe does.
  auto top = ExtractFiles("oci:" + (dir / "layout").string() + ":latest", o,
                          {"/usr/lib/libcudart.so.12.8.90"}, out.path(), {1});
  REQUIRE(top.size() == 1);
  CHECK(ReadFile(top.at("/usr/lib/libcudart.so.12.8.90")) == big.substr(0, big.size() - 1) + "Z");
}

TEST_CASE("extract reads only the layers it is given") {
  TempDir dir;
  ImageRecipe r;
  r.layers.push_back({{Dir("opt"), File("opt/base.txt", "base")}, Compression::kGzip, "base"});
  r.layers.push_back({{File("opt/libcudnn.so.9", "cudnn")}, Compression::kGzip, "cudnn"});
  WrittenImage written = WriteOciLayout(dir / "layout", r);
  // The base layer's blob is garbage now: reading it would fail the digest check.
  WriteFile(BlobPath(dir / "layout", written.layers[0].digest), "garbage");
  std::string ref = "oci:" + (dir / "layout").string() + ":latest";
  PrivateDir out;
  auto got = ExtractFiles(ref, image::LoadOptions{}, {"/opt/libcudnn.so.9"}, out.path(), {1});
  REQUIRE(got.size() == 1);
  CHECK(ReadFile(got.at("/opt/libcudnn.so.9")) == "cudnn");
  CHECK_THROWS_AS(ExtractFiles(ref, image::LoadOptions{}, {"/opt/libcudnn.so.9"}, out.path()),
                  util::Fatal);
}

TEST_CASE("a large file is extracted whole") {
  TempDir dir;
  std::string big(5 << 20, 'q');
  big.back() = '!';
  ImageRecipe r;
  r.layers.push_back({{Dir("lib"), File("lib/libcublasLt.so.12", big)}, Compression::kGzip, "x"});
  WriteOciLayout(dir / "layout", r);
  PrivateDir out;
  auto got = ExtractFiles("oci:" + (dir / "layout").string() + ":latest", image::LoadOptions{},
                          {"/lib/libcublasLt.so.12"}, out.path());
  REQUIRE(got.size() == 1);
  CHECK(ReadFile(got.at("/lib/libcublasLt.so.12")) == big);
}

TEST_CASE("materialise: the image's file name, the soname link beside it, load order kept") {
  PrivateDir out;
  TempDir src;
  WriteFile(src / "a", "cudnn bytes");
  WriteFile(src / "b", "cudart bytes");
  std::vector<PlannedLibrary> plan = {
      {"cudart", "libcudart.so.12", "/usr/local/cuda/lib64/libcudart.so.12.8.90", 2, "12.8.90", {}},
      {"cudnn", "libcudnn.so.9", "/usr/lib/libcudnn.so.9.1.0", 3, "9.1.0", {}},
  };
  std::map<std::string, fs::path> extracted = {
      {"/usr/lib/libcudnn.so.9.1.0", src / "a"},
      {"/usr/local/cuda/lib64/libcudart.so.12.8.90", src / "b"}};
  auto staged = Materialise(plan, out.path(), extracted);
  REQUIRE(staged.size() == 2);
  CHECK(staged[0].planned.role == "cudart");
  CHECK(staged[0].local_path == (out.path() / "libcudart.so.12").string());
  CHECK(fs::read_symlink(out.path() / "libcudart.so.12") == "libcudart.so.12.8.90");
  CHECK(ReadFile(out.path() / "libcudnn.so.9") == "cudnn bytes");

  std::vector<PlannedLibrary> hostile = {
      {"cudnn", "../../etc/x", "/usr/lib/libcudnn.so.9", 0, "", {}}};
  WriteFile(src / "c", "x");
  CHECK_THROWS_AS(Materialise(hostile, out.path(), {{"/usr/lib/libcudnn.so.9", src / "c"}}),
                  util::Fatal);
  std::vector<PlannedLibrary> absent = {{"cudnn", "libcudnn.so.9", "/nowhere", 0, "", {}}};
  CHECK_THROWS_AS(Materialise(absent, out.path(), {}), util::Fatal);
}

}  // namespace
}  // namespace imgcheck::probe
