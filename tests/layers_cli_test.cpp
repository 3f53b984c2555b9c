// Black-box tests of `imgcheck layers`: images written from recipes, read by the built binary.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "image_writer.h"
#include "support.h"

namespace fs = std::filesystem;
using namespace imgcheck::testing;
using Catch::Matchers::Contains;

namespace {

ImageRecipe Recipe() {
  ImageRecipe r;
  r.layers.push_back(MakeLayer(
      {Dir("etc"), File("etc/a", "a"), File("etc/b", "b"), Dir("opt"), File("opt/x", "x")},
      Compression::kGzip, "ADD base.tar /"));
  r.layers.push_back(EmptyLayer("ENV A=1"));
  r.layers.push_back(
      MakeLayer({File("etc/a", "a2"), Whiteout("etc/b"), Opaque("opt"), File("new", "n")},
                Compression::kZstd, "RUN   change \n  things"));
  return r;
}

TEST_CASE("imgcheck layers prints each layer with sizes, history and counts", "[cli][layers]") {
  TempDir tmp;
  WrittenImage w = WriteOciLayout(tmp / "layout", Recipe());
  CommandResult r =
      Run(ImgcheckCommand("layers --quiet --no-cache oci:" + (tmp / "layout").string()));
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.output, Contains("manifest: " + w.manifest_digest));
  CHECK_THAT(r.output, Contains(w.layers[0].digest.substr(0, 19)));
  CHECK_THAT(r.output, Contains("ADD base.tar /"));
  CHECK_THAT(r.output, Contains("RUN change things"));
  CHECK_THAT(r.output, !Contains("ENV A=1"));

  CommandResult j = Run(
      ImgcheckCommand("layers --quiet --no-cache --format json oci:" + (tmp / "layout").string()) +
      " 2>/dev/null");
  REQUIRE(j.status == 0);
  nlohmann::json doc = nlohmann::json::parse(j.output);
  REQUIRE(doc["layers"].size() == 2);
  const auto& l0 = doc["layers"][0];
  CHECK(l0["digest"] == w.layers[0].digest);
  CHECK(l0["diff_id"] == w.layers[0].diff_id);
  CHECK(l0["compressed_size"] == w.layers[0].compressed_size);
  CHECK(l0["size"] == w.layers[0].size);
  CHECK(l0["added"] == 5);
  const auto& l1 = doc["layers"][1];
  CHECK(l1["created_by"] == "RUN   change \n  things");
  CHECK(l1["added"] == 1);    // /new
  CHECK(l1["changed"] == 1);  // /etc/a
  CHECK(l1["deleted"] == 2);  // /etc/b, /opt/x
  CHECK(doc["diagnostics"].empty());
}

TEST_CASE("imgcheck layers: unreadable images exit 2 with one line", "[cli][layers]") {
  TempDir tmp;
  WrittenImage w = WriteOciLayout(tmp / "layout", Recipe());
  std::string blob = ReadFile(BlobPath(tmp / "layout", w.layers[1].digest));
  blob[blob.size() / 2] ^= 0x20;
  WriteFile(BlobPath(tmp / "layout", w.layers[1].digest), blob);
  CommandResult r =
      Run(ImgcheckCommand("layers --quiet --no-cache oci:" + (tmp / "layout").string()));
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Contains("layer 1 " + w.layers[1].digest + ": digest mismatch"));
  CHECK(std::count(r.output.begin(), r.output.end(), '\n') == 1);

  CommandResult missing =
      Run(ImgcheckCommand("layers --quiet --no-cache oci:" + (tmp / "nothing").string()));
  CHECK(missing.status == 2);
  CHECK_THAT(missing.output, Contains("no such directory"));

  ImageRecipe multi = Recipe();
  multi.architecture = "arm64";
  WriteMultiPlatformLayout(tmp / "multi", {multi});
  CommandResult platform =
      Run(ImgcheckCommand("layers --quiet --no-cache oci:" + (tmp / "multi").string()));
  CHECK(platform.status == 2);
  CHECK_THAT(platform.output,
             Contains("no image for platform linux/amd64; available: linux/arm64"));
  CHECK(Run(ImgcheckCommand("layers --quiet --no-cache --platform linux/arm64 oci:" +
                            (tmp / "multi").string()))
            .status == 0);
}

TEST_CASE("imgcheck layers reads docker-archive and dir: too", "[cli][layers]") {
  TempDir tmp;
  ImageRecipe r = Recipe();
  WriteDockerArchive(tmp / "d.tar", r, "example/x:1");
  CommandResult d = Run(ImgcheckCommand("layers --quiet --no-cache --format json docker-archive:" +
                                        (tmp / "d.tar").string()) +
                        " 2>/dev/null");
  REQUIRE(d.status == 0);
  CHECK(nlohmann::json::parse(d.output)["layers"][1]["deleted"] == 2);
  WriteFile(tmp / "rootfs/usr/lib/libcuda.so.1", "x");
  CommandResult dir = Run(
      ImgcheckCommand("layers --quiet --no-cache --format json dir:" + (tmp / "rootfs").string()) +
      " 2>/dev/null");
  REQUIRE(dir.status == 0);
  CHECK(nlohmann::json::parse(dir.output)["layers"][0]["added"] == 3);  // /usr, /usr/lib, the file
}

}  // namespace
